"""MEAN over constant axes (keep_dims or not: the output bytes are laid out the same).

The reduction is specialised at compile time: size-1 dimensions are dropped and runs of
adjacent kept / reduced dimensions are merged, so the C is at most a few plain loops (kept
dimensions outside, reduced ones inside, summing in input order like the reference).

int8 matches the TFLM build used as the oracle, which takes one path for every int8 MEAN
(reference QuantizedMeanOrSum; the older "same quantization: truncating division" and "4D
axes [1, 2]" special paths are not taken any more, the tests check this): the raw values are
summed in int32, (sum - zp_in * count) is requantized by scale_in / scale_out with 1/count
folded into the multiplier -- shift s = min(floor(log2 count), 32, 31 + exponent),
multiplier' = (multiplier << s) / count (truncating), exponent' = exponent - s -- then
+ zp_out and a clamp to int8. There is no fused activation. int16 takes the same path in TFLM
(QuantizedMeanOrSum on int16 values), clamped to int16.
"""
import math

import numpy as np

from ..templating import render
from ..errors import EerieError
from . import Lowered, kernel
from ._quant import quantize_multiplier


def _resolve_axes(op, g, rank):
    if len(op.inputs) < 2 or op.inputs[1] is None:
        raise EerieError(f"MEAN (op {op.index}) has no axis tensor")
    axis_t = g.t(op.inputs[1])
    if not axis_t.is_const:
        raise EerieError(f"MEAN (op {op.index}): the axis tensor must be constant")
    axes = []
    for a in np.asarray(axis_t.data).reshape(-1).tolist():
        a = int(a) + rank if int(a) < 0 else int(a)
        if not 0 <= a < rank:
            raise EerieError(f"MEAN (op {op.index}): axis {a} out of range for rank {rank}")
        if a not in axes:
            axes.append(a)
    return sorted(axes)


def _loop_nest(shape, axes):
    """(kept, reduced): lists of {var, size, stride} after dropping size-1 dims and merging
    adjacent dims of the same kind; strides are in input elements."""
    strides = [int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape))]
    groups = []   # [reduced?, size, stride]
    for i, (size, stride) in enumerate(zip(shape, strides)):
        if size == 1:
            continue
        red = i in axes
        if groups and groups[-1][0] == red and groups[-1][2] == size * stride:
            groups[-1][1] *= size
            groups[-1][2] = stride
        else:
            groups.append([red, size, stride])
    kept = [g for g in groups if not g[0]]
    reduced = [g for g in groups if g[0]]
    return ([dict(var=f"k{i}", size=s, stride=st) for i, (_, s, st) in enumerate(kept)],
            [dict(var=f"r{i}", size=s, stride=st) for i, (_, s, st) in enumerate(reduced)])


def _single_rounding(real: float) -> dict:
    """A PT2E program's MEAN (attrs rounding="single", passes/fold_qdq.py): the converted
    module takes the mean of the dequantized values in float and quantizes it once, to nearest
    with ties to even. TFLM's integer path rounds twice (in the doubling high multiply, then in
    the shift), which put a mean over 8 tokens 1 step off at -34.33 steps (it gave -35). Here
    (sum - zp_in * count) * M / 2^N in 64 bits, M = real * 2^N held to 31 bits, rounded once."""
    n = 30 - math.frexp(real)[1] + 1          # real * 2^n in [2^30, 2^31)
    n = max(1, min(n, 62))
    m = int(round(real * (1 << n)))
    return {"m": m, "n": n, "half": 1 << (n - 1), "mask": (1 << n) - 1}


@kernel("MEAN", dtypes=("int8", "int16", "float32"))
def lower_mean(op, g, ctx):
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    rank = len(x.shape)
    axes = _resolve_axes(op, g, rank)
    keep = bool(op.attrs.get("keep_dims", False))
    expect = [1 if i in axes else d for i, d in enumerate(x.shape)] if keep else \
        [d for i, d in enumerate(x.shape) if i not in axes]
    if int(np.prod(expect, dtype=np.int64)) != y.size:
        raise EerieError(f"MEAN (op {op.index}): output shape {list(y.shape)} does not match "
                         f"reducing {list(x.shape)} over axes {axes}")
    if x.dtype != y.dtype:
        raise EerieError(f"MEAN (op {op.index}): input {x.dtype} but output {y.dtype}")
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64)) if axes else 1
    kept, reduced = _loop_nest(list(x.shape), axes)
    v = dict(kept=kept, reduced=reduced, count=count)
    if x.dtype == "float32":
        return Lowered(body=render("kernels/mean_f32.c.j2", **v), inputs=[x.id], outputs=[y.id])
    if x.quant is None or y.quant is None or x.quant.per_channel or y.quant.per_channel:
        raise EerieError(f"MEAN (op {op.index}): {x.dtype} MEAN needs per-tensor quantization")
    v.update(in_offset=-x.zero_point * count, out_zp=y.zero_point, ctype=x.ctype,
             lo=-128 if x.dtype == "int8" else -32768, hi=127 if x.dtype == "int8" else 32767)
    v["single"] = None
    if op.attrs.get("rounding") == "single":
        v["single"] = _single_rounding(float(np.float32(x.scale)) / (float(np.float32(y.scale)) * count))
    else:
        mult, shift = quantize_multiplier(float(np.float32(x.scale)) / float(np.float32(y.scale)))
        s = min(count.bit_length() - 1, 32, 31 + shift)
        v.update(mult=(mult << s) // count, shift=shift - s)
    helpers = {"requant"}
    return Lowered(body=render("kernels/mean_s8.c.j2", **v), inputs=[x.id], outputs=[y.id],
                   helpers=helpers)
