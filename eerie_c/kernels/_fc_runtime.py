"""FULLY_CONNECTED whose weights (or bias) the graph computes (TFLM runs those; a pruning mask
multiplied in at run time, a weight variable the model assigns): the operands are read at run
time, nothing is packed or folded at compile time (templates/kernels/fully_connected_rt.c.j2).

int8 (TFLM's reference): acc = bias[u] + sum_d (x[d] - zp_x) * (w[u, d] - zp_w), requantized
per output channel (per tensor when the weights are), plus the output zero point, clamped to
the activation range. Integer sums are exact, so any order gives TFLM's result.
float32: the products summed in depth order from 0, then the bias added and the result clamped
to the activation range, as TFLM's reference kernel does.
"""
from __future__ import annotations

import numpy as np

from ..errors import EerieError
from ..templating import render
from . import Lowered
from ._quant import activation_range_float, activation_range_int, per_channel_multipliers


def lower_fc_runtime(op, g, ctx, x, w, b, y) -> Lowered:
    what = f"FULLY_CONNECTED (op {op.index})"
    units, depth = w.shape
    batches = x.size // depth
    act = op.attrs.get("fused_activation_function", "NONE")
    inputs, ptrs = [x.id], {}
    for t, hint in ((w, "weights"), (b, "bias")):
        if t is None:
            ptrs[hint] = None
        elif t.is_const:
            ptrs[hint] = ctx.tensor_const(t, hint)
        else:
            ptrs[hint] = f"in{len(inputs)}"
            inputs.append(t.id)
    v = dict(batches=batches, units=units, depth=depth, weights=ptrs["weights"], bias=ptrs["bias"],
             quant=x.dtype == "int8")
    helpers = set()
    if x.dtype == "float32":
        if w.dtype != "float32" or (b is not None and b.dtype != "float32"):
            raise EerieError(f"{what}: float input with {w.dtype} weights computed by the graph "
                             f"(hybrid quantization needs constant weights)")
        v["act_min"], v["act_max"] = activation_range_float(act)
    else:
        if w.dtype != "int8" or (b is not None and b.dtype != "int32") or w.quant is None:
            raise EerieError(f"{what}: int8 input needs int8 weights and int32 bias")
        if len(set(np.asarray(w.quant.zero_point).tolist())) > 1:
            raise EerieError(f"{what}: per-channel weight zero points are not supported")
        mult, shift = per_channel_multipliers(x, w, y, units)
        per_channel = w.quant.per_channel
        v.update(per_channel=per_channel, in_off=-x.zero_point, w_off=-w.zero_point,
                 out_zp=y.zero_point,
                 mult=ctx.const(mult, "int32_t", "multiplier") if per_channel else int(mult[0]),
                 shift=ctx.const(shift, "int32_t", "shift") if per_channel else int(shift[0]))
        v["act_min"], v["act_max"] = activation_range_int(act, y)
        helpers = {"requant"}
    return Lowered(body=render("kernels/fully_connected_rt.c.j2", **v), inputs=inputs,
                   outputs=[y.id], helpers=helpers, macs=batches * units * depth,
                   choice="weights read at run time (computed by the graph)")
