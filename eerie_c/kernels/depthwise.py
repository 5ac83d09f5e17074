"""DEPTHWISE_CONV_2D (NHWC input, weights [1, kh, kw, in_c * mult]): int8 (TFLM scheme) and
float32. Output channel oc reads input channel oc / mult (oc = ic * mult + m).

Padding, stride and dilation follow TFLite exactly as for CONV_2D (see conv.py). int8: the
interior of the output (every tap in bounds) uses a bias with the input zero point folded in
(bias'[oc] = bias[oc] - zp_in * sum(w[.., oc])); the border keeps the reference's per-tap
(x - zp_in) * w form over the in-bounds taps only, so skipped taps stay exact.
"""
from __future__ import annotations

import numpy as np

from ..emit import render
from ..errors import EerieError
from . import Lowered, kernel
from ._quant import activation_range_float
from .conv import conv_operands, folded_bias, int8_requant_vars, op_what, window


@kernel("DEPTHWISE_CONV_2D", dtypes=("int8", "float32"))
def lower_depthwise_conv2d(op, g, ctx):
    what = op_what(op)
    x, w, b, y = conv_operands(op, g, what)
    batches, in_h, in_w, in_c = x.shape
    one, kh, kw, out_c = w.shape
    if one != 1:
        raise EerieError(f"{what}: weights must have shape [1, kh, kw, channels], got {list(w.shape)}")
    if out_c % in_c != 0:
        raise EerieError(f"{what}: {out_c} weight channels is not a multiple of the {in_c} "
                         f"input channels")
    mult = out_c // in_c
    attr_mult = int(op.attrs.get("depth_multiplier", 0) or 0)
    if attr_mult not in (0, mult):
        raise EerieError(f"{what}: depth_multiplier {attr_mult} disagrees with {in_c} input and "
                         f"{out_c} weight channels")
    if y.shape[3] != out_c:
        raise EerieError(f"{what}: {out_c} weight channels but the output has {y.shape[3]}")
    if b is not None and b.size != out_c:
        raise EerieError(f"{what}: bias has {b.size} values for {out_c} output channels")
    win = window(op, in_h, in_w, kh, kw, y.shape, what)
    act = op.attrs.get("fused_activation_function", "NONE")
    v = dict(batches=batches, in_h=in_h, in_w=in_w, in_c=in_c, out_c=out_c, depth_mult=mult, w=win,
             weights=ctx.tensor_const(w, "weights"))
    if x.dtype == "float32":
        v["bias"] = ctx.tensor_const(b, "bias") if b is not None else None
        v["act_min"], v["act_max"] = activation_range_float(act)
        body = render("kernels/depthwise_f32.c.j2", **v)
        helpers = set()
    else:
        in_off = -x.zero_point
        bias = b.data.astype(np.int64).reshape(-1) if b is not None else np.zeros(out_c, np.int64)
        if win.has_interior:
            wsum = w.data.astype(np.int64).reshape(-1, out_c).sum(axis=0)
            v["fbias"] = ctx.const(folded_bias(bias, wsum, in_off, what), "int32_t", "bias_folded",
                                   "bias with the input zero point folded in (interior)")
        if win.has_border:
            v["bias"] = ctx.tensor_const(b, "bias") if b is not None else None
        v["in_off"] = in_off
        v.update(int8_requant_vars(ctx, x, w, y, out_c, act, what))
        body = render("kernels/depthwise_s8.c.j2", **v)
        helpers = {"requant"}
    return Lowered(body=body, inputs=[x.id], outputs=[y.id], helpers=helpers,
                   macs=batches * win.out_h * win.out_w * out_c * kh * kw)
