"""FULLY_CONNECTED: out[b, u] = act(sum_d in[b, d] * w[u, d] + bias[u]).

int8 (TFLM scheme): the input zero point is folded into the bias at compile time
(bias'[u] = bias[u] - zp_in * sum_d w[u, d]), so the inner loop is a plain int8 dot product;
the result is requantized per output channel (per tensor when the weights are).
Targets with the DSP extension (see _dsp.py) use one shared out-of-line kernel for all layers
(helpers/fc_dsp.c.j2): 4 rows at a time, SXTB16 + SMLAD, weights interleaved at compile time.
"""
import numpy as np

from ..emit import render
from ..errors import EerieError
from . import Lowered, c_comment, kernel
from ._dsp import (acc_bound, constant_channels, fast_requant_consts, has_dsp, pad_to, round_up,
                   zero_channels)
from ._quant import activation_range_float, activation_range_int, per_channel_multipliers
from ._mve import has_mve, lower_fc_mve


def dsp_fc(ctx, x, w, y, act, wdata, folded, mult, shift, batches, units, depth):
    """Constants of the DSP kernel (helpers/fc_dsp.c.j2), or None when its fast
    requantization would not be exact (then the portable kernel is used)."""
    wabs = np.abs(wdata).sum(axis=1)
    if np.abs(folded).max(initial=0) >= 2 ** 31:
        return None
    dead = zero_channels(mult, shift, acc_bound(folded, wabs))
    wdata, folded = np.where(dead[:, None], 0, wdata), np.where(dead, 0, folded)
    wabs = np.where(dead, 0, wabs)
    consts = constant_channels(wabs, folded, mult, shift, y.zero_point)
    folded = np.where(wabs == 0, 0, folded)
    up, dp = round_up(units, 4), round_up(depth, 4)
    if up // 4 > 65536 or dp // 4 > 65536:
        return None   # the kernel's loops (and its proof) are bounded at 65536 blocks and groups
    fast = fast_requant_consts(ctx, mult, shift, y.zero_point, acc_bound(folded, wabs),
                               w.quant.per_channel, up, arrays=True, constants=consts)
    if fast is None or fast["rq_zp"] != 0:
        return None
    # blocks of 4 rows interleaved per 4 inputs: [up/4][dp/4][4 rows][4 inputs]
    wl = pad_to(wdata.astype(np.int8), (up, dp)).reshape(up // 4, 4, dp // 4, 4).transpose(0, 2, 1, 3)
    wl = np.ascontiguousarray(wl).reshape(-1).view("<i4")   # 4 int8 per word (little-endian)
    v = dict(fast, batches=batches, units=units, depth=depth, up=up, dp=dp, pad_x=dp != depth,
             scratch=dp if dp != depth else 0,
             weights=ctx.const(wl, "int32_t", "weights",
                               f"{c_comment(w.label)} (blocks of 4 rows interleaved per 4 inputs, "
                               f"4 int8 per word)"),
             bias=ctx.const(pad_to(folded.astype(np.int32), (up,)), "int32_t", "bias",
                            "bias with the input zero point folded in"))
    v["act_min"], v["act_max"] = activation_range_int(act, y)
    return v


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
        if has_mve(ctx.target):   # cortex-m55: Helium kernel (_mve.py) when it applies
            low = lower_fc_mve(op, g, ctx, x, w, y, act, wdata, folded, mult, shift,
                               batches, units, depth)
            if low is not None:
                return low
        if has_dsp(ctx.target) and batches * units * depth > 0:
            dsp = dsp_fc(ctx, x, w, y, act, wdata, folded, mult, shift, batches, units, depth)
            if dsp is not None:
                body = render("kernels/fully_connected_s8_dsp.c.j2", **dsp)
                return Lowered(body=body, inputs=[x.id], outputs=[y.id],
                               helpers={"requant", "dsp", "fc_dsp"}, scratch_bytes=dsp["scratch"],
                               macs=batches * units * depth)
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
