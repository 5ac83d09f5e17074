"""Compile-time support for the int8 kernels' DSP-extension variants (templates/helpers/dsp.c.j2).

Targets with the ARMv7E-M / ARMv8-M DSP extension (SIMD32: SXTB16, SMLAD, SMMULR) get int8
CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED kernels built on the building blocks of
templates/helpers/dsp.c.j2: one instruction each under `#if defined(__ARM_FEATURE_DSP)`, plain
C with the same results in the `#else` branch, so the generated file still builds (and is
proved by the pycparser verifier, which preprocesses without target macros) anywhere.

The fast requantization (eerie_requant_fast) is exact only when every channel's shift is a
right shift (exponent <= -1) and the accumulator magnitude stays below 2^30; both are proved
here from the weights and bias, per layer, or the layer keeps TFLite's general formula.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._quant import per_channel_multipliers

DSP_TARGETS = ("cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55")


def has_dsp(target: str) -> bool:
    """Whether generated code for `target` should carry the DSP variants."""
    return target in DSP_TARGETS


def acc_bound(bias: np.ndarray, w_abs_sum: np.ndarray) -> np.ndarray:
    """Largest |accumulator| per channel: |bias'| + 128 * sum|w| (int8 activations)."""
    return np.abs(bias.astype(np.int64)) + 128 * w_abs_sum.astype(np.int64)


def fast_requant_ok(mult: np.ndarray, shift: np.ndarray, bound: np.ndarray) -> bool:
    """eerie_requant_fast is bit-exact with TFLite's MultiplyByQuantizedMultiplier here:
    right shifts only (so no pre-shift that could wrap) and 2 * acc fits in int32."""
    shift = np.asarray(shift, np.int64)
    return bool(np.all(shift <= -1) and np.all(shift >= -31)
                and np.all(np.asarray(mult, np.int64) >= 0)
                and int(np.max(bound, initial=0)) < 2 ** 30)


def pad_to(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """`a` zero-padded at the end of each axis to `shape`."""
    out = np.zeros(shape, a.dtype)
    out[tuple(slice(0, n) for n in a.shape)] = a
    return out


def round_up(n: int, k: int) -> int:
    return (n + k - 1) // k * k


def zero_channels(mult, shift, bound) -> np.ndarray:
    """Channels whose requantized value (before the output zero point) is 0 for every
    accumulator within `bound`: multiplier 0, or a right shift past |acc * mult / 2^31|.
    Their weights and bias may be zeroed (acc = 0 requantizes to 0 too), which keeps the
    accumulator bound of the layer small (models carry huge biases on such dead channels)."""
    mult = np.asarray(mult, np.int64).reshape(-1)
    shift = np.asarray(shift, np.int64).reshape(-1)
    bound = np.asarray(bound, np.int64).reshape(-1)
    ymax = (np.minimum(bound, 2 ** 31) * mult >> 31) + 1
    return (mult == 0) | ((shift <= -2) & (shift >= -62)
                          & (ymax <= (np.int64(1) << np.clip(-shift - 1, 0, 62)) - 1))


def tflite_requantize(acc: int, mult: int, shift: int) -> int:
    """TFLite's MultiplyByQuantizedMultiplier on one int32 (the C helper eerie_requantize)."""
    left, right = max(shift, 0), max(-shift, 0)
    x = ((acc << left) + 2 ** 31) % 2 ** 32 - 2 ** 31          # int32 wrap of the pre-shift
    if x == mult == -2 ** 31:
        q = 2 ** 31 - 1
    else:
        ab = x * mult
        nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
        q = abs(ab + nudge) >> 31
        q = q if ab + nudge >= 0 else -q                     # C division truncates
    mask = (1 << right) - 1
    threshold = (mask >> 1) + (1 if q < 0 else 0)
    return (q >> right) + (1 if (q & mask) > threshold else 0)


def constant_channels(w_abs_sum, fbias, mult, shift, out_zp: int) -> dict[int, int]:
    """Channels whose weights are all zero: their output (before the activation clamp) is a
    compile-time constant, {channel: requantized folded bias + output zero point}."""
    return {int(c): tflite_requantize(int(fbias[c]), int(mult[c]), int(shift[c])) + out_zp
            for c in np.flatnonzero(np.asarray(w_abs_sum) == 0)}


def fast_requant_values(mult, shift, out_zp: int, bound,
                        constants: dict[int, int] | None = None):
    """Per-channel operands of eerie_requant_fast as int64 arrays (mult, rshift, radd) and the
    zero point still added after it, or None when it would not be exact (see
    fast_requant_consts, which emits them)."""
    mult = np.array(mult, np.int64).reshape(-1)
    shift = np.array(shift, np.int64).reshape(-1)
    bound = np.broadcast_to(np.asarray(bound, np.int64), (max(mult.size, np.size(bound)),))
    if mult.size == 1 and bound.size > 1:       # per-tensor parameters, per-channel bounds
        mult, shift = np.repeat(mult, bound.size), np.repeat(shift, bound.size)
    # A channel whose result is provably always 0 before the zero point (multiplier 0, or a
    # right shift beyond the largest |acc * mult / 2^31|) is given multiplier 0 and shift 1:
    # (0 - 0 + 1) >> 1 = 0 as well, and a small shift keeps the folded zero point in range.
    zero = zero_channels(mult, shift, bound)
    fixed = np.zeros(mult.shape, bool)
    for c in (constants or {}):
        fixed[c] = True
    mult, shift = np.where(zero | fixed, 0, mult), np.where(zero | fixed, -1, shift)
    bound = np.where(fixed, 0, bound)
    if not fast_requant_ok(mult, shift, bound):
        return None
    rshift = -shift
    radd = (np.int64(1) << (rshift - 1)) + (np.int64(out_zp) << rshift)
    zp_after = 0
    if int(np.max(np.abs(radd))) + int(np.max(bound, initial=0)) + 2 >= 2 ** 31:
        radd = np.int64(1) << (rshift - 1)
        zp_after = out_zp
    for c, value in (constants or {}).items():
        radd[c] = 2 * (value - zp_after) + 1
    return mult, rshift, radd, zp_after


def fast_requant_consts(ctx, mult, shift, out_zp: int, bound, per_channel: bool,
                        channels: int, arrays: bool = False,
                        constants: dict[int, int] | None = None) -> dict | None:
    """C operands of eerie_requant_fast (rq_mult, rq_rshift, rq_radd: C array names or
    literals; rq_zp: what is still added after it), or None when it would not be exact.
    The output zero point is folded into radd when the sum provably stays in int32. With
    arrays=True, per-tensor parameters are emitted as arrays too (of one element, rq_mask 0,
    so index [channel & rq_mask]). `constants`
    (from constant_channels; their accumulators must be 0, i.e. their bias zeroed) get
    multiplier 0 and shift 1 with radd = 2 * value + 1, so (0 + radd) >> 1 is the value."""
    values = fast_requant_values(mult, shift, out_zp, bound, constants)
    if values is None:
        return None
    mult, rshift, radd, zp_after = values
    uniform = len(set(zip(mult.tolist(), rshift.tolist(), radd.tolist()))) == 1
    if per_channel or arrays or not uniform:
        n = 1 if uniform and not per_channel else channels
        return dict(rq_arrays=True, rq_mask=0 if n == 1 else -1,
                    rq_mult=ctx.const(pad_to(mult[:n].astype(np.int32), (n,)), "int32_t", "multiplier"),
                    rq_rshift=ctx.const(pad_to(rshift[:n].astype(np.int32), (n,)), "int32_t", "rshift"),
                    rq_radd=ctx.const(pad_to(radd[:n].astype(np.int32), (n,)), "int32_t", "radd",
                                      "rounding term of the right shift (plus the output zero point "
                                      "times 2^rshift when folded)"),
                    rq_zp=zp_after)
    return dict(rq_arrays=False, rq_mask=0, rq_mult=int(mult[0]), rq_rshift=int(rshift[0]),
                rq_radd=int(radd[0]), rq_zp=zp_after)


# The shared CONV_2D kernels (helpers/gemm_dsp.c.j2, gemm_dsp_g.c.j2; conv.py, conv_add.py):
# largest depth in groups of 4 taps for which the shared kernel is unrolled (one copy per
# depth, helpers/gemm_dsp_g.c.j2: about 60 bytes of code per group): the C around the
# general kernel's loop costs ~55 instructions per pair of channels, about 0.2 per MAC at
# K = 64 and less the deeper the layer. 16 -> 32 (vww's K = 128 layers): vww 10,751,760 ->
# 10,541,640 instructions on the M4, 11,100,200 -> 10,873,000 on the M7, for 1.9 KB of code
UNROLL_MAX_GROUPS = 32
# smallest kp for the unrolled copy (vww's 1x1 K = 8 layer: 3.90 -> 2.0 instructions per
# MAC on the M4 against the inline C kernel, and on the M7)
UNROLL_MIN_K = 8

_PAIR_WORDS = "2 folded biases, its weight words, multiplier, radd, rshift (2 of each)"


def pair_weights(ctx, v: dict, words: np.ndarray, what: str, hint: str = "weights") -> str:
    """The shared kernel's weight words as a constant; for the unrolled kernel one stream:
    per pair of channels its bias words, its weight words, then multiplier, radd, rshift."""
    if not v.get("unrolled"):
        return ctx.const(words, "int32_t", hint, what)
    rows = v.pop("rq_rows")
    stream = np.concatenate([rows[:, :2], words.reshape(rows.shape[0], -1), rows[:, 2:]], axis=1)
    return ctx.const(stream.reshape(-1), "int32_t", hint + "_requant",
                     f"{what}; per pair of rows {_PAIR_WORDS}")


def dsp_conv_helpers(v: dict) -> set[str]:
    """Helper templates of an int8 CONV_2D (or CONV_2D_ADD) of int8_conv_vars' `v`."""
    helpers = {"requant"} | ({"dsp"} if v["dsp"] else set())
    if v.get("shared"):
        helpers.add("gemm_dsp")
        if v.get("unrolled"):
            helpers.add(f"gemm_dsp_g:{v['unrolled']}" + (" w" if v.get("wide") else "")
                        + (" d" if v.get("dcols") else "") + (" 4" if v.get("w4") else ""))
    return helpers


def dsp_conv_scratch(v: dict) -> int:
    """Scratch bytes of a DSP CONV_2D: two columns of kp int16, the im2col bytes of one window
    unless 1x1 (or, for columns built by _conv_cols.py, the framed input, or nothing when
    every window lies inside the image), and the unrolled kernel's two output pointers."""
    cols = v.get("cols")
    if v["direct"] or (cols and not cols["frame"] and not v["w"].has_border):
        window = 0
    elif cols and cols["frame"]:
        window = cols["frame"].size(v["in_c"])
    else:
        window = v["kp"]
    # (before the columns: the unrolled kernel's two output pointers; with 4-bit weights also
    # 8 x the two columns' sums and 2 zp + 1, helpers/gemm_dsp.c.j2)
    return 4 * v["kp"] + window + (24 if v.get("w4") else 8 if v.get("unrolled") else 0)


@dataclass
class ChannelQuant:
    """A depthwise layer's per-channel requantization facts for the DSP kernels: weights and
    folded bias with dead channels zeroed (their output is always the zero point, and acc = 0
    requantizes the same), the channels with all-zero weights (constant outputs, produced by
    the requantization constants; their folded bias is 0 in `dfb`), and the accumulator bound."""
    wk: np.ndarray          # [taps, channels] weights, dead channels 0
    fb: np.ndarray          # folded bias, 0 for dead channels
    dfb: np.ndarray         # folded bias, 0 for dead and constant channels
    mult: np.ndarray
    shift: np.ndarray
    consts: dict[int, int]  # constant channels -> their output
    bound: np.ndarray       # largest |accumulator| per channel


def channel_quant(x, w, y, wk, fb, channels: int) -> ChannelQuant:
    mult, shift = per_channel_multipliers(x, w, y, channels)
    wabs = np.abs(wk.astype(np.int64)).sum(axis=0)
    dead = zero_channels(mult, shift, acc_bound(fb, wabs))
    if dead.any():
        wk, fb, wabs = np.where(dead[None, :], 0, wk), np.where(dead, 0, fb), np.where(dead, 0, wabs)
    consts = constant_channels(wabs, fb, mult, shift, y.zero_point)
    dfb = np.where(wabs == 0, 0, fb)
    return ChannelQuant(wk, fb, dfb, mult, shift, consts, acc_bound(dfb, wabs))
