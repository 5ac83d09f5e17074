"""TFLM_DECODE (TFLM's custom op for compressed weights): each (encoded, ancillary) pair of
constant uint8 tensors decodes into one output tensor. The look-up-table (LUT) scheme is
supported: the ancillary data is a 16-byte header (byte 0 the decode type, 0 = LUT; byte 1
its version, 1; byte 4 the LUT version, 1; byte 5 the index bit width, 1..7, in its low 3
bits; byte 6 the value-table stride) followed by one value table per channel, and the encoded
tensor is the bit-packed indices (most significant bit first), one per output element.
Channels follow the output's quantization as in TFLM: one table per channel along dimension
0, or along the last dimension (then the channel changes fastest); unquantized or per-tensor:
one table.

Both inputs are constants, so the decoding happens at compile time: the TFLite reader runs
passes/fold_decode.py, which turns the outputs into constants (a convolution reads them as its
packed weights, no code; flash holds them decoded); an output that is a model output gets
this kernel, a copy from flash. Huffman and pruning decoders are not supported.
"""
from __future__ import annotations

import numpy as np

from ..errors import EerieError
from ..ir import DTYPE_NP
from . import Lowered, kernel

LUT, HUFFMAN, PRUNE = 0, 1, 2


def decode_lut(encoded: np.ndarray, ancillary: np.ndarray, out, what: str) -> np.ndarray:
    """The decoded contents of tensor `out` (shape, dtype, quantization)."""
    a = np.asarray(ancillary, np.uint8).reshape(-1)
    if a.size < 16 or a[1] != 1:
        raise EerieError(f"{what}: ancillary data without a version-1 header")
    if a[0] != LUT:
        name = {HUFFMAN: "Huffman", PRUNE: "pruning"}.get(int(a[0]), f"type {int(a[0])}")
        raise EerieError(f"{what}: {name} decoding is not supported (look-up tables only)")
    if a[4] != 1:
        raise EerieError(f"{what}: LUT version {int(a[4])} (1 expected)")
    width, stride = int(a[5]) & 7, int(a[6])
    if width == 0:
        raise EerieError(f"{what}: index bit width 0")
    count = int(np.prod(out.shape, dtype=np.int64)) if out.shape else 1
    channels, last_axis = 1, False
    q = out.quant
    if q is not None and len(q.scale) > 1:
        channels = len(q.scale)
        if q.axis == len(out.shape) - 1:
            last_axis = True
        elif q.axis != 0:
            raise EerieError(f"{what}: channels along dimension {q.axis} (TFLM takes 0 or the last)")
    np_t = np.dtype(DTYPE_NP[out.dtype])
    tables = np.frombuffer(a[16:].tobytes(), dtype=np_t.newbyteorder("<"),
                           count=(a.size - 16) // np_t.itemsize)
    bits = np.unpackbits(np.asarray(encoded, np.uint8).reshape(-1))
    if bits.size < count * width:
        raise EerieError(f"{what}: {bits.size // 8} encoded bytes for {count} {width}-bit indices")
    idx = bits[:count * width].reshape(count, width).astype(np.int64) @ (1 << np.arange(width - 1, -1, -1))
    pos = np.arange(count)
    chan = pos % channels if last_axis else pos // max(count // channels, 1)
    where = chan * stride + idx
    if channels > 1 and count % channels or where.size and where.max() >= tables.size \
            or idx.size and idx.max() >= max(stride, 1):
        raise EerieError(f"{what}: indices point past the value tables")
    return tables[where].astype(np_t).reshape(out.shape)


def decoded_outputs(op, g) -> list[np.ndarray]:
    """The decoded contents of each output of a TFLM_DECODE op."""
    what = f"TFLM_DECODE (op {op.index})"
    ins = [g.t(t) for t in op.inputs]
    if len(ins) != 2 * len(op.outputs) or not all(t.is_const for t in ins):
        raise EerieError(f"{what}: needs a constant (encoded, ancillary) pair per output")
    return [decode_lut(ins[2 * k].data.view(np.uint8), ins[2 * k + 1].data.view(np.uint8),
                       g.t(o), what) for k, o in enumerate(op.outputs)]


@kernel("TFLM_DECODE", dtypes=("uint8",),
        outputs={"uint8": ("bool", "float32", "int8", "int16", "int32", "int64")})
def lower_decode(op, g, ctx):
    lines = []
    for k, (tid, data) in enumerate(zip(op.outputs, decoded_outputs(op, g))):
        t = g.t(tid)
        name = ctx.const(data, t.ctype, f"decoded{k}", "decoded at compile time")
        lines.append(f"memcpy(out{k}, {name}, {t.size} * sizeof({t.ctype}));")
    return Lowered(body="\n".join(lines), inputs=[], outputs=list(op.outputs))
