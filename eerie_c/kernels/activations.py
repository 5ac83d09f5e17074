"""RELU, RELU6, RELU_N1_TO_1 as standalone ops.

int8 semantics differ per op, following TFLM (the oracle) rather than TFLite:
- RELU requantizes: out = clamp(zp_out + (x - zp_in) * in_scale / out_scale, act range on
  the output), the multiplier derived in double like TFLM's ReluPrepare. With identical input
  and output quantization the rescale is the identity and only the clamp is emitted.
- RELU6 does NOT requantize in TFLM: it clamps the raw input to [zp_in, q_in(6.0)] and writes
  that to the output, whatever the output's quantization says. We do the same.
- RELU_N1_TO_1 has no TFLM kernel; we follow TFLite's reference (requantize like RELU, clamp to
  the output's quantized [-1, 1]).
float: a plain clamp.
"""
from ..templating import render
from ..errors import EerieError
from . import Lowered, kernel
from ._quant import activation_range_int, quantize_multiplier
from .elementwise import _signed

FLOAT_RANGE = {"RELU": ("0.0f", None), "RELU6": ("0.0f", "6.0f"), "RELU_N1_TO_1": ("-1.0f", "1.0f")}


def _lower(op, g, ctx):
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    if x.dtype != y.dtype or x.size != y.size:
        raise EerieError(f"{op.kind} {op.name!r}: input {x.dtype}{list(x.shape)} and output "
                         f"{y.dtype}{list(y.shape)} differ")
    if x.dtype == "float32":
        lo, hi = FLOAT_RANGE[op.kind]
        body = render("kernels/relu_f32.c.j2", n=x.size, lo=lo, hi=hi)
        return Lowered(body=body, inputs=[x.id], outputs=[y.id])

    if x.quant is None or y.quant is None:
        raise EerieError(f"{op.kind} {op.name!r}: int8 tensors without quantization parameters")
    helpers = set()
    if op.kind == "RELU6":
        # clamp in the input's own quantization (TFLM's Relu6Quantized)
        lo, hi = activation_range_int("RELU6", x)
        rescale = None
    else:
        lo, hi = activation_range_int(op.kind, y)
        in_scale, out_scale = float(x.quant.scale[0]), float(y.quant.scale[0])
        mult, shift = quantize_multiplier(in_scale / out_scale)
        if (mult, shift) == (1 << 30, 1) and x.zero_point == y.zero_point:
            rescale = None        # same quantization: the rescale is exactly the identity
        else:
            rescale = dict(in_off=_signed(-x.zero_point), out_off=_signed(y.zero_point),
                           mult=mult, shift=shift)
            helpers.add("requant")
    body = render("kernels/relu_s8.c.j2", n=x.size, lo=lo, hi=hi, rescale=rescale)
    return Lowered(body=body, inputs=[x.id], outputs=[y.id], helpers=helpers)


for _kind in ("RELU", "RELU6", "RELU_N1_TO_1"):
    kernel(_kind, dtypes=("int8", "float32"))(_lower)
