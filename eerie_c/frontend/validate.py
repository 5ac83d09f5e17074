"""Validation of untrusted .tflite files, before and after they are read into the IR.

Two layers, both raising EerieError with one line naming what is wrong and where:

* `verify_flatbuffer(buf)` walks the flatbuffer structure the frontend reads (model, operator
  codes, subgraph 0, tensors, quantization, operators, buffers) the way the flatbuffers C++
  Verifier does: every table's vtable and every vector / string lies inside the file. The
  Python readers do not check bounds (a negative vtable offset silently reads from the end of
  the file, a long string is silently cut), so nothing is read before this has passed.
* `check_graph(g, file_size)` checks the IR the frontend built: sane limits, quantization
  arrays of the right length, a graph whose every activation is produced exactly once before
  it is used, and the shape / dtype / attribute contract of the op kinds we know, so that
  passes and kernels only ever see a consistent graph.

What is refused follows TFLM: a file TFLM's runtime accepts is not "malformed" here unless
reading it as TFLM does would make the generated code unsafe (out-of-bounds reads, sizes over
the limits). Quantization parameters that TFLM reads leniently are normalised instead, each
with one line in `g.notes` (the report's "Normalised on load" section):

* fewer or more zero points than scales: TFLM's allocator uses the first zero point for every
  channel (micro_allocator.cc), and so does eerie-c;
* per-channel scales whose quantized dimension does not fit the tensor: on a 1-D tensor with
  one scale per element (the converter writes per-channel biases with the filter's dimension,
  e.g. 3 on a [8] bias: TFLM's person-detection model) the dimension is 0; on any other
  tensor that no kernel reads per channel (TFLM reads only the first scale and zero point of
  those) they are left unused;
* the filter of a CONV_2D, DEPTHWISE_CONV_2D or FULLY_CONNECTED: TFLM needs one scale per
  output channel and that many entries along the file's quantized dimension; such a filter
  quantized along another dimension of the same size is read per output channel, like TFLM;
* a zero (or subnormal) scale on a bias (TFLM ignores a bias's quantization) or on a filter's
  channels (multiplier 0: the output zero point, as TFLM computes it). Anywhere else a zero
  scale is refused: it is no step size, and TFLM's arithmetic on it divides by zero.
"""
from __future__ import annotations

import math
import struct

import numpy as np

from ..errors import EerieError
from ..ir.describe import op_where, quote, tensor_where  # noqa: F401 (tflite.py imports quote)

MAX_RANK = 6
MAX_ELEMENTS = 2 ** 31 - 1      # C loops count elements with int
MAX_TENSOR_BYTES = 2 ** 31 - 1  # arena offsets must fit an int too
FUSED_OK = ("NONE", "RELU", "RELU_N1_TO_1", "RELU6")
_INT_RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767),
              "int32": (-2 ** 31, 2 ** 31 - 1), "int64": (-2 ** 31, 2 ** 31 - 1),
              "uint32": (0, 2 ** 32 - 1)}


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


# ---------------------------------------------------------------------------------------------
# The IR, once read.

def check_shape(shape, where: str, what: str = "shape") -> int:
    """Rank and dimension limits; returns the element count."""
    problem = shape_problem(shape, what)
    if problem:
        raise malformed(problem, where)
    return math.prod(int(d) for d in shape)


def shape_problem(shape, what: str = "shape", itemsize: int = 0, allow_zero: bool = True) -> str | None:
    """What is wrong with a tensor shape (rank, a negative or, unless allowed, a zero-size
    dimension, element count, with itemsize its bytes), or None: the IR's limits, whichever
    frontend built the tensor."""
    if len(shape) > MAX_RANK:
        dims = ", ".join(str(d) for d in list(shape)[:8]) + (", ..." if len(shape) > 8 else "")
        return f"{what} [{dims}] has rank {len(shape)} (at most {MAX_RANK})"
    count = 1
    for d in shape:
        if d < 0:
            return f"{what} {list(shape)} has a negative dimension"
        if d == 0 and not allow_zero:
            return f"{what} {list(shape)} has a zero-size dimension (empty tensors are not supported)"
        count *= int(d)
    if count > MAX_ELEMENTS:
        return f"{what} {list(shape)} has {count} elements (at most {MAX_ELEMENTS})"
    if count * itemsize > MAX_TENSOR_BYTES:
        return f"{what} {list(shape)} needs {count * itemsize} bytes (at most {MAX_TENSOR_BYTES})"
    return None


def channels_fit(t) -> bool:
    """Per-tensor quantization, or per-channel scales that match the quantized dimension."""
    q = t.quant
    n = len(q.scale)
    return n <= 1 or (0 <= q.axis < len(t.shape) and t.shape[q.axis] == n)


def channel_problem(t) -> str:
    q, n = t.quant, len(t.quant.scale)
    if not 0 <= q.axis < len(t.shape):
        return f"quantized dimension {q.axis} is out of range for shape {list(t.shape)}"
    return f"{n} per-channel scales for dimension {q.axis} of size {t.shape[q.axis]}"


def check_quant(t, where: str, notes: list | None = None) -> None:
    """Scales, zero points and their count. Zero points whose count differs from the scales'
    and a 1-D tensor's out-of-range quantized dimension are normalised as TFLM reads them
    (module docstring), with a line in `notes`; per-channel scales that do not fit another
    tensor are left to check_graph (only filters are read per channel)."""
    q = t.quant
    if q is None:
        return
    notes = notes if notes is not None else []
    n = len(q.scale)
    if n == 0:
        raise malformed("quantization parameters without scales", where)
    if len(q.zero_point) != n:
        # micro_allocator.cc: zero_point[i] when the counts agree, else zero_point[0]
        first = int(q.zero_point[0]) if len(q.zero_point) else 0
        notes.append(f"{where}: {n} quantization scale(s) with {len(q.zero_point)} zero point(s); "
                     f"zero point {first} used for every channel, as TFLM does")
        q.zero_point = np.full(n, first, dtype=np.int64)
    if n > 1 and not channels_fit(t) and len(t.shape) == 1 and t.shape[0] == n:
        notes.append(f"{where}: per-channel quantization along dimension {q.axis} of a 1-D "
                     f"tensor of {n} values read along dimension 0 (the converter writes a "
                     f"per-channel bias with its filter's dimension; TFLM accepts it)")
        q.axis = 0
    scale = np.asarray(q.scale, dtype=np.float64)
    if not np.all(np.isfinite(scale)) or np.any(scale < 0):
        raise malformed(f"quantization scale {_bad_scale(scale)!r} is not a positive finite number", where)
    lo, hi = _INT_RANGE.get(t.dtype, _INT_RANGE["int32"])
    zp = np.asarray(q.zero_point, dtype=np.int64)
    if zp.size and (zp.min() < lo or zp.max() > hi):
        bad = int(zp[(zp < lo) | (zp > hi)][0])
        raise malformed(f"zero point {bad} is out of range for {t.dtype}", where)


def _bad_scale(scale) -> float:
    return next(float(s) for s in scale if not (math.isfinite(s) and s >= np.finfo(np.float32).tiny))


def _tiny_scale(t) -> bool:
    """A zero or subnormal scale: no step size an activation can have."""
    return t.quant is not None and bool(np.any(np.asarray(t.quant.scale, np.float64) < np.finfo(np.float32).tiny))


def check_graph(g, file_size: int) -> None:
    """Limits, quantization, topology and per-op contracts of a freshly read graph."""
    const_bytes = 0
    for t in g.tensors.values():
        where = tensor_where(t)
        check_shape(t.shape, where)
        if t.nbytes > MAX_TENSOR_BYTES:
            raise malformed(f"shape {list(t.shape)} needs {t.nbytes} bytes (at most {MAX_TENSOR_BYTES})", where)
        check_quant(t, where, g.notes)
        if t.is_const:
            const_bytes += t.nbytes
    # Tensors may share a buffer, so allow some slack, but never unbounded amplification.
    if const_bytes > 4 * file_size + (1 << 20):
        raise malformed(f"constant tensors total {const_bytes} bytes, far more than the "
                        f"{file_size}-byte file holds")
    # Graph inputs and outputs.
    if not g.outputs:
        raise malformed("the graph has no outputs", "subgraph 0")
    for kind, ids in (("input", g.inputs), ("output", g.outputs)):
        seen = set()
        for k, tid in enumerate(ids):
            if tid is None:
                raise malformed(f"graph {kind} {k} is an omitted (-1) tensor", "subgraph 0")
            if tid in seen:
                raise malformed(f"{tensor_where(g.t(tid))} is listed twice as a graph {kind}", "subgraph 0")
            seen.add(tid)
            if g.t(tid).is_const:
                raise malformed(f"graph {kind} {k}, {tensor_where(g.t(tid))}, is a constant", "subgraph 0")
            if g.t(tid).variable:
                raise EerieError(f"graph {kind} {k}, {tensor_where(g.t(tid))}, is a variable (state) "
                                 f"tensor: not supported as a graph {kind}")
    both = set(g.inputs) & set(g.outputs)
    if both:
        t = g.t(sorted(both)[0])
        raise EerieError(f"{tensor_where(t)} is both a graph input and a graph output "
                         f"(a pass-through graph has nothing to compile)")
    # Every activation is produced exactly once, before any use: a cycle is a use before
    # production in execution order.
    defined = set(g.inputs)
    producer: dict[str, int] = {}
    for op in g.ops:
        where = op_where(op)
        if not op.outputs and not op.regions:   # (CALL_ONCE's IF makes nothing)
            raise malformed("the op has no outputs", where)
        for k, tid in enumerate(op.inputs):
            if tid is None:
                continue
            t = g.t(tid)
            if not t.is_const and not t.variable and tid not in defined:
                if tid in producer or any(tid in o.outputs for o in g.ops):
                    raise malformed(f"input {k}, {tensor_where(t)}, is used before the op that "
                                    f"produces it (ops out of order or a cycle)", where)
                if op.kind.startswith("CUSTOM:"):
                    # A custom op's runtime may own tensors nobody produces (Vela's ethos-u op
                    # reads scratch buffers its driver allocates): unsupported, not malformed.
                    _custom_unsupported(op, f"reads {tensor_where(t)}, which no op produces")
                raise malformed(f"input {k}, {tensor_where(t)}, is neither a graph input, a "
                                f"constant nor produced by an op", where)
        for k, tid in enumerate(op.outputs):
            t = g.t(tid)
            if t.is_const:
                raise malformed(f"output {k}, {tensor_where(t)}, is a constant", where)
            if tid in g.inputs:
                raise malformed(f"output {k}, {tensor_where(t)}, is a graph input", where)
            if tid in producer and not t.variable:
                raise malformed(f"output {k}, {tensor_where(t)}, is already produced by op "
                                f"{producer[tid]}", where)
            producer[tid] = op.index
            defined.add(tid)
        check_op(op, g)
    for k, tid in enumerate(g.outputs):
        if tid not in defined:
            raise malformed(f"graph output {k}, {tensor_where(g.t(tid))}, is never produced", "subgraph 0")
    _quant_by_role(g)


# Ops that read their filter (input 1) per output channel, and that channel's dimension.
FILTER_CHANNEL_DIM = {"CONV_2D": 0, "DEPTHWISE_CONV_2D": 3, "FULLY_CONNECTED": 0, "TRANSPOSE_CONV": 0}
# Their bias input: TFLM never reads a bias's quantization (the kernels use input scale x
# filter scale), so nothing in it is checked beyond what keeps the report sane.
BIAS_INPUT = {"CONV_2D": 2, "DEPTHWISE_CONV_2D": 2, "FULLY_CONNECTED": 2, "TRANSPOSE_CONV": 3}


_CUSTOM_HINTS = {"CUSTOM:ethos-u": ": an Arm Ethos-U NPU command stream written by Vela; compile the "
                                   "model as it was before Vela",
                 "CUSTOM:XC_": ": an XMOS xcore op written by xformer; compile the model as it was "
                               "before xformer"}


def _custom_unsupported(op, what: str):
    """A custom op eerie-c cannot judge by TFLite's rules (its runtime defines its operands):
    unsupported, with a hint for the accelerator formats people meet."""
    hint = next((h for k, h in _CUSTOM_HINTS.items() if op.kind.startswith(k)), "")
    raise EerieError(f"unsupported operator: {op_where(op)} {what}{hint}")


def _all_ops(ops):
    for op in ops:
        yield op
        for r in op.regions:
            yield from _all_ops(r.ops)


def _quant_by_role(g) -> None:
    """Quantization that only some tensors may have, checked once every op is known.

    Zero or subnormal scales: a bias's quantization is never read (TFLM ignores it too); a
    filter's zero scale makes its channel's multiplier 0 (TFLM's QuantizeMultiplier(0)), so
    those channels give the output zero point, as in TFLM; on any other tensor it is refused.
    Per-channel scales that fit no dimension of their tensor: a filter's were checked (and
    normalised) by its op's rule (in an IF / WHILE body, by the kernel's count check); any
    other tensor is read per tensor, by TFLM as by eerie-c: the first scale and zero point;
    the rest is unused, and the report says so."""
    ops = list(_all_ops(g.ops))
    filters = {op.inputs[1] for op in ops
               if op.kind in FILTER_CHANNEL_DIM and len(op.inputs) > 1 and op.inputs[1] is not None}
    biases = {op.inputs[k] for op in ops if (k := BIAS_INPUT.get(op.kind)) is not None
              and len(op.inputs) > k and op.inputs[k] is not None}
    for t in g.tensors.values():
        if not _tiny_scale(t):
            continue
        scale = np.asarray(t.quant.scale, np.float64)
        if t.id in biases and t.id not in filters:
            g.notes.append(f"{tensor_where(t)}: bias quantization scale {_bad_scale(scale)!r} "
                           f"unused (TFLM ignores a bias's quantization too)")
        elif t.id in filters:
            k = int(np.sum(scale < np.finfo(np.float32).tiny))
            g.notes.append(f"{tensor_where(t)}: {k} of {scale.size} weight scale(s) zero or "
                           f"subnormal: those output channels are the output zero point "
                           f"(multiplier 0, as TFLM)")
        else:
            raise malformed(f"quantization scale {_bad_scale(scale)!r} is not a positive finite "
                            f"number", tensor_where(t))
    for t in g.tensors.values():
        if t.quant is not None and not channels_fit(t) and t.id not in filters:
            g.notes.append(f"{tensor_where(t)}: {channel_problem(t)}; only its first scale "
                           f"{float(t.quant.scale[0]):.6g} and zero point "
                           f"{int(t.quant.zero_point[0])} are used (TFLM reads no others for "
                           f"this tensor)")


# ---------------------------------------------------------------------------------------------
# Per-op contracts: the checks TFLite's own Prepare() makes for the op kinds we compile, so a
# corrupt model fails here with a clear message instead of deep inside a kernel.

def _fail(op, msg: str):
    raise malformed(msg, op_where(op))


def _arity(op, lo: int, hi: int, outs: int = 1):
    if not lo <= len(op.inputs) <= hi:
        _fail(op, f"{len(op.inputs)} inputs, expected {lo if lo == hi else f'{lo} to {hi}'}")
    for k in range(lo):
        if op.inputs[k] is None:
            _fail(op, f"required input {k} is omitted")
    if len(op.outputs) != outs:
        _fail(op, f"{len(op.outputs)} outputs, expected {outs}")


def _same_dtype(op, g, tids, what="input and output"):
    dts = {g.t(t).dtype for t in tids if t is not None}
    if len(dts) > 1:
        _fail(op, f"{what} dtypes differ ({', '.join(sorted(dts))})")


def _needs_quant(op, g, tids):
    for t in tids:
        if t is not None and g.t(t).dtype in ("int8", "uint8", "int16") and g.t(t).quant is None:
            _fail(op, f"{tensor_where(g.t(t))} is {g.t(t).dtype} without quantization parameters")


def _attrs_common(op):
    act = op.attrs.get("fused_activation_function")
    if act in ("TANH", "SIGMOID") and op.kind == "UNIDIRECTIONAL_SEQUENCE_LSTM":
        act = None   # the LSTM's cell-gate nonlinearity, not a fused clamp
    if act is not None and act not in FUSED_OK:
        raise EerieError(f"{op_where(op)}: unsupported fused activation {act!r}")
    pad = op.attrs.get("padding")
    if pad is not None and pad not in ("SAME", "VALID"):
        _fail(op, f"unknown padding {pad!r}")
    for key in ("stride_w", "stride_h", "dilation_w_factor", "dilation_h_factor",
                "filter_width", "filter_height"):
        v = op.attrs.get(key)
        if v is not None and not 1 <= int(v) <= 65535:
            _fail(op, f"{key} is {v}")


def _window_out(padding, size, k, stride, dil):
    eff = (k - 1) * dil + 1
    return (size + stride - 1) // stride if padding == "SAME" else (size + stride - eff) // stride


def _check_window(op, g, in_shape, kh, kw, out_shape):
    a = op.attrs
    pad = a.get("padding", "VALID")
    sh, sw = int(a.get("stride_h", 1)), int(a.get("stride_w", 1))
    dh, dw = int(a.get("dilation_h_factor", 1) or 1), int(a.get("dilation_w_factor", 1) or 1)
    oh = _window_out(pad, in_shape[1], kh, sh, dh)
    ow = _window_out(pad, in_shape[2], kw, sw, dw)
    if (oh, ow) != tuple(out_shape[1:3]) or oh < 1 or ow < 1:
        _fail(op, f"output is {out_shape[1]}x{out_shape[2]} but {pad} padding with a {kh}x{kw} "
                  f"window, stride {sh}x{sw} on a {in_shape[1]}x{in_shape[2]} input gives {oh}x{ow}")


def _rank(op, g, tid, r, what):
    t = g.t(tid)
    if len(t.shape) != r:
        _fail(op, f"{what} {tensor_where(t)} has shape {list(t.shape)}, expected rank {r}")
    return t


def _weights_dtypes(op, g, x, w, b, y):
    """Float graphs are float throughout; int8 ones have int8 weights and int32 bias. A float
    input with int8 weights (float bias and output) is TFLite's hybrid (dynamic-range) scheme:
    a valid file, which check_supported reports as unsupported, not as malformed."""
    if x.dtype == "float32":
        want = {"weights": "float32", "bias": "float32", "output": "float32"}
        if w.dtype in ("int8", "uint8"):
            want["weights"] = w.dtype
    elif x.dtype == "int8":
        want = {"weights": "int8", "bias": "int32", "output": "int8"}
    else:
        return   # the kernel registry reports the unsupported dtype
    for what, t in (("weights", w), ("bias", b), ("output", y)):
        if t is not None and t.dtype != want[what]:
            _fail(op, f"{x.dtype} input with {t.dtype} {what} {tensor_where(t)} "
                      f"(expected {want[what]})")


def _conv_like(op, g, depthwise: bool):
    _arity(op, 2, 3)
    x = _rank(op, g, op.inputs[0], 4, "input")
    w = _rank(op, g, op.inputs[1], 4, "weights")
    y = _rank(op, g, op.outputs[0], 4, "output")
    b = g.t(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] is not None else None
    _constant_weights(op, w, b)
    _weights_dtypes(op, g, x, w, b, y)
    if x.shape[0] != y.shape[0]:
        _fail(op, f"batch {x.shape[0]} in but {y.shape[0]} out")
    out_c = w.shape[3] if depthwise else w.shape[0]
    if depthwise:
        if w.shape[0] != 1:
            _fail(op, f"depthwise weights {list(w.shape)} must be [1, kh, kw, channels]")
        if x.shape[3] == 0 or out_c % x.shape[3]:
            _fail(op, f"{out_c} output channels is not a multiple of {x.shape[3]} input channels")
        dm = op.attrs.get("depth_multiplier")
        if dm is not None and int(dm) > 0 and int(dm) * x.shape[3] != out_c:
            _fail(op, f"depth multiplier {dm} x {x.shape[3]} channels != {out_c} output channels")
        kh, kw = w.shape[1], w.shape[2]
    else:
        if w.shape[3] == 0 or x.shape[3] % w.shape[3]:
            _fail(op, f"weights expect {w.shape[3]} input channels, the input has {x.shape[3]}")
        kh, kw = w.shape[1], w.shape[2]
    if y.shape[3] != out_c:
        _fail(op, f"{out_c} filters but the output has {y.shape[3]} channels")
    if b is not None and b.size != out_c:
        _fail(op, f"bias has {b.size} values for {out_c} output channels")
    if kh < 1 or kw < 1:
        _fail(op, f"empty {kh}x{kw} kernel")
    _filter_channels(op, g, w, 3 if depthwise else 0, out_c)
    _check_window(op, g, x.shape, kh, kw, y.shape)
    _needs_quant(op, g, [op.inputs[0], op.inputs[1], op.outputs[0]])


def _constant_weights(op, w, b):
    """TFLM also runs filters and biases that are activations (computed by the graph); the
    kernels here pack and fold them at compile time, so that is unsupported, not malformed."""
    for what, t in (("weights", w), ("bias", b)):
        if t is not None and not t.is_const:
            raise EerieError(f"{op_where(op)}: unsupported: {what} {tensor_where(t)} computed "
                             f"by the graph (eerie-c needs constant {what})")


def _filter_channels(op, g, w, dim: int, out_c: int):
    """TFLM's per-channel filter rule (PopulateConvolutionQuantizationParams,
    fully_connected_common.cc): one scale per output channel, and the file's quantized
    dimension of that size. The kernels read the scales by output channel (dimension `dim`),
    so a filter quantized along another dimension of that size is normalised to `dim`."""
    q = w.quant
    if q is None or not q.per_channel:
        return
    n = len(q.scale)
    if n != out_c:
        _fail(op, f"{n} per-channel weight scales for {out_c} output channels")
    if not 0 <= q.axis < len(w.shape) or w.shape[q.axis] != n:
        _fail(op, f"per-channel weights quantized along dimension {q.axis} of shape "
                  f"{list(w.shape)}, which does not have {n} entries")
    if q.axis != dim:
        g.notes.append(f"{op_where(op)}: weights {tensor_where(w)} quantized along dimension "
                       f"{q.axis} (also of size {n}) read per output channel (dimension {dim}), "
                       f"as TFLM does")
        q.axis = dim


def _pool(op, g):
    _arity(op, 1, 1)
    x = _rank(op, g, op.inputs[0], 4, "input")
    y = _rank(op, g, op.outputs[0], 4, "output")
    _same_dtype(op, g, [x.id, y.id])
    if x.shape[0] != y.shape[0] or x.shape[3] != y.shape[3]:
        _fail(op, f"input {list(x.shape)} and output {list(y.shape)} differ in batch or channels")
    fh, fw = int(op.attrs.get("filter_height", 1)), int(op.attrs.get("filter_width", 1))
    _check_window(op, g, x.shape, fh, fw, y.shape)
    _needs_quant(op, g, [x.id, y.id])


def _fully_connected(op, g):
    _arity(op, 2, 3)
    x, w, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
    b = g.t(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] is not None else None
    if len(w.shape) != 2:
        _fail(op, f"weights {tensor_where(w)} must be a matrix, got shape {list(w.shape)}")
    units, depth = w.shape
    if depth == 0 or x.size % depth:
        _fail(op, f"input {list(x.shape)} does not split into rows of {depth}")
    if y.size != (x.size // depth) * units:
        _fail(op, f"output {list(y.shape)} should hold {x.size // depth} x {units} values")
    if b is not None and b.size != units:
        _fail(op, f"bias {tensor_where(b)} must hold {units} values")
    _constant_weights(op, w, b)
    _weights_dtypes(op, g, x, w, b, y)
    _filter_channels(op, g, w, 0, units)
    _needs_quant(op, g, [x.id, w.id, y.id])


def _elementwise(op, g, n_in):
    _arity(op, n_in, n_in)
    _same_dtype(op, g, list(op.inputs) + list(op.outputs))
    _needs_quant(op, g, list(op.inputs) + list(op.outputs))
    y = g.t(op.outputs[0])
    shapes = [g.t(t).shape for t in op.inputs]
    try:
        out = np.broadcast_shapes(*shapes)
    except ValueError:
        _fail(op, f"input shapes {' and '.join(str(list(s)) for s in shapes)} do not broadcast")
    if tuple(out) != tuple(y.shape):
        _fail(op, f"output shape {list(y.shape)}, inputs broadcast to {list(out)}")


def _same_shape(op, g, same_dtype=True):
    _arity(op, 1, 1)
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    if same_dtype:
        _same_dtype(op, g, [x.id, y.id])
    _needs_quant(op, g, [x.id, y.id])
    if tuple(x.shape) != tuple(y.shape):
        _fail(op, f"input {list(x.shape)} and output {list(y.shape)} differ")


def _reshape(op, g):
    _arity(op, 1, 2)
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    _same_dtype(op, g, [x.id, y.id])
    if x.size != y.size:
        _fail(op, f"input {list(x.shape)} ({x.size} values) and output {list(y.shape)} "
                  f"({y.size} values) differ in size")


RULES = {
    "CONV_2D": lambda op, g: _conv_like(op, g, False),
    "DEPTHWISE_CONV_2D": lambda op, g: _conv_like(op, g, True),
    "AVERAGE_POOL_2D": _pool,
    "MAX_POOL_2D": _pool,
    "L2_POOL_2D": _pool,
    "FULLY_CONNECTED": _fully_connected,
    "ADD": lambda op, g: _elementwise(op, g, 2),
    "SUB": lambda op, g: _elementwise(op, g, 2),
    "MUL": lambda op, g: _elementwise(op, g, 2),
    "SOFTMAX": lambda op, g: _same_shape(op, g, same_dtype=False),   # int8 -> int16 exists
    "LOGISTIC": _same_shape,
    "TANH": _same_shape,
    "RELU": _same_shape,
    "RELU6": _same_shape,
    "RESHAPE": _reshape,
    "SQUEEZE": _reshape,
    "EXPAND_DIMS": _reshape,
}


def check_op(op, g) -> None:
    if not op.inputs or op.inputs[0] is None:
        if op.kind.startswith("CUSTOM:"):   # (XMOS's XC_ld_weights reads only its options)
            _custom_unsupported(op, "has no first input")
        _fail(op, "the op has no first input")
    _attrs_common(op)
    rule = RULES.get(op.kind)
    if rule is not None:
        rule(op, g)
