"""BATCH_MATMUL: out[..., i, j] = sum_k lhs[..., i, k] * rhs[..., k, j].

adj_x / adj_y read lhs / rhs transposed in their last two dims (lhs [..., K, M], rhs
[..., N, K]); the batch dims (all but the last two, rank up to 5 like TFLM) broadcast
numpy-style. Either operand may be a constant (then it is a flash global).

int8 (TFLM scheme, per-tensor): the int32 accumulator sums (lhs - zp_lhs) * (rhs - zp_rhs)
and is requantized once with lhs_scale * rhs_scale / out_scale (the product of the scales in
float, then the division in double, as TFLM's GetQuantizedConvolutionMultipler), plus the
output zero point, clamped to int8. Integer sums are exact, so the loop order is free.
int16 (zero points 0, TFLM's rule) sums in int64 and takes TFLM's 64-bit
MultiplyByQuantizedMultiplier (the multiplier rounded to Q15; helpers/requant64.c.j2).
"""
from __future__ import annotations

import numpy as np

from ..templating import render
from ..errors import EerieError
from ..ir import DTYPE_C
from . import Lowered, kernel
from ._quant import quantize_multiplier

MAX_RANK = 5


def _batch_loops(lhs_shape, rhs_shape, out_shape, m, k, n):
    """[(extent, lhs stride, rhs stride, out stride)] per output batch dim (element strides,
    0 where an operand broadcasts), size-1 dims dropped."""
    nb = len(out_shape) - 2
    lb = [1] * (nb - (len(lhs_shape) - 2)) + list(lhs_shape[:-2])
    rb = [1] * (nb - (len(rhs_shape) - 2)) + list(rhs_shape[:-2])
    ls, rs, os_ = m * k, k * n, m * n
    loops = []
    for d in reversed(range(nb)):
        e = int(out_shape[d])
        if e != 1:
            loops.append((e, ls if lb[d] != 1 else 0, rs if rb[d] != 1 else 0, os_))
        ls *= lb[d]
        rs *= rb[d]
        os_ *= e
    return list(reversed(loops))


@kernel("BATCH_MATMUL", dtypes=("int8", "int16", "float32"))
def lower_batch_matmul(op, g, ctx):
    what = f"BATCH_MATMUL (op {op.index})"
    a, b, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
    adj_x, adj_y = bool(op.attrs.get("adj_x", False)), bool(op.attrs.get("adj_y", False))
    if len(a.shape) < 2 or len(b.shape) < 2 or max(len(a.shape), len(b.shape)) > MAX_RANK:
        raise EerieError(f"{what}: operands of rank 2..{MAX_RANK} expected, got "
                         f"{list(a.shape)} and {list(b.shape)}")
    if a.dtype != b.dtype or y.dtype != a.dtype:
        raise EerieError(f"{what}: operands and output must share one dtype "
                         f"({a.dtype}, {b.dtype} -> {y.dtype})")
    m, k = (a.shape[-1], a.shape[-2]) if adj_x else (a.shape[-2], a.shape[-1])
    k2, n = (b.shape[-1], b.shape[-2]) if adj_y else (b.shape[-2], b.shape[-1])
    if k != k2:
        raise EerieError(f"{what}: contracted dims differ ({k} vs {k2})")
    try:
        batch = np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    except ValueError:
        raise EerieError(f"{what}: batch dims {list(a.shape[:-2])} and {list(b.shape[:-2])} "
                         f"do not broadcast") from None
    if tuple(y.shape) != tuple(batch) + (m, n):
        raise EerieError(f"{what}: output shape {list(y.shape)}, expected {list(batch) + [m, n]}")
    loops = _batch_loops(a.shape, b.shape, y.shape, m, k, n)
    inputs, ptrs = [], []
    for t, hint in ((a, "lhs"), (b, "rhs")):
        if t.is_const:
            ptrs.append(ctx.tensor_const(t, hint))
        else:
            ptrs.append(f"in{len(inputs)}")
            inputs.append(t.id)
    v = dict(ctype=DTYPE_C[a.dtype], loops=loops, m=m, k=k, n=n, lhs=ptrs[0], rhs=ptrs[1],
             # element strides of (i, k) in lhs and (k, j) in rhs
             a_i=1 if adj_x else k, a_k=m if adj_x else 1,
             b_k=1 if adj_y else n, b_j=k if adj_y else 1, quant=a.dtype != "float32")
    helpers = set()
    if a.dtype != "float32":
        for t in (a, b, y):
            if t.quant is None or len(np.atleast_1d(t.quant.scale)) != 1:
                raise EerieError(f"{what}: {a.dtype} tensors need per-tensor quantization")
        mult, shift = quantize_multiplier(float(np.float32(a.scale) * np.float32(b.scale))
                                          / float(np.float32(y.scale)))
        v.update(zp_a=int(a.zero_point), zp_b=int(b.zero_point), zp_out=int(y.zero_point),
                 mult=mult, shift=shift, wide=a.dtype == "int16", lo=-128, hi=127)
        helpers = {"requant"}
        if a.dtype == "int16":
            if a.zero_point or b.zero_point or y.zero_point:
                raise EerieError(f"{what}: int16 needs zero points 0 (TFLM's rule)")
            reduced = (mult + (1 << 15)) >> 16 if mult < 0x7FFF0000 else 0x7FFF
            if 15 - shift < 1:
                raise EerieError(f"{what}: scale lhs*rhs/output is too large for TFLM's int16 path")
            v.update(mult=reduced, shift=15 - shift, lo=-32768, hi=32767)
            helpers = {"requant64"}
    body = render("kernels/batch_matmul.c.j2", **v)
    batches = int(np.prod([e for e, *_ in loops])) if loops else 1
    return Lowered(body=body, inputs=inputs, outputs=[y.id], helpers=helpers,
                   macs=batches * m * n * k,
                   comment=f"BATCH_MATMUL {list(a.shape)}{'^T' if adj_x else ''} x "
                           f"{list(b.shape)}{'^T' if adj_y else ''}")
