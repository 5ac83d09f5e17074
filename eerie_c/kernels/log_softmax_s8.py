"""LOG_SOFTMAX on int8, bit-exact with TFLM's reference kernel (float32 lives in misc_fill.py).

out = (x - max) - log(sum(exp(x - max))) over the last axis, in gemmlowp fixed point: the row
difference is scaled by input_scale (beta is 1) into Q5.26 with the multiplier and left shift
of TFLite's PreprocessSoftmaxScaling, differences below diff_min (CalculateInputRadius) are
left out of the sum, exps are summed in Q12.19, log(sum) is taken in Q5.26 (helpers/
fixedpoint_log.c.j2), and (scaled diff - log sum) is rounded into the output's Q4.3. An
element whose diff is at or below the row's threshold (log sum + INT32_MIN mapped back to the
input scale by the reverse multiplier, at least diff_min - 1) gets -128.
TFLM requires the output quantization scale 16/256, zero point 127.
"""
from __future__ import annotations

import numpy as np

from ..templating import render
from ..errors import EerieError
from . import Lowered, kernel
from ._fixedpoint import calculate_input_radius
from ._quant import quantize_multiplier

SCALED_DIFF_INTEGER_BITS = 5
OUTPUT_SCALE = np.float32(16.0 / 256)
OUTPUT_ZERO_POINT = 127


def log_softmax_params(what: str, input_scale: float):
    """(mult, left shift, reverse multiplier, reverse shift, diff_min) as TFLM's Prepare
    derives them (PreprocessLogSoftmaxScalingExp with beta = 1)."""
    real = min(float(np.float32(input_scale)) * float(1 << (31 - SCALED_DIFF_INTEGER_BITS)),
               float((1 << 31) - 1))
    mult, shift = quantize_multiplier(real) if real > 1.0 else (0, 0)
    if real <= 1.0 or shift <= 0 or shift > 30:
        raise EerieError(f"{what}: input scale {input_scale:g} is out of the range TFLM's int8 "
                         f"LOG_SOFTMAX handles (input_scale * 2^26 must be in (2, 2^31))")
    rev_real = float(1 << (31 - shift)) / float(mult)
    rev_mult, rev_shift = quantize_multiplier(rev_real)
    if not 0.0 < rev_real < 1.0 or rev_shift > 0:
        raise EerieError(f"{what}: input scale {input_scale:g} gives a reverse scaling factor "
                         f"TFLM cannot represent")
    diff_min = -calculate_input_radius(SCALED_DIFF_INTEGER_BITS, shift)
    return mult, shift, rev_mult, rev_shift, diff_min


@kernel("LOG_SOFTMAX", dtypes=("int8",))
def lower_log_softmax_s8(op, g, ctx):
    what = f"LOG_SOFTMAX (op {op.index})"
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    if list(x.shape) != list(y.shape) or y.dtype != "int8" or not x.shape:
        raise EerieError(f"{what}: output {y.dtype}{list(y.shape)} must match the input")
    if x.quant is None or y.quant is None:
        raise EerieError(f"{what}: int8 tensors without quantization parameters")
    if np.float32(y.scale) != OUTPUT_SCALE or y.zero_point != OUTPUT_ZERO_POINT:
        raise EerieError(f"{what}: int8 output must have scale 16/256 and zero point 127, as "
                         f"TFLM requires (has {y.scale:g}, {y.zero_point})")
    depth = int(x.shape[-1])
    outer = x.size // depth if depth else 0
    if depth == 0 or depth > 4096:
        raise EerieError(f"{what}: row length {depth} out of range (the Q12.19 sum of exps "
                         f"holds at most 4096 terms)")
    mult, shift, rev_mult, rev_shift, diff_min = log_softmax_params(what, float(x.scale))
    body = render("kernels/log_softmax_s8.c.j2", outer=outer, depth=depth, mult=mult,
                  shift=shift, rev_mult=rev_mult, rev_shift=rev_shift, diff_min=diff_min,
                  in_scale=float(x.scale))
    return Lowered(body=body, inputs=[x.id], outputs=[y.id],
                   helpers={"requant", "fixedpoint", "fixedpoint_log"})
