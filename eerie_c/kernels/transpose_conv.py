"""TRANSPOSE_CONV: inputs (output_shape, weights [out_c, kh, kw, in_c], input NHWC, optional
bias); options padding, stride_w/h and (newer schemas) a fused activation. float32, int8
(TFLM scheme: per-channel weights, int32 bias) and 16x8 (int16 activations with zero point
0, int8 weights, int64 bias; TFLM also takes an int16 bias, widened to int64 here as TFLM
does at run time).

Like TFLM, the output size is the output tensor's shape (the output_shape input must agree),
and the padding is TFLite's ComputePaddingHeightWidth run with the OUTPUT size as the image:
out' = ceil(out / stride) (SAME) or (out + stride - k) / stride (VALID), total padding
(out' - 1) * stride + k - out (at least 0), of which the floor half goes before.

TFLM scatters every input pixel times every tap into an output-sized scratch buffer (int32
for int8, int64 for 16x8) and requantizes afterwards; the kernel here gathers the same
products per output element instead, which gives identical integer sums with no scratch.
"""
from __future__ import annotations

import numpy as np

from ..templating import render
from ..errors import EerieError
from . import Lowered, kernel
from ._quant import activation_range_float, activation_range_int, per_channel_multipliers
from .window import op_what
from .conv_16x8 import requant_vars


def _trunc_div(a: int, b: int) -> int:
    """C integer division (rounds toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def tflite_padding(padding: str, size: int, k: int, stride: int) -> int:
    """TFLite's ComputePaddingWithOffset (dilation 1) for an image of `size`: the padding
    before it."""
    if padding == "SAME":
        out = _trunc_div(size + stride - 1, stride)
    else:
        out = _trunc_div(size + stride - k, stride)
    return max((out - 1) * stride + k - size, 0) // 2


@kernel("TRANSPOSE_CONV", dtypes=("int8", "float32", "int16"), key_input=2,
        schemes={"int16": "16x8"})
def lower_transpose_conv(op, g, ctx):
    what = op_what(op)
    if len(op.inputs) < 3 or any(i is None for i in op.inputs[:3]):
        raise EerieError(f"{what}: needs output_shape, weights and input operands")
    shape_t, w, x, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.inputs[2]), g.t(op.outputs[0])
    b = g.t(op.inputs[3]) if len(op.inputs) > 3 and op.inputs[3] is not None else None
    if not w.is_const or (b is not None and not b.is_const):
        raise EerieError(f"{what}: weights and bias must be constant tensors")
    if len(x.shape) != 4 or len(w.shape) != 4 or len(y.shape) != 4:
        raise EerieError(f"{what}: expected 4-D input, weights and output, got "
                         f"{list(x.shape)}, {list(w.shape)}, {list(y.shape)}")
    if shape_t.is_const and [int(v) for v in shape_t.data.reshape(-1)] != list(y.shape):
        raise EerieError(f"{what}: output_shape {[int(v) for v in shape_t.data.reshape(-1)]} "
                         f"disagrees with the output tensor {list(y.shape)}")
    batches, in_h, in_w, in_c = x.shape
    out_c, kh, kw, w_in_c = w.shape
    out_b, out_h, out_w, y_c = y.shape
    if w_in_c != in_c or y_c != out_c or out_b != batches:
        raise EerieError(f"{what}: weights {list(w.shape)} do not fit input {list(x.shape)} and "
                         f"output {list(y.shape)}")
    if b is not None and b.size != out_c:
        raise EerieError(f"{what}: bias has {b.size} values for {out_c} output channels")
    a = op.attrs
    sh, sw = int(a.get("stride_h", 1)), int(a.get("stride_w", 1))
    padding = a.get("padding", "VALID")
    if padding not in ("SAME", "VALID"):
        raise EerieError(f"{what}: unsupported padding {padding!r}")
    if min(sh, sw) < 1:
        raise EerieError(f"{what}: strides must be >= 1 (got {sh}x{sw})")
    act = a.get("fused_activation_function", "NONE") or "NONE"
    if act not in ("NONE", "RELU", "RELU6", "RELU_N1_TO_1"):
        raise EerieError(f"{what}: unsupported fused activation {act}")
    v = dict(batches=batches, in_h=in_h, in_w=in_w, in_c=in_c, out_h=out_h, out_w=out_w,
             out_c=out_c, kh=kh, kw=kw, sh=sh, sw=sw,
             pad_t=tflite_padding(padding, out_h, kh, sh),
             pad_l=tflite_padding(padding, out_w, kw, sw))
    helpers: set[str] = set()
    if x.dtype == "float32":
        if w.dtype != "float32" or y.dtype != "float32" or (b is not None and b.dtype != "float32"):
            raise EerieError(f"{what}: float input needs float weights, bias and output "
                             f"(hybrid quantization is not supported)")
        v.update(kind="f32", weights=ctx.tensor_const(w, "weights"),
                 bias=ctx.tensor_const(b, "bias") if b is not None else None)
        v["act_min"], v["act_max"] = activation_range_float(act)
    else:
        if w.dtype != "int8" or y.dtype != x.dtype:
            raise EerieError(f"{what}: {x.dtype} input needs int8 weights and an {x.dtype} "
                             f"output (got {w.dtype} weights, {y.dtype} output)")
        if x.quant is None or y.quant is None or w.quant is None:
            raise EerieError(f"{what}: quantized tensors without quantization parameters")
        if np.any(np.asarray(w.quant.zero_point) != 0):
            raise EerieError(f"{what}: int8 weights must be symmetric (zero point 0)")
        if w.quant.per_channel and len(w.quant.scale) != out_c:
            raise EerieError(f"{what}: {len(w.quant.scale)} weight scales for {out_c} output "
                             f"channels")
        v["weights"] = ctx.tensor_const(w, "weights")
        if x.dtype == "int8":
            if b is not None and b.dtype != "int32":
                raise EerieError(f"{what}: int8 input needs an int32 bias, got {b.dtype}")
            mult, shift = per_channel_multipliers(x, w, y, out_c)
            pc = w.quant.per_channel
            v.update(kind="s8", in_off=-x.zero_point, out_zp=y.zero_point, per_channel=pc,
                     mult=ctx.const(mult, "int32_t", "multiplier") if pc else int(mult[0]),
                     shift=ctx.const(shift, "int32_t", "shift") if pc else int(shift[0]),
                     bias=ctx.tensor_const(b, "bias") if b is not None else None)
            v["act_min"], v["act_max"] = activation_range_int(act, y)
            helpers = {"requant"}
        elif x.dtype == "int16":
            # TFLM converts an int16 bias to int64; an int32 one it would misread as int64
            if b is not None and b.dtype not in ("int64", "int16"):
                raise EerieError(f"{what}: 16x8 quantization needs an int64 (or int16) bias, "
                                 f"got {b.dtype}")
            if x.zero_point != 0 or y.zero_point != 0:
                raise EerieError(f"{what}: 16x8 quantization needs input and output zero point 0 "
                                 f"(got {x.zero_point} and {y.zero_point})")
            v.update(kind="s16", q=requant_vars(ctx, x, w, y, out_c, act, True, what),
                     bias=ctx.const(b.data.reshape(-1).astype(np.int64), "int64_t", "bias",
                                    "bias widened to int64") if b is not None else None)
            helpers = {"requant64"}
        else:
            raise EerieError(f"{what}: unsupported input type {x.dtype}")
    body = render("kernels/transpose_conv.c.j2", **v)
    return Lowered(body=body, inputs=[x.id], outputs=[y.id], helpers=helpers,
                   macs=batches * in_h * in_w * in_c * kh * kw * out_c)
