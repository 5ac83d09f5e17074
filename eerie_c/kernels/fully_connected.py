"""FULLY_CONNECTED: out[b, u] = act(sum_d in[b, d] * w[u, d] + bias[u]).

int8 (TFLM scheme): the input zero point is folded into the bias at compile time
(bias'[u] = bias[u] - zp_in * sum_d w[u, d]), so the inner loop is a plain int8 dot product;
the result is requantized per output channel (per tensor when the weights are).
"""
import numpy as np

from ..emit import render
from ..errors import EerieError
from . import Lowered, kernel
from ._quant import activation_range_float, activation_range_int, per_channel_multipliers


@kernel("FULLY_CONNECTED", dtypes=("int8", "float32"))
def lower_fully_connected(op, g, ctx):
    x, w = g.t(op.inputs[0]), g.t(op.inputs[1])
    b = g.t(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] else None
    y = g.t(op.outputs[0])
    units, depth = w.shape
    batches = x.size // depth
    act = op.attrs.get("fused_activation_function", "NONE")
    ctx_vars = dict(batches=batches, units=units, depth=depth)
    if x.dtype == "float32":
        ctx_vars["weights"] = ctx.tensor_const(w, "weights")
        ctx_vars["bias"] = ctx.tensor_const(b, "bias") if b is not None else None
        ctx_vars["act_min"], ctx_vars["act_max"] = activation_range_float(act)
        body = render("kernels/fully_connected_f32.c.j2", **ctx_vars)
        helpers = set()
    else:
        wdata = w.data.astype(np.int64)
        bias = b.data.astype(np.int64) if b is not None else np.zeros(units, np.int64)
        w_zp = w.quant.zero_point.astype(np.int64)
        if np.any(w_zp != 0):
            raise EerieError(f"FULLY_CONNECTED (op {op.index}): int8 weights with a non-zero "
                             f"zero point are not supported")
        folded = bias - x.zero_point * wdata.sum(axis=1)
        mult, shift = per_channel_multipliers(x, w, y, units)
        per_channel = w.quant.per_channel
        ctx_vars.update(
            weights=ctx.tensor_const(w, "weights"),
            bias=ctx.const(folded.astype(np.int32), "int32_t", "bias",
                           "bias with the input zero point folded in"),
            mult=ctx.const(mult, "int32_t", "multiplier") if per_channel else int(mult[0]),
            shift=ctx.const(shift, "int32_t", "shift") if per_channel else int(shift[0]),
            per_channel=per_channel, out_zp=y.zero_point)
        ctx_vars["act_min"], ctx_vars["act_max"] = activation_range_int(act, y)
        body = render("kernels/fully_connected_s8.c.j2", **ctx_vars)
        helpers = {"requant"}
    return Lowered(body=body, inputs=[x.id], outputs=[y.id], helpers=helpers,
                   macs=batches * units * depth)
