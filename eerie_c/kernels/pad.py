"""PAD / PADV2 with constant paddings, up to 5D (TFLM's limit).

The pad value is, like TFLM: the constant_values scalar of PADV2 when given (for int8 it must
carry the output's quantization, which TFLM checks), else the output zero point for int8 and
0 for the other types. The output is filled with the pad value, then each contiguous input
row is copied into place; dimensions are merged at compile time wherever the inner one is not
padded, so image-style padding of NHWC copies whole W*C rows.
"""
import numpy as np

from ..templating import render
from ..templating import c_float
from ..errors import EerieError
from ..ir import DTYPE_C
from . import Lowered, kernel

MAX_RANK = 5


def _merged_dims(in_shape, pads):
    """[(in_size, pad_before, pad_after)] with unpadded inner dims folded into their outer
    neighbour and unpadded size-1 dims dropped."""
    dims = []
    for size, (lo, hi) in zip(in_shape, pads):
        if size == 1 and lo == 0 and hi == 0:
            continue
        if dims and lo == 0 and hi == 0:
            s, plo, phi = dims[-1]
            dims[-1] = (s * size, plo * size, phi * size)
        else:
            dims.append((size, lo, hi))
    return dims or [(1, 0, 0)]


def _lower_pad(op, g, ctx):
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    rank = len(x.shape)
    if rank > MAX_RANK:
        raise EerieError(f"{op.kind} (op {op.index}): {rank}D input, at most {MAX_RANK}D is supported")
    if x.dtype != y.dtype:
        raise EerieError(f"{op.kind} (op {op.index}): input {x.dtype} but output {y.dtype}")
    pt = g.t(op.inputs[1])
    if not pt.is_const:
        raise EerieError(f"{op.kind} (op {op.index}): the paddings tensor must be constant")
    pads = np.asarray(pt.data).reshape(-1).astype(np.int64)
    band = op.attrs.get("tile_window")
    if band is not None:   # one row band of a patch stage (patch/band_kernels.py): its rows
        # in the top padding are pad_t, below the input rows the rest; no input row: all padding
        top = band["pad_t"] if x.shape[1] else y.shape[1]
        pads = np.asarray([0, 0, top, y.shape[1] - top - x.shape[1], band["pad_l"],
                           y.shape[2] - x.shape[2] - band["pad_l"], 0, 0], np.int64)
    if pads.size != 2 * rank:
        raise EerieError(f"{op.kind} (op {op.index}): paddings has {pads.size} values, "
                         f"expected {2 * rank}")
    pads = pads.reshape(rank, 2).tolist()
    if any(p < 0 for pair in pads for p in pair):
        raise EerieError(f"{op.kind} (op {op.index}): negative paddings are not supported")
    expect = [d + lo + hi for d, (lo, hi) in zip(x.shape, pads)]
    if list(y.shape) != expect:
        raise EerieError(f"{op.kind} (op {op.index}): output shape {list(y.shape)}, the paddings "
                         f"give {expect}")

    cv = g.t(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] is not None else None
    if cv is not None:
        if not cv.is_const or cv.size != 1 or cv.dtype != x.dtype:
            raise EerieError(f"{op.kind} (op {op.index}): constant_values must be a constant "
                             f"{x.dtype} scalar")
        if x.dtype == "int8" and (cv.quant is None or y.quant is None
                                  or cv.zero_point != y.zero_point
                                  or np.float32(cv.scale) != np.float32(y.scale)):
            raise EerieError(f"{op.kind} (op {op.index}): int8 constant_values must have the "
                             f"output's quantization, as TFLM requires")
        value = np.asarray(cv.data).reshape(-1)[0]
    elif x.dtype == "int8":
        value = y.zero_point if y.quant is not None else 0
    else:
        value = 0
    pad_value = c_float(value) if x.dtype == "float32" else str(int(value))
    # memset (word stores in the C library) when every byte of the value is the same byte:
    # any int8, 0 and -1 in wider integers, +0.0 (not -0.0, whose sign byte differs)
    raw = np.asarray(value, dtype=np.dtype(x.dtype)).tobytes()
    fill_byte = raw[0] if raw == raw[:1] * len(raw) else None

    dims = _merged_dims(list(x.shape), pads)
    outer, (row, row_lo, _) = dims[:-1], dims[-1]
    in_strides, out_strides = [], []
    in_s, out_s = row, row + dims[-1][1] + dims[-1][2]
    for size, lo, hi in reversed(outer):
        in_strides.insert(0, in_s)
        out_strides.insert(0, out_s)
        in_s *= size
        out_s *= size + lo + hi
    loops = [dict(var=f"k{i}", size=s, lo=lo, in_stride=ist, out_stride=ost)
             for i, ((s, lo, _), ist, ost) in enumerate(zip(outer, in_strides, out_strides))]
    src = ctx.tensor_const(x, "input") if x.is_const else "in0"
    body = render("kernels/pad.c.j2", loops=loops, row=row, row_lo=row_lo, out_size=y.size,
                  in_size=x.size, pad_value=pad_value, fill_byte=fill_byte, ctype=DTYPE_C[x.dtype], src=src)
    return Lowered(body=body, inputs=[] if x.is_const else [x.id], outputs=[y.id])


for _kind in ("PAD", "PADV2"):
    kernel(_kind, dtypes=("int8", "float32", "int32", "int16"))(_lower_pad)
