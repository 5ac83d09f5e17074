"""Helium (MVE) int8 ADD arithmetic with a compile-time exactness proof (cortex-m55 only).

TFLM's int8 ADD: each operand, offset by its zero point and shifted left by 20 bits, is
requantized (multiplier, shift) to a common scale; the sum is requantized to the output,
offset and clamped. The requantizations round ties away from zero (TFLite's
SaturatingRoundingDoublingHighMul, then RoundingDivideByPOT). The vector form used here is
cheaper and rounds ties up instead:

    x = a * 2^L + c                      (VMLAS: c = -zero_point * 2^L)
    t = VRSHL(VQRDMULH(x, m), -k)        (round half up, twice)
    s = VRSHL(VQRDMULH(t_a + t_b << lo, m_o), -k_o) + zp_o, clamped

so it is not the same function in general. But an int8 operand has 256 values and the pair
(a, b) 65,536: `mve_add_params` evaluates both forms in numpy over every value (each input
stage over its 256 operands, the output stage over every reachable sum) and returns the
vector constants only when they agree everywhere; where ties break the natural constants, a
few neighbouring multipliers are tried (any multiplier that agrees on the whole domain is as
good). None means "keep the exact scalar loop".
"""
from __future__ import annotations

import numpy as np

from ._quant import quantize_multiplier

ADD_LEFT_SHIFT = 20          # TFLM's headroom for int8 ADD (elementwise.ADD_LEFT_SHIFT)
_TRIES = (0, 1, -1, 2, -2, 3, -3, 4, -4, 6, -6, 8, -8, 12, -12, 16, -16)
_I8 = np.arange(-128, 128, dtype=np.int64)


def _srdhm(a, m: int):
    """TFLite SaturatingRoundingDoublingHighMul (no saturation case: m >= 0)."""
    ab = a * np.int64(m)
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    n = ab + nudge
    return np.where(n >= 0, n >> 31, -((-n) >> 31))      # C division truncates


def _rdbp(x, e: int):
    """TFLite RoundingDivideByPOT."""
    mask = (1 << e) - 1
    rem = x & mask
    thr = (mask >> 1) + (x < 0)
    return (x >> e) + (rem > thr)


def _wrap32(x):
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def tflite_requantize(x, m: int, shift: int):
    """eerie_requantize / MultiplyByQuantizedMultiplier on int64 arrays holding int32 values."""
    x = _wrap32(np.asarray(x, np.int64) << max(shift, 0))
    return _rdbp(_srdhm(x, m), max(-shift, 0))


def _vqrdmulh(a, m: int):
    return (2 * a * np.int64(m) + (1 << 31)) >> 32


def _vrshr(x, k: int, fix: bool = False):
    """VRSHL by -k (round half up); fix: first add -1 to negative values (VSHR #31, VADD),
    which makes the rounding of ties away from zero like TFLite's (k >= 1)."""
    if k == 0:
        return x
    if fix:
        x = x + (x >> 63)
    return (x + (1 << (k - 1))) >> k


def _in32(x) -> bool:
    return bool(np.all((x >= -(1 << 31)) & (x < (1 << 31))))


def _input_stage(zp: int, m: int, shift: int):
    """(L, c, m', k) of the vector input stage matching the scalar one on all 256 values."""
    d = _I8 - zp
    want = tflite_requantize(d << ADD_LEFT_SHIFT, m, shift)
    big_l, k = ADD_LEFT_SHIFT + max(shift, 0), max(-shift, 0)
    if big_l > 22 or k > 31:
        return None
    x = _I8 * (1 << big_l) - zp * (1 << big_l)
    if not _in32(x):
        return None
    for fix in ((False, True) if k else (False,)):
        for dm in _TRIES:
            mm = m + dm
            if 0 <= mm < (1 << 31) and np.array_equal(_vrshr(_vqrdmulh(x, mm), k, fix), want):
                return dict(shift=big_l, off=int(-zp * (1 << big_l)), mult=mm, rshift=k,
                            fix=int(fix)), want
    return None


_FIXES = sorted(((fa, fb, fo) for fa in (0, 1) for fb in (0, 1) for fo in (0, 1)), key=sum)


def _natural(m1, sh1, zp1, m2, sh2, zp2, mo, sho, zpo, act_min, act_max):
    """TFLM's own multipliers with the cheapest sign fixes that give the scalar ADD's result
    on every operand pair (intermediate values may differ by a rounding step when the final
    result does not), or None."""
    big = dict(a=(zp1, m1, sh1), b=(zp2, m2, sh2))
    stage = {}
    for key, (zp, m, sh) in big.items():
        big_l, k = ADD_LEFT_SHIFT + max(sh, 0), max(-sh, 0)
        if big_l > 22 or k > 31:
            return None
        stage[key] = (big_l, k, _vqrdmulh(_I8 * (1 << big_l) - zp * (1 << big_l), m))
    ta = tflite_requantize((_I8 - zp1) << ADD_LEFT_SHIFT, m1, sh1)
    tb = tflite_requantize((_I8 - zp2) << ADD_LEFT_SHIFT, m2, sh2)
    sums = ta[:, None] + tb[None, :]
    lo, ko = max(sho, 0), max(-sho, 0)
    if not _in32(sums << lo) or ko > 31:
        return None
    want = np.clip(tflite_requantize(sums, mo, sho) + zpo, act_min, act_max)
    for fa, fb, fo in _FIXES:
        if (fa and not stage["a"][1]) or (fb and not stage["b"][1]) or (fo and not ko):
            continue
        va = _vrshr(stage["a"][2], stage["a"][1], fa)
        vb = _vrshr(stage["b"][2], stage["b"][1], fb)
        vs = (va[:, None] + vb[None, :]) << lo
        if not _in32(vs):
            continue
        got = np.clip(_vrshr(_vqrdmulh(vs, mo), ko, fo) + zpo, act_min, act_max)
        if np.array_equal(got, want):
            return dict(a_shift=stage["a"][0], a_off=int(-zp1 * (1 << stage["a"][0])), a_mult=m1,
                        a_rshift=stage["a"][1], a_fix=fa,
                        b_shift=stage["b"][0], b_off=int(-zp2 * (1 << stage["b"][0])), b_mult=m2,
                        b_rshift=stage["b"][1], b_fix=fb,
                        o_lshift=lo, o_mult=mo, o_rshift=ko, o_fix=fo, o_zp=zpo,
                        act_min=act_min, act_max=act_max)
    return None


def mve_add_params(m1: int, sh1: int, zp1: int, m2: int, sh2: int, zp2: int,
                   mo: int, sh_o: int, zpo: int, act_min: int, act_max: int) -> dict | None:
    """Constants of the vector ADD (dict of ints: a_*, b_*, o_* and the clamp), or None when
    no candidate is bit-exact with the scalar ADD over all 65,536 operand pairs. First TFLM's
    multipliers with the fewest sign fixes, checked on the final results; then stage by stage
    (each input stage equal on its 256 values) with neighbouring multipliers."""
    p = _natural(m1, sh1, zp1, m2, sh2, zp2, mo, sh_o, zpo, act_min, act_max)
    if p is not None:
        return p
    sho = sh_o
    sa, sb = _input_stage(zp1, m1, sh1), _input_stage(zp2, m2, sh2)
    if sa is None or sb is None:
        return None
    (pa, ta), (pb, tb) = sa, sb
    sums = np.unique(ta[:, None] + tb[None, :])
    if not _in32(sums):
        return None
    want = np.clip(tflite_requantize(sums, mo, sho) + zpo, act_min, act_max)
    lo, ko = max(sho, 0), max(-sho, 0)
    if ko > 31 or lo > 31:
        return None
    xs = sums << lo
    if not _in32(xs):            # the scalar shift would wrap: keep the scalar loop
        return None
    for fix in ((False, True) if ko else (False,)):
        for dm in _TRIES:
            mm = mo + dm
            if not 0 <= mm < (1 << 31):
                continue
            got = np.clip(_vrshr(_vqrdmulh(xs, mm), ko, fix) + zpo, act_min, act_max)
            if np.array_equal(got, want):
                return dict(a_shift=pa["shift"], a_off=pa["off"], a_mult=pa["mult"],
                            a_rshift=pa["rshift"], a_fix=pa["fix"],
                            b_shift=pb["shift"], b_off=pb["off"], b_mult=pb["mult"],
                            b_rshift=pb["rshift"], b_fix=pb["fix"],
                            o_lshift=lo, o_mult=mm, o_rshift=ko, o_fix=int(fix), o_zp=zpo,
                            act_min=act_min, act_max=act_max)
    return None


def add_multipliers(s1: float, s2: float, so: float):
    """TFLM's ADD multipliers from the float32 scales: (m1, sh1, m2, sh2, mo, sho)."""
    s1, s2, so = (float(np.float32(s)) for s in (s1, s2, so))
    twice_max = 2.0 * max(s1, s2)
    m1, sh1 = quantize_multiplier(s1 / twice_max)
    m2, sh2 = quantize_multiplier(s2 / twice_max)
    mo, sho = quantize_multiplier(twice_max / ((1 << ADD_LEFT_SHIFT) * so))
    return m1, sh1, m2, sh2, mo, sho


def add_params_for(a, b, y, act_min: int, act_max: int) -> dict | None:
    """mve_add_params for int8 tensors a + b -> y (TFLite operand order)."""
    m1, sh1, m2, sh2, mo, sho = add_multipliers(a.scale, b.scale, y.scale)
    return mve_add_params(m1, sh1, a.zero_point, m2, sh2, b.zero_point, mo, sho, y.zero_point,
                          act_min, act_max)


def vector_add_reference(a, b, p: dict):
    """The vector formula in numpy (for tests): int8 arrays a, b -> int8 result."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    ta = _vrshr(_vqrdmulh(a * (1 << p["a_shift"]) + p["a_off"], p["a_mult"]), p["a_rshift"], p["a_fix"])
    tb = _vrshr(_vqrdmulh(b * (1 << p["b_shift"]) + p["b_off"], p["b_mult"]), p["b_rshift"], p["b_fix"])
    s = _vrshr(_vqrdmulh((ta + tb) << p["o_lshift"], p["o_mult"]), p["o_rshift"], p["o_fix"]) + p["o_zp"]
    return np.clip(s, p["act_min"], p["act_max"]).astype(np.int8)


def params_array(p: dict) -> list[int]:
    """The 17 int32 constants in the order eerie_vadd_s8 (base_mve.c.j2) reads them."""
    return [1 << p["a_shift"], p["a_off"], p["a_mult"], -p["a_rshift"], p["a_fix"],
            1 << p["b_shift"], p["b_off"], p["b_mult"], -p["b_rshift"], p["b_fix"],
            p["o_lshift"], p["o_mult"], -p["o_rshift"], p["o_fix"], p["o_zp"],
            p["act_min"], p["act_max"]]


def lower_add_mve(ctx, a, b, y, srcs: list[str], inputs: list[str], act_min: int,
                  act_max: int):
    """int8 ADD of same-shape operands (no broadcasting) as one eerie_vadd_s8 call, or None
    (broadcast, or no bit-exact vector constants: elementwise.py keeps the scalar loops).
    Element e of both operands is read before out0[e] is written, so out0 may start at in0."""
    from . import Lowered
    shape = tuple(y.shape)
    if tuple(a.shape) != shape or tuple(b.shape) != shape:
        return None
    n = int(np.prod(shape, dtype=np.int64))
    if n == 0 or n >= 16777216:
        return None
    p = add_params_for(a, b, y, act_min, act_max)
    if p is None:
        return None
    q = ctx.const(np.asarray(params_array(p), np.int32), "int32_t", "add_mve",
                  "vector ADD constants (see eerie_vadd_s8), proven bit-exact at compile time")
    body = (f"/* Helium: 4 elements per step, TFLM's int8 ADD results */\n"
            f"eerie_vadd_s8(out0, {srcs[0]}, {srcs[1]}, {n}, {q});\n")
    return Lowered(body=body, inputs=inputs, outputs=[y.id], helpers={"base_mve"}, inplace=True)
