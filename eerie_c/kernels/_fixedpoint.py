"""Bit-exact Python model of the gemmlowp-style int32 fixed-point arithmetic that TFLite's
integer reference kernels use (logistic, tanh, exp on negative values, 1/(1+x)).

Values are plain Python ints holding the raw int32 of a fixed-point number with a given
number of integer bits (Qm.(31-m)). Every operation reproduces the int32 behaviour of the
reference, including its rounding, saturation and two's-complement wrap-around, so that
tables computed here at compile time are identical to what TFLM computes at run time.
"""
from __future__ import annotations

import math

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1


def wrap32(x: int) -> int:
    """Two's-complement int32 wrap-around of an exact integer."""
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _div_trunc(n: int, d: int) -> int:
    """C integer division (rounds toward zero); d > 0."""
    q = abs(n) // d
    return q if n >= 0 else -q


def srdhm(a: int, b: int) -> int:
    """SaturatingRoundingDoublingHighMul: round(a * b / 2^31), saturating MIN * MIN."""
    if a == b == INT32_MIN:
        return INT32_MAX
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    return wrap32(_div_trunc(ab + nudge, 1 << 31))


def rdbpot(x: int, exponent: int) -> int:
    """RoundingDivideByPOT: arithmetic shift right, rounding half away from zero."""
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


def srmpot(x: int, exponent: int) -> int:
    """SaturatingRoundingMultiplyByPOT: saturating left shift for exponent > 0, rounding
    right shift for exponent < 0."""
    if exponent == 0:
        return x
    if exponent < 0:
        return rdbpot(x, -exponent)
    threshold = (1 << (31 - exponent)) - 1
    if x > threshold:
        return INT32_MAX
    if x < -threshold:
        return INT32_MIN
    return wrap32(x << exponent)


def rounding_half_sum(a: int, b: int) -> int:
    s = a + b
    return wrap32(_div_trunc(s + (1 if s >= 0 else -1), 2))


def multiply_by_quantized_multiplier(x: int, multiplier: int, shift: int) -> int:
    """TFLite's MultiplyByQuantizedMultiplier (double rounding, the default build)."""
    left = shift if shift > 0 else 0
    right = -shift if shift < 0 else 0
    return rdbpot(srdhm(wrap32(x * (1 << left)), multiplier), right)


def calculate_input_radius(input_integer_bits: int, input_left_shift: int,
                           total_signed_bits: int = 31) -> int:
    """Largest |input| whose left-shifted value still fits the int32 fixed-point format."""
    max_input_rescaled = (1.0 * ((1 << input_integer_bits) - 1)
                          * float(1 << (total_signed_bits - input_integer_bits))
                          / float(1 << input_left_shift))
    return int(math.floor(max_input_rescaled))


# ---- exp, 1/(1+x), (1-x)/(1+x), tanh, logistic (gemmlowp's algorithms) ----

_ONE_Q0 = INT32_MAX                 # "1.0" with 0 integer bits saturates to the max raw value
_EXP_MINUS_1_8 = 1895147668         # exp(-1/8) in Q0.31
_ONE_THIRD = 715827883              # 1/3 in Q0.31
# exp(-2^k) in Q0.31 for the barrel shifter over the integer part of the input.
_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
               (2, 39332535), (3, 720401), (4, 242))


def exp_on_interval_minus_quarter_to_0(a: int) -> int:
    """exp(a) for a in [-1/4, 0), Q0 in and out: 4th-order Taylor series around -1/8."""
    x = wrap32(a + (1 << 28))
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    x4_over_4 = srmpot(x4, -2)
    poly = srmpot(wrap32(srdhm(wrap32(x4_over_4 + x3), _ONE_THIRD) + x2), -1)
    return wrap32(_EXP_MINUS_1_8 + srdhm(_EXP_MINUS_1_8, wrap32(x + poly)))


def exp_on_negative_values(a: int, integer_bits: int) -> int:
    """exp(a) for a <= 0 given with `integer_bits` integer bits; result in Q0.31."""
    frac_bits = 31 - integer_bits
    one_quarter = 1 << (frac_bits - 2)
    a_mod_quarter_minus_quarter = wrap32((a & (one_quarter - 1)) - one_quarter)
    result = exp_on_interval_minus_quarter_to_0(srmpot(a_mod_quarter_minus_quarter, integer_bits))
    remainder = wrap32(a_mod_quarter_minus_quarter - a)
    for exponent, multiplier in _EXP_BARREL:
        if integer_bits > exponent and remainder & (1 << (frac_bits + exponent)):
            result = srdhm(result, multiplier)
    if integer_bits > 5 and a < -(1 << (36 - integer_bits)):
        result = 0                   # below -32: exp underflows to zero
    if a == 0:
        result = _ONE_Q0
    return result


def _newton_reciprocal_half_denominator(half_denominator: int) -> int:
    """Three Newton-Raphson steps for 1/half_denominator; result in Q2.29."""
    x = wrap32(1515870810 + srdhm(half_denominator, -1010580540))   # 48/17 - 32/17 * d
    one_q2 = 1 << 29
    for _ in range(3):
        one_minus = wrap32(one_q2 - srdhm(half_denominator, x))
        x = wrap32(x + srmpot(srdhm(x, one_minus), 2))
    return x


def one_over_one_plus_x_for_x_in_0_1(a: int) -> int:
    """1 / (1 + a) for a in [0, 1), Q0 in and out."""
    x = _newton_reciprocal_half_denominator(rounding_half_sum(a, _ONE_Q0))
    return srmpot(x, 1)


def one_minus_x_over_one_plus_x_for_x_in_0_1(a: int) -> int:
    """(1 - a) / (1 + a) for a in [0, 1), Q0 in and out."""
    x = _newton_reciprocal_half_denominator(rounding_half_sum(a, _ONE_Q0))
    return srmpot(wrap32(x - (1 << 29)), 2)


def tanh(a: int, integer_bits: int) -> int:
    """tanh(a), input with `integer_bits` integer bits, result in Q0.31."""
    if a == 0:
        return 0
    n = a if a < 0 else wrap32(-a)
    t = one_minus_x_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(n, integer_bits + 1))
    return wrap32(-t) if a < 0 else t


def logistic(a: int, integer_bits: int) -> int:
    """1 / (1 + exp(-a)), input with `integer_bits` integer bits, result in Q0.31."""
    if a == 0:
        return 1 << 30
    abs_a = a if a > 0 else wrap32(-a)
    if_positive = one_over_one_plus_x_for_x_in_0_1(
        exp_on_negative_values(wrap32(-abs_a), integer_bits))
    return if_positive if a > 0 else wrap32(_ONE_Q0 - if_positive)


def reciprocal(x: int, x_integer_bits: int) -> tuple[int, int]:
    """TFLite's GetReciprocal: (1/x scaled into Q0.31, num_bits_over_unit) for x > 0."""
    ux = x & 0xFFFFFFFF
    headroom_plus_one = 32 - ux.bit_length()
    num_bits_over_unit = x_integer_bits - headroom_plus_one
    shifted_minus_one = wrap32(((ux << headroom_plus_one) & 0xFFFFFFFF) - (1 << 31))
    return one_over_one_plus_x_for_x_in_0_1(shifted_minus_one), num_bits_over_unit
