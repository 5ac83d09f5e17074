"""Compile-time support for the int8 kernels' DSP-extension variants (templates/helpers/dsp.c.j2).

Targets with the ARMv7E-M / ARMv8-M DSP extension (SIMD32: SXTB16, SMLAD, SMMULR) get a
second kernel body guarded by `#if defined(EERIE_DSP)`; the portable body stays in the
`#else` branch, so the same C file still builds for the host and for cores without DSP.

The fast requantization (eerie_requant_fast) is exact only when every channel's shift is a
right shift (exponent <= -1) and the accumulator magnitude stays below 2^30; both are proved
here from the weights and bias, per layer, or the layer keeps TFLite's general formula.
"""
from __future__ import annotations

import numpy as np

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


def fast_requant_consts(ctx, mult, shift, out_zp: int, bound, per_channel: bool,
                        channels: int) -> dict | None:
    """C operands of eerie_requant_fast (rq_mult, rq_rshift, rq_radd: C array names or
    literals; rq_zp: what is still added after it), or None when it would not be exact.
    The output zero point is folded into radd when the sum provably stays in int32."""
    mult = np.asarray(mult, np.int64)
    shift = np.asarray(shift, np.int64)
    bound = np.asarray(bound, np.int64)
    if not fast_requant_ok(mult, shift, bound):
        return None
    # per-tensor quantization: one multiplier for all channels, so the bound is the max
    rshift = -shift
    radd = (np.int64(1) << (rshift - 1)) + (np.int64(out_zp) << rshift)
    zp_after = 0
    if int(np.max(np.abs(radd))) + int(np.max(bound, initial=0)) + 2 >= 2 ** 31:
        radd = np.int64(1) << (rshift - 1)
        zp_after = out_zp
    if per_channel:
        return dict(rq_mult=ctx.const(pad_to(mult.astype(np.int32), (channels,)), "int32_t", "multiplier"),
                    rq_rshift=ctx.const(pad_to(rshift.astype(np.int32), (channels,)), "int32_t", "rshift"),
                    rq_radd=ctx.const(pad_to(radd.astype(np.int32), (channels,)), "int32_t", "radd",
                                      "rounding term of the right shift (plus the output zero point "
                                      "times 2^rshift when folded)"),
                    rq_zp=zp_after)
    return dict(rq_mult=int(mult[0]), rq_rshift=int(rshift[0]), rq_radd=int(radd[0]) if radd.ndim else int(radd),
                rq_zp=zp_after)
