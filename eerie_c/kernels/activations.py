"""RELU, RELU6, RELU_N1_TO_1 as standalone ops.

int8 semantics differ per op, following TFLM (the oracle) rather than TFLite:
- RELU requantizes: out = clamp(zp_out + (x - zp_in) * in_scale / out_scale, act range on
  the output), the multiplier derived in double like TFLM's ReluPrepare. With identical input
  and output quantization the rescale is the identity and only the clamp is emitted.
- RELU6 does NOT requantize in TFLM: it clamps the raw input to [zp_in, q_in(6.0)] and writes
  that to the output, whatever the output's quantization says. We do the same.
- RELU_N1_TO_1 has no TFLM kernel; we follow TFLite's reference (requantize like RELU, clamp to
  the output's quantized [-1, 1]).
int16 (RELU and RELU6, as TFLM): the same arithmetic on int16 values; RELU needs zero points 0
(TFLM's rule), RELU6 clamps the raw values to [zp_in, q_in(6.0)] like int8.
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
        raise EerieError(f"{op.kind} {op.name!r}: {x.dtype} tensors without quantization parameters")
    qmin, qmax = (-128, 127) if x.dtype == "int8" else (-32768, 32767)
    if x.dtype == "int16" and op.kind == "RELU" and (x.zero_point or y.zero_point):
        raise EerieError(f"RELU {op.name!r}: int16 needs zero points 0 (TFLM's rule)")
    helpers = set()
    if op.kind == "RELU6":
        # clamp in the input's own quantization (TFLM's Relu6Quantized)
        lo, hi = activation_range_int("RELU6", x, qmin, qmax)
        rescale = None
    else:
        lo, hi = activation_range_int(op.kind, y, qmin, qmax)
        in_scale, out_scale = float(x.quant.scale[0]), float(y.quant.scale[0])
        mult, shift = quantize_multiplier(in_scale / out_scale)
        if (mult, shift) == (1 << 30, 1) and x.zero_point == y.zero_point:
            rescale = None        # same quantization: the rescale is exactly the identity
        else:
            rescale = dict(in_off=_signed(-x.zero_point), out_off=_signed(y.zero_point),
                           mult=mult, shift=shift)
            helpers.add("requant")
    body = render("kernels/relu_s8.c.j2", n=x.size, lo=lo, hi=hi, rescale=rescale, ctype=x.ctype)
    return Lowered(body=body, inputs=[x.id], outputs=[y.id], helpers=helpers)


for _kind, _dtypes in (("RELU", ("int8", "int16", "float32")), ("RELU6", ("int8", "int16", "float32")),
                      ("RELU_N1_TO_1", ("int8", "float32"))):
    kernel(_kind, dtypes=_dtypes)(_lower)
