"""Compile-time quantization arithmetic, matching TFLite/TFLM's reference rules.

All of it runs once, in Python, at compile time; the generated C only sees the resulting
integer multipliers and shifts.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import EerieError
from ..ir import Tensor


def tfl_round(x: float) -> int:
    """std::round: halves away from zero (Python's round() goes to even)."""
    return int(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)


def quantize_multiplier(real: float) -> tuple[int, int]:
    """Q31 multiplier and power-of-two exponent with real = m * 2^shift / 2^31 (TFLite's
    QuantizeMultiplier, double precision)."""
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    q_fixed = tfl_round(q * (1 << 31))
    if q_fixed == (1 << 31):
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return int(q_fixed), int(shift)


def quantize_multiplier_smaller_than_one(real: float) -> tuple[int, int]:
    return quantize_multiplier(real)


def activation_range_int(act: str, t: Tensor, qmin: int = -128, qmax: int = 127) -> tuple[int, int]:
    """TFLite's CalculateActivationRangeQuantized for a fused activation on output `t`."""
    scale, zp = np.float32(t.scale), t.zero_point

    def q(v: float) -> int:
        # TFLite casts round(v / scale) to int32; past its range the cast is undefined (TFLM
        # on x86 gets INT32_MIN and clamps every output to the lowest value), so there is no
        # reference answer to match: refuse rather than pick one.
        r = tfl_round(float(np.float32(v) / scale))
        if not -2**31 <= r < 2**31 or not -2**31 <= zp + r < 2**31:
            raise EerieError(f"{act} on a tensor of scale {float(scale):.3g}: its bound {v:g} is "
                             f"{v / float(scale):.3g} steps, past TFLite's int32 arithmetic "
                             "(the reference's result is undefined)")
        return zp + r

    if act in ("NONE", None):
        return qmin, qmax
    if act == "RELU":
        return max(qmin, q(0.0)), qmax
    if act == "RELU6":
        return max(qmin, q(0.0)), min(qmax, q(6.0))
    if act == "RELU_N1_TO_1":
        return max(qmin, q(-1.0)), min(qmax, q(1.0))
    raise ValueError(f"unsupported fused activation {act}")


def activation_range_float(act: str) -> tuple[str, str]:
    """C literals for the clamp of a float fused activation."""
    return {"NONE": ("-FLT_MAX", "FLT_MAX"), None: ("-FLT_MAX", "FLT_MAX"),
            "RELU": ("0.0f", "FLT_MAX"), "RELU6": ("0.0f", "6.0f"),
            "RELU_N1_TO_1": ("-1.0f", "1.0f")}[act]


def per_channel_multipliers(in_t: Tensor, w_t: Tensor, out_t: Tensor, channels: int):
    """Per-output-channel (multiplier, shift) arrays for conv-like ops (TFLM's
    PopulateConvolutionQuantizationParams): scale_in * scale_w[c] / scale_out in double."""
    mults, shifts = [], []
    in_scale, out_scale = float(np.float32(in_t.scale)), float(np.float32(out_t.scale))
    for c in range(channels):
        w_scale = float(w_t.quant.scale[c if w_t.quant.per_channel else 0])
        m, s = quantize_multiplier(in_scale * w_scale / out_scale)
        mults.append(m)
        shifts.append(s)
    return np.array(mults, np.int32), np.array(shifts, np.int32)
