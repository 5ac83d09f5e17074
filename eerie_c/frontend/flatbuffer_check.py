"""The structure of an untrusted .tflite file, checked before anything is read from it.

`verify_flatbuffer(buf)` walks the flatbuffer structure the frontend reads (model, operator
codes, subgraph 0, tensors, quantization, operators, buffers) the way the flatbuffers C++
Verifier does: every table's vtable and every vector / string lies inside the file. The
Python readers do not check bounds (a negative vtable offset silently reads from the end of
the file, a long string is silently cut), so nothing is read before this has passed.
`malformed(...)` is the one-line error every check of the file raises.
"""
from __future__ import annotations

import struct

from ..errors import EerieError


def malformed(what: str, where: str = "") -> EerieError:
    return EerieError(f"malformed TFLite file: {what}" + (f" at {where}" if where else ""))


# ---------------------------------------------------------------------------------------------
# Flatbuffer structure.

class _Buf:
    def __init__(self, buf: bytes):
        self.b = buf
        self.n = len(buf)

    def read(self, fmt: str, pos: int, what: str, where: str):
        size = struct.calcsize(fmt)
        if pos < 0 or pos + size > self.n:
            raise malformed(f"{what} (byte {pos}) lies outside the file ({self.n} bytes)", where)
        return struct.unpack_from(fmt, self.b, pos)[0]

    def table(self, pos: int, where: str) -> "_Table":
        soff = self.read("<i", pos, "table", where)
        vt = pos - soff
        vsize = self.read("<H", vt, "vtable", where)
        tsize = self.read("<H", vt + 2, "vtable", where)
        if vsize < 4 or vsize % 2 or vt + vsize > self.n:
            raise malformed(f"vtable of {vsize} bytes at byte {vt} is invalid", where)
        if tsize < 4 or pos + tsize > self.n:
            raise malformed(f"table of {tsize} bytes at byte {pos} runs past the end of the file", where)
        return _Table(self, pos, vt, vsize, tsize, where)


class _Table:
    def __init__(self, fb: _Buf, pos: int, vt: int, vsize: int, tsize: int, where: str):
        self.fb, self.pos, self.vt, self.vsize, self.tsize, self.where = fb, pos, vt, vsize, tsize, where

    def _field(self, k: int, size: int, name: str) -> int | None:
        voff = 4 + 2 * k
        if voff >= self.vsize:
            return None
        off = self.fb.read("<H", self.vt + voff, "vtable entry", self.where)
        if off == 0:
            return None
        if off < 4 or off + size > self.tsize:
            raise malformed(f"field {name} lies outside its table", self.where)
        return self.pos + off

    def scalar(self, k: int, fmt: str, name: str):
        p = self._field(k, struct.calcsize(fmt), name)
        return None if p is None else self.fb.read(fmt, p, name, self.where)

    def _target(self, k: int, name: str) -> int | None:
        p = self._field(k, 4, name)
        if p is None:
            return None
        return p + self.fb.read("<I", p, name, self.where)

    def vector(self, k: int, elem: int, name: str) -> tuple[int, int] | None:
        """(start of the elements, count) of a vector field, checked to lie inside the file."""
        t = self._target(k, name)
        if t is None:
            return None
        count = self.fb.read("<I", t, f"{name} length", self.where)
        if t + 4 + count * elem > self.fb.n:
            raise malformed(f"{name} ({count} entries at byte {t}) runs past the end of the file",
                            self.where)
        return t + 4, count

    def string(self, k: int, name: str):
        self.vector(k, 1, name)

    def table(self, k: int, name: str, where: str) -> "_Table | None":
        t = self._target(k, name)
        return None if t is None else self.fb.table(t, where)

    def tables(self, k: int, name: str, where_fmt: str) -> list["_Table"]:
        v = self.vector(k, 4, name)
        if v is None:
            return []
        start, count = v
        out = []
        for i in range(count):
            p = start + 4 * i
            out.append(self.fb.table(p + self.fb.read("<I", p, name, self.where), where_fmt.format(i)))
        return out

    def any_fields(self, name: str):
        """A table of a type we read by reflection (builtin options): every present field
        must lie inside the table."""
        for k in range((self.vsize - 4) // 2):
            self._field(k, 1, f"{name} field {k}")


def verify_flatbuffer(buf: bytes) -> None:
    """Structural check of everything the frontend reads; raises EerieError."""
    fb = _Buf(buf)
    model = fb.table(fb.read("<I", 0, "root offset", "the file header"), "the model table")
    model.scalar(0, "<I", "version")
    for i, oc in enumerate(model.tables(1, "operator_codes", "operator code {}")):
        oc.scalar(0, "<b", "deprecated_builtin_code")
        oc.string(1, "custom_code")
        oc.scalar(2, "<i", "version")
        oc.scalar(3, "<i", "builtin_code")
    subgraphs = model.tables(2, "subgraphs", "subgraph {}")
    if not subgraphs:
        raise malformed("the model has no subgraph")
    for i, b in enumerate(model.tables(4, "buffers", "buffer {}")):
        b.vector(0, 1, "data")
        b.scalar(1, "<Q", "offset")
        b.scalar(2, "<Q", "size")
    sg = subgraphs[0]
    for i, t in enumerate(sg.tables(0, "tensors", "tensor {}")):
        t.vector(0, 4, "shape")
        t.scalar(1, "<b", "type")
        t.scalar(2, "<I", "buffer")
        t.string(3, "name")
        q = t.table(4, "quantization", f"tensor {i} quantization")
        if q is not None:
            q.vector(0, 4, "min")
            q.vector(1, 4, "max")
            q.vector(2, 4, "scale")
            q.vector(3, 8, "zero_point")
            q.scalar(4, "<B", "details_type")
            q.scalar(6, "<i", "quantized_dimension")
    sg.vector(1, 4, "inputs")
    sg.vector(2, 4, "outputs")
    for k, op in enumerate(sg.tables(3, "operators", "op {}")):
        op.scalar(0, "<I", "opcode_index")
        op.vector(1, 4, "inputs")
        op.vector(2, 4, "outputs")
        op.scalar(3, "<B", "builtin_options_type")
        opts = op.table(4, "builtin_options", f"op {k} builtin options")
        if opts is not None:
            opts.any_fields("builtin options")
        op.vector(5, 1, "custom_options")
