"""SOFTMAX over the last axis: out = exp(beta * (x - max)) / sum(exp(beta * (x - max))).

int8 follows TFLM's reference kernel bit for bit: the difference to the row maximum is scaled
by beta * input_scale into a Q5.26 fixed-point value (multiplier and left shift computed here),
differences below diff_min are treated as exp = 0, exp runs in gemmlowp fixed point, the sum is
accumulated in Q12.19, inverted with a Newton-Raphson reciprocal, and each exp is scaled by
that reciprocal into the output (int8 with scale 1/256 and zero point -128, or int16 with
scale 1/65536 and zero point -32768, the only output quantizations TFLM accepts).

A lookup table is not possible here: the result depends on the row's max and sum.
"""
import numpy as np

from ..templating import render
from ..errors import EerieError
from . import Lowered, kernel
from ._fixedpoint import calculate_input_radius
from ._quant import quantize_multiplier

SCALED_DIFF_INTEGER_BITS = 5       # Q5.26 for beta * (x - max)
ACCUM_INTEGER_BITS = 12            # Q12.19 for the sum of exps


def softmax_int8_params(input_scale: float, beta: float) -> tuple[int, int, int]:
    """(multiplier, left shift, diff_min) as TFLM's SoftmaxPrepare derives them, in double
    from the float32 scale and beta."""
    real = min(float(np.float32(beta)) * float(np.float32(input_scale))
               * float(1 << (31 - SCALED_DIFF_INTEGER_BITS)), float((1 << 31) - 1))
    if real <= 1.0:
        raise EerieError(f"SOFTMAX: beta * input scale = {real / (1 << 26):g} is too small "
                         "for the int8 kernel (TFLM rejects it too)")
    mult, shift = quantize_multiplier(real)
    if shift > 30:
        raise EerieError(f"SOFTMAX: beta * input scale = {real / (1 << 26):g} is too large "
                         "for the int8 kernel")
    diff_min = -calculate_input_radius(SCALED_DIFF_INTEGER_BITS, shift)
    return mult, shift, diff_min


SOFTMAX_S8_OUTPUTS = ("int8", "int16")


@kernel("SOFTMAX", dtypes=("int8", "float32"), outputs={"int8": SOFTMAX_S8_OUTPUTS})
def lower_softmax(op, g, ctx):
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    depth = x.shape[-1] if x.shape else 1
    outer = x.size // depth
    beta = float(np.float32(op.attrs.get("beta", 1.0)))
    if x.dtype == "float32":
        if y.dtype != "float32":
            raise EerieError(f"SOFTMAX {op.name!r}: float32 input with {y.dtype} output")
        body = render("kernels/softmax_f32.c.j2", outer=outer, depth=depth, beta=beta)
        return Lowered(body=body, inputs=[x.id], outputs=[y.id])

    if y.dtype == "int8":
        if y.zero_point != -128 or np.float32(y.scale) != np.float32(1.0 / 256):
            raise EerieError(f"SOFTMAX {op.name!r}: int8 output must have scale 1/256 and zero "
                             f"point -128 (has {y.scale:g}, {y.zero_point})")
        out_bits, out_min, out_max = 8, -128, 127
    elif y.dtype == "int16":
        if y.zero_point != -32768 or abs(float(np.float32(y.scale)) - 1.0 / 65536) > 0.001 / 65536:
            raise EerieError(f"SOFTMAX {op.name!r}: int16 output must have scale 1/65536 and "
                             f"zero point -32768 (has {y.scale:g}, {y.zero_point})")
        out_bits, out_min, out_max = 16, -32768, 32767
    else:
        raise EerieError(f"SOFTMAX {op.name!r}: int8 input with {y.dtype} output")
    mult, shift, diff_min = softmax_int8_params(x.scale, beta)
    body = render("kernels/softmax_s8.c.j2", outer=outer, depth=depth, mult=mult,
                  shift=shift, shift_mul=1 << shift, diff_min=diff_min,
                  out_ctype=y.ctype, out_exponent_base=31 - out_bits,
                  out_min=out_min, out_max=out_max, beta=beta, in_scale=float(x.scale))
    return Lowered(body=body, inputs=[x.id], outputs=[y.id],
                   helpers={"requant", "fixedpoint"}, scratch_bytes=4 * depth)
