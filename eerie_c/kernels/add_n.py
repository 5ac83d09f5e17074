"""ADD_N: the element-wise sum of N same-shaped tensors, float32 and int8 (TFLM's dtypes).

float32 adds the inputs in order, as TFLM does. int8 follows TFLM's reference AddN: all
inputs share one scale and zero point (TFLM checks it); each input, offset by the zero point
and shifted left 20 bits, is halved by the multiplier 0.5 (rounding), the halves are summed
and the sum requantized by 2 * in_scale / (2^20 * out_scale). Like TFLM, the sum starts from
the requantized input offset itself (-zero point) rather than from 0, so a non-zero input zero
point adds one more -zp term; it is a compile-time constant here. int32 sums wrap, as TFLM's
do on two's-complement machines.
"""
from __future__ import annotations

import numpy as np

from ..errors import EerieError
from . import Lowered, kernel
from . import _fixedpoint as fp
from ._broadcast import operand
from ._quant import quantize_multiplier

LEFT_SHIFT = 20


@kernel("ADD_N", dtypes=("float32", "int8"))
def lower_add_n(op, g, ctx):
    xs, y = [g.t(t) for t in op.inputs], g.t(op.outputs[0])
    if any(x.dtype != y.dtype or tuple(x.shape) != tuple(y.shape) for x in xs):
        raise EerieError(f"ADD_N {op.name!r}: every input needs the output's dtype and shape")
    inputs: list[str] = []
    srcs = [operand(x.id, g, ctx, inputs, f"in{k}") for k, x in enumerate(xs)]
    n = y.size
    if y.dtype == "float32":
        terms = "".join(f"    acc += {s}[i];\n" for s in srcs)
        body = f"int i;\nfor (i = 0; i < {n}; ++i) {{\n    float acc = 0.0f;\n{terms}    out0[i] = acc;\n}}"
        return Lowered(body=body, inputs=inputs, outputs=[y.id])

    if any(x.quant is None for x in xs) or y.quant is None:
        raise EerieError(f"ADD_N {op.name!r}: int8 tensors without quantization")
    s0, z0 = np.float32(xs[0].scale), xs[0].zero_point
    if any(np.float32(x.scale) != s0 or x.zero_point != z0 for x in xs):
        raise EerieError(f"ADD_N {op.name!r}: int8 inputs need one scale and zero point (TFLM's rule)")
    twice = 2.0 * float(s0)
    m_in, sh_in = quantize_multiplier(float(s0) / twice)
    m_out, sh_out = quantize_multiplier(twice / ((1 << LEFT_SHIFT) * float(np.float32(y.scale))))
    start = fp.multiply_by_quantized_multiplier(-z0 * (1 << LEFT_SHIFT), m_in, sh_in)
    terms = "".join(
        f"    v = eerie_requantize(((int32_t){s}[i] - ({z0})) * {1 << LEFT_SHIFT}, {m_in}, {sh_in});\n"
        f"    acc = (int32_t)((uint32_t)acc + (uint32_t)v);\n" for s in srcs)
    body = (f"int i;\n"
            f"for (i = 0; i < {n}; ++i) {{\n"
            f"    /* TFLM's sum starts at the scaled input offset, not at 0 */\n"
            f"    int32_t acc = {start};\n"
            f"    int32_t v;\n{terms}"
            f"    acc = eerie_requantize(acc, {m_out}, {sh_out}) + ({y.zero_point});\n"
            f"    acc = acc < -128 ? -128 : acc;\n"
            f"    acc = acc > 127 ? 127 : acc;\n"
            f"    out0[i] = (int8_t)acc;\n"
            f"}}")
    return Lowered(body=body, inputs=inputs, outputs=[y.id], helpers={"requant"})
