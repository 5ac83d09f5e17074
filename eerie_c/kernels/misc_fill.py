"""BROADCAST_TO, FILL, ZEROS_LIKE and MIRROR_PAD.

All four are data movement or constant writes, planned at compile time:
- BROADCAST_TO (every dtype TFLM takes: float32, int8, int16, int32, int64, uint8, bool):
  NumPy broadcasting of the input to the constant shape, as a _copyplan copy (broadcast dims
  are stride-0 loops, contiguous runs are memcpy).
- FILL (float32, int8, int32): the dims must be constant; a constant value becomes a constant
  write, an activation value is read once. Raw bytes: TFLM copies the value as it is.
- ZEROS_LIKE (float32, int8, int32, int64): raw zeros -- for int8 TFLM writes 0, not the zero
  point (checked against the oracle); the input is not read.
- MIRROR_PAD (float32, int8; REFLECT excludes the edge, SYMMETRIC repeats it): each output
  dim maps to an input index through a small per-dim table (or a plain loop where the dim is
  not padded), so the copy is one _copyplan gather.
"""
from __future__ import annotations

import numpy as np

from ..emit.c import c_float
from ..errors import EerieError
from ..ir import DTYPE_NP
from . import Lowered, kernel
from ._copyplan import copy_body, flat_index

ALL = ("float32", "int8", "int16", "int32", "int64", "uint8", "bool")


def _const_ints(op, g, k, what, name):
    if len(op.inputs) <= k or op.inputs[k] is None or not g.t(op.inputs[k]).is_const:
        raise EerieError(f"{what}: {name} must be a constant tensor")
    return [int(v) for v in np.asarray(g.t(op.inputs[k]).data).reshape(-1)]


def _literal(value, dtype) -> str:
    if dtype == "float32":
        return c_float(float(value))
    if dtype == "bool":
        return "1" if value else "0"
    v = int(value)
    if dtype == "int64":
        return f"INT64_C({v})"
    if dtype == "int32" and v == -(2 ** 31):
        return "INT32_MIN"
    return str(v)


@kernel("BROADCAST_TO", dtypes=ALL)
def lower_broadcast_to(op, g, ctx):
    what = f"BROADCAST_TO (op {op.index})"
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    shape = _const_ints(op, g, 1, what, "the shape")
    if x.dtype != y.dtype or list(y.shape) != shape:
        raise EerieError(f"{what}: output {y.dtype}{list(y.shape)}, expected {x.dtype}{shape}")
    try:
        idx = np.broadcast_to(flat_index(x.shape), tuple(shape))
    except ValueError:
        raise EerieError(f"{what}: {list(x.shape)} does not broadcast to {shape}") from None
    params: list[str] = []
    if x.is_const:
        src = ctx.tensor_const(x, "value")
    else:
        params.append(x.id)
        src = "in0"
    return Lowered(body=copy_body(idx, ctx, src, "out0", "bcast"), inputs=params, outputs=[y.id],
                   comment=f"BROADCAST_TO {op.name} {list(x.shape)} -> {shape}".replace("*/", ""))


def _fill_c(n: int, value: str) -> str:
    if n == 1:
        return f"out0[0] = {value};\n"
    return f"{{\n    int i;\n    for (i = 0; i < {n}; ++i) {{\n        out0[i] = {value};\n    }}\n}}\n"


@kernel("FILL", dtypes=("float32", "int8", "int32"), key_input=1)
def lower_fill(op, g, ctx):
    what = f"FILL (op {op.index})"
    v, y = g.t(op.inputs[1]), g.t(op.outputs[0])
    dims = _const_ints(op, g, 0, what, "the dims")
    if list(y.shape) != dims or v.dtype != y.dtype or v.size != 1:
        raise EerieError(f"{what}: output {y.dtype}{list(y.shape)} from dims {dims} and a "
                         f"{v.dtype}{list(v.shape)} value")
    if v.is_const:
        value = _literal(np.asarray(v.data).reshape(-1)[0], v.dtype)
        return Lowered(body=_fill_c(y.size, value), inputs=[], outputs=[y.id])
    body = f"const {y.ctype} v = in0[0];\n" + _fill_c(y.size, "v")
    return Lowered(body=body, inputs=[v.id], outputs=[y.id])


@kernel("ZEROS_LIKE", dtypes=("float32", "int8", "int32", "int64"))
def lower_zeros_like(op, g, ctx):
    what = f"ZEROS_LIKE (op {op.index})"
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    if x.dtype != y.dtype or list(x.shape) != list(y.shape):
        raise EerieError(f"{what}: output {y.dtype}{list(y.shape)} must match the input")
    # raw zero bytes: 0, 0.0f; int8 gets 0 like TFLM, not the zero point
    body = f"memset(out0, 0, {y.size} * sizeof(*out0));\n"
    return Lowered(body=body, inputs=[], outputs=[y.id])


def _mirror(n: int, lo: int, hi: int, symmetric: bool) -> np.ndarray:
    out = []
    for p in range(n + lo + hi):
        i = p - lo
        if i < 0:
            i = -i - 1 if symmetric else -i
        elif i >= n:
            i = 2 * n - 1 - i if symmetric else 2 * n - 2 - i
        out.append(i)
    return np.array(out, dtype=np.int64)


@kernel("MIRROR_PAD", dtypes=("float32", "int8"))
def lower_mirror_pad(op, g, ctx):
    what = f"MIRROR_PAD (op {op.index})"
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    rank = len(x.shape)
    pads = _const_ints(op, g, 1, what, "the paddings")
    if len(pads) != 2 * rank:
        raise EerieError(f"{what}: paddings has {len(pads)} values, expected {2 * rank}")
    mode = op.attrs.get("mode", 0)
    symmetric = mode in (1, "SYMMETRIC")
    pairs = [(pads[2 * d], pads[2 * d + 1]) for d in range(rank)]
    limit = 0 if symmetric else 1
    for n, (lo, hi) in zip(x.shape, pairs):
        if lo < 0 or hi < 0 or lo > n - limit or hi > n - limit:
            raise EerieError(f"{what}: paddings {pairs} too large for {list(x.shape)} in "
                             f"{'SYMMETRIC' if symmetric else 'REFLECT'} mode")
    expect = [n + lo + hi for n, (lo, hi) in zip(x.shape, pairs)]
    if list(y.shape) != expect or x.dtype != y.dtype:
        raise EerieError(f"{what}: output {y.dtype}{list(y.shape)}, expected {x.dtype}{expect}")
    strides = [int(np.prod(x.shape[d + 1:], dtype=np.int64)) for d in range(rank)]
    idx = np.zeros(expect, dtype=np.int64)
    for d, (n, (lo, hi)) in enumerate(zip(x.shape, pairs)):
        shape = [1] * rank
        shape[d] = expect[d]
        idx = idx + (_mirror(n, lo, hi, symmetric) * strides[d]).reshape(shape)
    return Lowered(body=copy_body(idx, ctx, "in0", "out0", "mirror"), inputs=[x.id],
                   outputs=[y.id],
                   comment=f"MIRROR_PAD {op.name} {'SYMMETRIC' if symmetric else 'REFLECT'} "
                           f"{pairs}".replace("*/", ""))
