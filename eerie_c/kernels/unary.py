"""Elementwise unary ops: ABS, NEG, SQUARE, EXP, LOG, SQRT, RSQRT, ELU, HARD_SWISH, LEAKY_RELU,
FLOOR, CEIL, ROUND, SIN, COS and CAST.

What TFLM runs, and so what is registered here:
- float32 for all of them (TFLM's reference formulas; ROUND is round-half-to-even, ELU uses
  expm1, HARD_SWISH is x * clamp(x + 3, 0, 6) / 6, LEAKY_RELU is x > 0 ? x : alpha * x).
- int8 for ABS, RSQRT, ELU, HARD_SWISH, LEAKY_RELU. Each is a pure function of the one int8
  input value, so the op is a 256-entry table computed here by running TFLM's own integer
  (or, for ELU, float) algorithm in Python; the C is one load per element.
- int16 for ABS (zero points 0; plain |x| when unquantized) and LEAKY_RELU, computed per
  element with the shared requantization helper.
- NEG, SQUARE, EXP, LOG, SQRT, FLOOR, CEIL, ROUND, SIN and COS are float32-only in TFLM
  (SIN / COS: sinf / cosf, as TFLM's std::sin / std::cos on a float).
- CAST between int8, int16, int32, uint32, float32 and bool (C conversions: float to integer
  truncates toward zero, integer narrowing wraps, anything to bool is != 0; float to uint32
  truncates in 64 bits and keeps the low 32, so negative values wrap as on TFLM's x86 build).
"""
from __future__ import annotations

import math

import numpy as np

from ..templating import render
from ..errors import EerieError
from . import Lowered, kernel
from . import _fixedpoint as fp
from ._libm import libm_f
from ._quant import quantize_multiplier, tfl_round


F32 = np.float32


def _f32(v) -> float:
    return float(np.float32(v))


# ---- float32 ---------------------------------------------------------------------------------

FLOAT_EXPR = {
    "ABS": "fabsf(x)",
    "NEG": "-x",
    "SQUARE": "x * x",
    "EXP": "expf(x)",
    "LOG": "logf(x)",
    "SQRT": "sqrtf(x)",
    "RSQRT": "1.0f / sqrtf(x)",
    "FLOOR": "floorf(x)",
    "CEIL": "ceilf(x)",
    "SIN": "sinf(x)",
    "COS": "cosf(x)",
    "ELU": "x < 0.0f ? expm1f(x) : x",
}


def _float_stmt(op) -> tuple[list[str], str]:
    """(extra per-element declarations, the statement writing out0[i])."""
    if op.kind in FLOAT_EXPR:
        return [], f"out0[i] = {FLOAT_EXPR[op.kind]};"
    if op.kind == "LEAKY_RELU":
        from ..templating import c_float
        return [], f"out0[i] = x > 0.0f ? x : x * {c_float(op.attrs.get('alpha', 0.2))};"
    if op.kind == "HARD_SWISH":
        return ["float r = x + 3.0f;"], ("r = r > 0.0f ? r : 0.0f;\n"
                                         "r = r < 6.0f ? r : 6.0f;\n"
                                         "out0[i] = x * r / 6.0f;")
    if op.kind == "ROUND":
        # halves go to the even neighbour, as TFLite's RoundToNearest does
        return ["const float f = floorf(x);", "const float d = x - f;"], (
            "out0[i] = (d < 0.5f || (d == 0.5f && f == 2.0f * floorf(f * 0.5f))) ? f : f + 1.0f;")
    raise EerieError(f"{op.kind}: no float32 kernel")


# ---- int8 tables (TFLM's integer algorithms, run at compile time) ----------------------------

def _clamp(v: int, lo: int = -128, hi: int = 127) -> int:
    return max(lo, min(hi, v))


def abs_table(in_scale, in_zp, out_scale, out_zp, lo=-128, hi=127, values=range(-128, 128)):
    rescale = F32(in_scale) != F32(out_scale)
    m, s = quantize_multiplier(_f32(in_scale) / _f32(out_scale))
    out = []
    for q in values:
        v = abs(q - in_zp)
        out.append(_clamp((fp.multiply_by_quantized_multiplier(v, m, s) if rescale else v) + out_zp, lo, hi))
    return out


def _inv_sqrt_multiplier(x: int) -> tuple[int, int]:
    """TFLite's GetInvSqrtQuantizedMultiplierExp(x, reverse_shift=-1): Newton-Raphson 1/sqrt
    in Q3.28 fixed point; returns (multiplier, shift as a left shift)."""
    if x <= 1:
        return fp.INT32_MAX, 0
    shift = 11
    while x >= (1 << 29):
        x //= 4
        shift += 1
    max_left_bits = (32 - x.bit_length()) - 1
    pairs = max_left_bits // 2 - 1
    shift -= pairs
    x <<= 2 * pairs
    half_input = fp.srmpot(x >> 1, -1)
    half_three = (1 << 28) + (1 << 27)
    r = 1 << 28                                  # 1.0 in Q3.28
    for _ in range(5):
        r3 = fp.srmpot(fp.srdhm(fp.srdhm(r, r), r), 6)       # Q9 -> Q3
        r = fp.srmpot(fp.wrap32(fp.srdhm(half_three, r) - fp.srdhm(half_input, r3)), 3)
    r = fp.srdhm(r, 1518500250)                  # times sqrt(2)/2
    if shift < 0:
        r = fp.wrap32(r << -shift)
        shift = 0
    return r, -shift


def rsqrt_table(in_scale, in_zp, out_scale, out_zp):
    m, s = quantize_multiplier(1.0 / (math.sqrt(_f32(in_scale)) * _f32(out_scale)))
    out = []
    for q in range(-128, 128):
        v = q - in_zp
        if v < 0:
            out.append(out_zp)          # TFLM rejects the inference; no int8 NaN exists
        elif v == 0:
            out.append(127)             # the reference's stand-in for +infinity
        else:
            im, ish = _inv_sqrt_multiplier(v)
            data = fp.multiply_by_quantized_multiplier(1, im, ish + 20)
            out.append(_clamp(fp.multiply_by_quantized_multiplier(data, m, s - 20) + out_zp))
    return out


def elu_table(in_scale, in_zp, out_scale, out_zp):
    """TFLM fills ELU's table in float32 arithmetic with the C library's expf."""
    inv = F32(1) / F32(out_scale)
    out = []
    for q in range(-128, 128):
        x = F32(in_scale) * F32(q - in_zp)
        y = F32(libm_f("expf")(float(x))) - F32(1) if x < 0 else x
        rescaled = F32(tfl_round(float(F32(y * inv))))
        out.append(_clamp(int(F32(rescaled + F32(out_zp)))))
    return out


def _wrap16(x: int) -> int:
    return ((x + 32768) & 0xFFFF) - 32768


def _srdhm16(a: int, b: int) -> int:
    if a == b == -32768:
        return 32767
    ab = a * b
    n = ab + ((1 << 14) if ab >= 0 else 1 - (1 << 14))
    return _wrap16(int(n / (1 << 15)) if abs(n) < (1 << 52) else (abs(n) >> 15) * (1 if n >= 0 else -1))


def _sdhm16(a: int, b: int) -> int:
    """Doubling high multiply rounding toward zero (the reference's SQDMULH stand-in)."""
    if a == b == -32768:
        return 32767
    ab = a * b
    return _wrap16((abs(ab) >> 15) * (1 if ab >= 0 else -1))


def _sat_left16(v: int, amount: int) -> int:
    return max(-32768, min(32767, v * (1 << amount)))


def _downscale16(m32: int) -> int:
    if m32 >= fp.INT32_MAX - (1 << 15):
        return 32767
    return (m32 + (1 << 15)) >> 16


def hard_swish_params(in_scale, out_scale):
    hires = F32(F32(1.0 / 128.0) * F32(in_scale))
    om, oexp = quantize_multiplier(float(F32(hires / F32(out_scale))))
    rm, rexp = quantize_multiplier(float(F32(hires / F32(3.0 / 32768.0))))
    return _downscale16(om), oexp, _downscale16(rm), rexp


def hard_swish_table(in_scale, in_zp, out_scale, out_zp):
    om, oexp, rm, rexp = hard_swish_params(in_scale, out_scale)
    out = []
    for q in range(-128, 128):
        hires = _wrap16((q - in_zp) * 128)
        pre_out = _srdhm16(hires, om)
        r = hires
        if rexp > 0:
            r = _sat_left16(r, rexp - 1)
        r = _srdhm16(r, rm)
        if rexp > 0:
            r = _sat_left16(r, 1)
        if rexp < 0:
            r = fp.rdbpot(r, -rexp)
        r = (r + (1 << 15)) >> 1                 # [-1, 1] -> [0, 1]
        v = fp.rdbpot(_sdhm16(r, pre_out), -oexp)
        out.append(_clamp(_wrap16(v + out_zp)))
    return out


def leaky_relu_params(in_scale, out_scale, alpha):
    """(identity mult, shift, alpha mult, shift, alpha < 0): ratios in double precision. A
    negative alpha is applied as a positive multiplier and a negation afterwards, as TFLM does
    (the rounding differs from a negative multiplier)."""
    mi, si = quantize_multiplier(_f32(in_scale) / _f32(out_scale))
    ma, sa = quantize_multiplier(_f32(in_scale) * _f32(alpha) / _f32(out_scale))
    return mi, si, abs(ma), sa, ma < 0


def leaky_relu_table(in_scale, in_zp, out_scale, out_zp, alpha):
    mi, si, ma, sa, neg = leaky_relu_params(in_scale, out_scale, alpha)
    out = []
    for q in range(-128, 128):
        v = q - in_zp
        if v >= 0:
            r = fp.multiply_by_quantized_multiplier(v, mi, si)
        else:
            r = fp.multiply_by_quantized_multiplier(v, ma, sa)
            r = -r if neg else r
        out.append(_clamp(out_zp + r))
    return out


def _int8_table(op, x, y) -> list[int]:
    a = (x.scale, x.zero_point, y.scale, y.zero_point)
    if op.kind == "ABS":
        return abs_table(*a)
    if op.kind == "RSQRT":
        return rsqrt_table(*a)
    if op.kind == "ELU":
        return elu_table(*a)
    if op.kind == "HARD_SWISH":
        if hard_swish_params(x.scale, y.scale)[1] > 0:
            raise EerieError(f"HARD_SWISH {op.name!r}: input scale / 128 exceeds the output "
                             f"scale, which TFLM does not support")
        return hard_swish_table(*a)
    if op.kind == "LEAKY_RELU":
        return leaky_relu_table(*a, op.attrs.get("alpha", 0.2))
    raise EerieError(f"{op.kind}: no int8 kernel")


# ---- lowering --------------------------------------------------------------------------------

def _lower_unary(op, g, ctx):
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    if x.dtype != y.dtype:
        raise EerieError(f"{op.kind} {op.name!r}: {x.dtype} input with {y.dtype} output")
    if x.size != y.size:
        raise EerieError(f"{op.kind} {op.name!r}: {x.size} input values but {y.size} outputs")
    if x.dtype == "float32":
        decls, stmt = _float_stmt(op)
        body = render("kernels/unary_f32.c.j2", size=x.size, decls=decls, stmt=stmt)
        return Lowered(body=body, inputs=[x.id], outputs=[y.id])
    if x.dtype == "int8":
        if x.quant is None or y.quant is None:
            raise EerieError(f"{op.kind} {op.name!r}: int8 tensors without quantization")
        what = op.kind.lower()
        table = ctx.const(np.array(_int8_table(op, x, y), np.int8), "int8_t", f"{what}_lut",
                          f"{what}(input scale {x.scale:.6g}, zero point {x.zero_point}) "
                          f"for inputs -128..127")
        body = render("kernels/unary_lut_s8.c.j2", size=x.size, table=table, what=what)
        return Lowered(body=body, inputs=[x.id], outputs=[y.id])
    if x.dtype == "int16":
        return _lower_int16(op, x, y)
    raise EerieError(f"{op.kind} {op.name!r}: no {x.dtype} kernel")


def _lower_int16(op, x, y):
    if op.kind == "ABS" and x.quant is None:
        stmt = "const int32_t v = in0[i] < 0 ? -(int32_t)in0[i] : in0[i];\nout0[i] = (int16_t)v;"
        return Lowered(body=render("kernels/unary_s16.c.j2", size=x.size, stmt=stmt),
                       inputs=[x.id], outputs=[y.id])
    if x.quant is None or y.quant is None:
        raise EerieError(f"{op.kind} {op.name!r}: int16 tensors without quantization")
    if op.kind == "ABS":
        if x.zero_point or y.zero_point:
            raise EerieError(f"ABS {op.name!r}: int16 needs zero points 0 (TFLM's rule)")
        if F32(x.scale) == F32(y.scale):
            stmt = "int32_t v = in0[i] < 0 ? -(int32_t)in0[i] : in0[i];"
        else:
            m, s = quantize_multiplier(_f32(x.scale) / _f32(y.scale))
            stmt = ("int32_t v = in0[i] < 0 ? -(int32_t)in0[i] : in0[i];\n"
                    f"v = eerie_requantize(v, {m}, {s});")
    elif op.kind == "LEAKY_RELU":
        mi, si, ma, sa, neg = leaky_relu_params(x.scale, y.scale, op.attrs.get("alpha", 0.2))
        zi, zo = x.zero_point, y.zero_point
        sign = "-" if neg else ""
        stmt = (f"int32_t v = (int32_t)in0[i] - ({zi});\n"
                f"v = (v >= 0 ? eerie_requantize(v, {mi}, {si}) : {sign}eerie_requantize(v, {ma}, {sa})) + ({zo});")
    else:
        raise EerieError(f"{op.kind} {op.name!r}: no int16 kernel")
    stmt += "\nv = v < -32768 ? -32768 : v;\nv = v > 32767 ? 32767 : v;\nout0[i] = (int16_t)v;"
    return Lowered(body=render("kernels/unary_s16.c.j2", size=x.size, stmt=stmt),
                   inputs=[x.id], outputs=[y.id], helpers={"requant"})


UNARY_DTYPES = {
    "ABS": ("float32", "int8", "int16"),
    "RSQRT": ("float32", "int8"),
    "ELU": ("float32", "int8"),
    "HARD_SWISH": ("float32", "int8"),
    "LEAKY_RELU": ("float32", "int8", "int16"),
    "NEG": ("float32",), "SQUARE": ("float32",), "EXP": ("float32",), "LOG": ("float32",),
    "SQRT": ("float32",), "FLOOR": ("float32",), "CEIL": ("float32",), "ROUND": ("float32",),
    "SIN": ("float32",), "COS": ("float32",),
}
for _kind, _dtypes in UNARY_DTYPES.items():
    kernel(_kind, dtypes=_dtypes)(_lower_unary)


# ---- CAST ------------------------------------------------------------------------------------

CAST_TYPES = ("int8", "int16", "int32", "float32", "bool", "uint32")
_CT = {"int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "float32": "float", "bool": "uint8_t",
       "uint32": "uint32_t"}


def cast_expr(src: str, dst: str) -> str:
    if dst == "bool":
        return "(uint8_t)(in0[i] != 0)"
    if src == "float32" and dst in ("int8", "int16"):
        return f"({_CT[dst]})(int32_t)in0[i]"     # truncate toward zero, then narrow
    if src == "float32" and dst == "uint32":
        # truncate toward zero in 64 bits, keep the low 32 (a negative value wraps, as TFLM's
        # static_cast gives on x86; C leaves a direct conversion of it undefined)
        return "(uint32_t)(int64_t)in0[i]"
    return f"({_CT[dst]})in0[i]"


@kernel("CAST", dtypes=CAST_TYPES, outputs={t: CAST_TYPES for t in CAST_TYPES})
def lower_cast(op, g, ctx):
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    if x.dtype not in CAST_TYPES or y.dtype not in CAST_TYPES:
        raise EerieError(f"CAST {op.name!r}: {x.dtype} -> {y.dtype} is not supported "
                         f"(TFLM casts between {', '.join(CAST_TYPES)})")
    if x.size != y.size:
        raise EerieError(f"CAST {op.name!r}: {x.size} input values but {y.size} outputs")
    body = render("kernels/unary_cast.c.j2", size=x.size, expr=cast_expr(x.dtype, y.dtype),
                  src=x.dtype, dst=y.dtype)
    return Lowered(body=body, inputs=[x.id], outputs=[y.id])
