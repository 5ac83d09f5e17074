"""LOGISTIC and TANH.

int8: an int8 input has only 256 possible values, so the whole op is a 256-entry table. The
table is computed here at compile time by running TFLM's integer algorithm exactly (input
rescaled into Q4.27 with a multiplier / shift, saturation outside the input range radius,
gemmlowp fixed-point logistic / tanh, rounding into the output) in _fixedpoint.py, which makes
it bit-identical to the reference and leaves one load per element at run time.

Output quantization: TFLM's int8 LOGISTIC requires output zero point -128 and writes values
in units of 1/256; its int8 TANH writes units of 1/128 with zero point 0 whatever the output
tensor says. Both are reproduced as is.

float32: TFLM's reference formulas (logistic with its cut-offs at -9 and 16.62; tanhf).
"""
import math

import numpy as np

from ..templating import render
from ..errors import EerieError
from . import Lowered, kernel
from . import _fixedpoint as fp
from ._quant import tfl_round

INPUT_INTEGER_BITS = 4             # the input is rescaled into Q4.27


def _input_rescale(input_scale: float) -> tuple[int, int, int]:
    """(multiplier, shift, input range radius) as TFLM's int8 LOGISTIC/TANH prepare derive them:
    a plain frexp of input_scale * 2^27 (no renormalisation of a rounded-up mantissa)."""
    real = float(np.float32(input_scale)) * float(1 << (31 - INPUT_INTEGER_BITS))
    q, shift = math.frexp(real)
    mult = fp.wrap32(tfl_round(q * (1 << 31)))
    radius = fp.calculate_input_radius(INPUT_INTEGER_BITS, shift)
    return mult, shift, radius


def int8_table(kind: str, input_scale: float, input_zero_point: int) -> np.ndarray:
    """Output for each int8 input -128..127 (index = input + 128)."""
    mult, shift, radius = _input_rescale(input_scale)
    table = []
    for q in range(-128, 128):
        v = q - input_zero_point
        if v <= -radius:
            out = -128
        elif v >= radius:
            out = 127
        else:
            x = fp.multiply_by_quantized_multiplier(v, mult, shift)
            if kind == "LOGISTIC":
                out = fp.rdbpot(fp.logistic(x, INPUT_INTEGER_BITS), 31 - 8) - 128
            else:
                out = fp.rdbpot(fp.tanh(x, INPUT_INTEGER_BITS), 31 - 7)
            out = max(-128, min(127, out))
        table.append(out)
    return np.array(table, np.int8)


def _lower(op, g, ctx):
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    if x.dtype == "float32":
        body = render("kernels/logistic_tanh_f32.c.j2", kind=op.kind, size=x.size)
        return Lowered(body=body, inputs=[x.id], outputs=[y.id])
    if y.dtype != "int8":
        raise EerieError(f"{op.kind} {op.name!r}: int8 input with {y.dtype} output")
    if op.kind == "LOGISTIC" and y.zero_point != -128:
        raise EerieError(f"LOGISTIC {op.name!r}: int8 output must have zero point -128 "
                         f"(has {y.zero_point})")
    what = "logistic" if op.kind == "LOGISTIC" else "tanh"
    table = ctx.const(int8_table(op.kind, x.scale, x.zero_point), "int8_t", f"{what}_lut",
                      f"{what}(input scale {x.scale:.6g}, zero point {x.zero_point}) "
                      f"for inputs -128..127")
    body = render("kernels/logistic_tanh_s8.c.j2", size=x.size, table=table, what=what)
    return Lowered(body=body, inputs=[x.id], outputs=[y.id])


for _kind in ("LOGISTIC", "TANH"):
    kernel(_kind, dtypes=("int8", "float32"))(_lower)
