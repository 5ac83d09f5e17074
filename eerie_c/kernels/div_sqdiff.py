"""DIV (float32, int32, int8) and SQUARED_DIFFERENCE (float32, int32, int8, int16), with
TFLite broadcasting and, for DIV, a fused activation.

int8 DIV follows TFLM: a divisor (after its zero point) is made positive by flipping both
signs, its Q31 reciprocal comes from the fixed-point Newton-Raphson GetReciprocal; the
dividend is normalised by its count of leading sign bits, multiplied by the reciprocal, and
the quotient requantized by in1_scale / (in2_scale * out_scale) with a right shift that
undoes both normalisations. Everything that depends on the divisor alone (sign flip,
reciprocal, its shift) is a 256-entry table computed here.

One corner differs on purpose: when that final right shift exceeds 31 (a dividend within a
few steps of its zero point, a large divisor and a small in1 / (in2 * out) ratio), TFLM shifts
an int32 by 32 or more, which is undefined behaviour in C++ and gives different values on
x86 and Arm. The quotient there is below half an output step, so this kernel writes the
output zero point (the correctly rounded result).

SQUARED_DIFFERENCE int8/int16 follows TFLM: both inputs are shifted left (7 bits for int8,
0 for int16), scaled to a common 2 * max(scale) base, subtracted, squared and requantized.
int16 needs zero points 0 (TFLM's rule).
"""
from __future__ import annotations

import numpy as np

from ..errors import EerieError
from . import kernel
from . import _fixedpoint as fp
from ._broadcast import lower_elementwise, operand
from ._quant import activation_range_float, activation_range_int, quantize_multiplier

F32 = np.float32
INT32_ACT = {"NONE": ("(-2147483647 - 1)", "2147483647"), "RELU": ("0", "2147483647"),
             "RELU6": ("0", "6"), "RELU_N1_TO_1": ("-1", "1")}


def _operands(op, g, ctx):
    a, b, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
    if not a.dtype == b.dtype == y.dtype:
        raise EerieError(f"{op.kind} {op.name!r}: {a.dtype} and {b.dtype} -> {y.dtype}")
    inputs: list[str] = []
    pa, pb = operand(a.id, g, ctx, inputs, "lhs"), operand(b.id, g, ctx, inputs, "rhs")
    return a, b, y, inputs, pa, pb


def _clamp(lo, hi, var="o"):
    return f"{var} = {var} < {lo} ? {lo} : {var};\n{var} = {var} > {hi} ? {hi} : {var};\n"


def divisor_tables(zp: int):
    """Per int8 divisor value: (sign flip, Q31 reciprocal, reciprocal's shift)."""
    neg, inv, shift = [], [], []
    for q in range(-128, 128):
        v = q - zp
        neg.append(1 if v < 0 else 0)
        if v == 0:
            inv.append(fp.INT32_MAX)   # a zero divisor is undefined in TFLM too
            shift.append(0)
            continue
        r, s = fp.reciprocal(abs(v), 31)
        inv.append(r)
        shift.append(s)
    return np.array(neg, np.uint8), np.array(inv, np.int32), np.array(shift, np.int8)


@kernel("DIV", dtypes=("float32", "int32", "int8"))
def lower_div(op, g, ctx):
    a, b, y, inputs, pa, pb = _operands(op, g, ctx)
    act = op.attrs.get("fused_activation_function", "NONE") or "NONE"
    if a.dtype == "float32":
        lo, hi = activation_range_float(act)

        def body(ix):
            return (f"float o = {pa}[{ix[0]}] / {pb}[{ix[1]}];\n" + _clamp(lo, hi)
                    + f"out0[{ix[2]}] = o;")
        return lower_elementwise(y, [a.shape, b.shape], inputs, body)
    if a.dtype == "int32":
        if a.quant is not None or b.quant is not None:
            raise EerieError(f"DIV {op.name!r}: TFLM divides int32 only without quantization")
        lo, hi = INT32_ACT[act]

        def body(ix):
            return (f"int32_t o = {pa}[{ix[0]}] / {pb}[{ix[1]}];\n" + _clamp(lo, hi)
                    + f"out0[{ix[2]}] = o;")
        return lower_elementwise(y, [a.shape, b.shape], inputs, body)
    if a.dtype != "int8":
        raise EerieError(f"DIV {op.name!r}: no {a.dtype} kernel")
    if a.quant is None or b.quant is None or y.quant is None:
        raise EerieError(f"DIV {op.name!r}: int8 tensors without quantization")
    real = float(F32(a.scale)) / (float(F32(b.scale)) * float(F32(y.scale)))   # double, as TFLM
    mult, shift = quantize_multiplier(real)
    if shift > 23:
        raise EerieError(f"DIV {op.name!r}: scale ratio {real:g} is too large for TFLM's int8 DIV")
    neg, inv, rsh = divisor_tables(b.zero_point)
    t_neg = ctx.const(neg, "uint8_t", "div_neg", "1 where the divisor is negative")
    t_inv = ctx.const(inv, "int32_t", "div_recip", "Q31 reciprocal of |divisor| per int8 value")
    t_sh = ctx.const(rsh, "int8_t", "div_recip_shift", "exponent of that reciprocal")
    lo, hi = activation_range_int(act, y)
    za, zo = a.zero_point, y.zero_point

    def body(ix):
        return (f"const int d = (int){pb}[{ix[1]}] + 128;\n"
                f"int32_t v = (int32_t){pa}[{ix[0]}] - ({za});\n"
                f"int32_t o = {zo};\n"
                f"if ({t_neg}[d]) {{\n"
                f"    v = -v;\n"
                f"}}\n"
                f"if (v != 0) {{\n"
                f"    /* normalise the dividend, multiply by the reciprocal, undo both shifts */\n"
                f"    const int headroom = eerie_count_leading_sign_bits(v);\n"
                f"    const int32_t q = eerie_sat_round_doubling_high_mul((int32_t)((uint32_t)v << headroom), {t_inv}[d]);\n"
                f"    const int right = headroom + {t_sh}[d] - ({shift});\n"
                f"    o += right > 31 ? 0 : eerie_rounding_divide_by_pot(eerie_sat_round_doubling_high_mul(q, {mult}), right);\n"
                f"}}\n" + _clamp(lo, hi) + f"out0[{ix[2]}] = (int8_t)o;")
    return lower_elementwise(y, [a.shape, b.shape], inputs, body, {"requant", "clsb"})


@kernel("SQUARED_DIFFERENCE", dtypes=("float32", "int32", "int8", "int16"))
def lower_squared_difference(op, g, ctx):
    a, b, y, inputs, pa, pb = _operands(op, g, ctx)
    if a.dtype == "float32":
        def body(ix):
            return (f"const float d = {pa}[{ix[0]}] - {pb}[{ix[1]}];\n"
                    f"out0[{ix[2]}] = d * d;")
        return lower_elementwise(y, [a.shape, b.shape], inputs, body)
    if a.dtype == "int32":
        def body(ix):
            # wrap-around like the reference's int32 arithmetic, without signed overflow
            return (f"const uint32_t d = (uint32_t){pa}[{ix[0]}] - (uint32_t){pb}[{ix[1]}];\n"
                    f"out0[{ix[2]}] = (int32_t)(d * d);")
        return lower_elementwise(y, [a.shape, b.shape], inputs, body)
    if a.dtype not in ("int8", "int16"):
        raise EerieError(f"SQUARED_DIFFERENCE {op.name!r}: no {a.dtype} kernel")
    if a.quant is None or b.quant is None or y.quant is None:
        raise EerieError(f"SQUARED_DIFFERENCE {op.name!r}: {a.dtype} tensors without quantization")
    if a.dtype == "int16" and (a.zero_point or b.zero_point or y.zero_point):
        raise EerieError(f"SQUARED_DIFFERENCE {op.name!r}: int16 needs zero points 0 (TFLM's rule)")
    left = 7 if a.dtype == "int8" else 0
    twice_max = 2.0 * float(max(F32(a.scale), F32(b.scale)))
    m1, s1 = quantize_multiplier(float(F32(a.scale)) / twice_max)
    m2, s2 = quantize_multiplier(float(F32(b.scale)) / twice_max)
    mo, so = quantize_multiplier(twice_max * twice_max / float(F32(F32(1 << (2 * left)) * F32(y.scale))))
    za, zb, zo = a.zero_point, b.zero_point, y.zero_point
    lo, hi = (-128, 127) if a.dtype == "int8" else (-32768, 32767)

    def body(ix):
        return (f"const int32_t va = eerie_requantize(((int32_t){pa}[{ix[0]}] - ({za})) * {1 << left}, {m1}, {s1});\n"
                f"const int32_t vb = eerie_requantize(((int32_t){pb}[{ix[1]}] - ({zb})) * {1 << left}, {m2}, {s2});\n"
                f"int32_t o = eerie_requantize((va - vb) * (va - vb), {mo}, {so}) + ({zo});\n"
                + _clamp(lo, hi) + f"out0[{ix[2]}] = ({a.ctype})o;")
    return lower_elementwise(y, [a.shape, b.shape], inputs, body, {"requant"})
