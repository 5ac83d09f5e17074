"""Where RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR read their input: TFLite's coordinate
rules in float32, as TFLM's reference kernels compute them. Part of the ops' meaning, so the
kernels (kernels/resize.py) and the PyTorch frontend (which checks whether torch's coordinates
are TFLite's) share one definition."""
from __future__ import annotations

import numpy as np


def _f32_scale(n_in, n_out, align):
    if align and n_out > 1:
        return np.float32(n_in - 1) / np.float32(n_out - 1)
    return np.float32(n_in) / np.float32(n_out)


def _round_half_away(v: np.float32) -> int:
    return int(np.sign(v) * np.floor(np.abs(v) + np.float32(0.5)))


def nearest_index(n_in, n_out, align, half) -> list[int]:
    scale = _f32_scale(n_in, n_out, align)
    off = np.float32(0.5) if half else np.float32(0.0)
    out = []
    for i in range(n_out):
        v = np.float32(np.float32(i) + off) * scale
        k = _round_half_away(v) if align else int(np.floor(v))
        k = min(k, n_in - 1)
        if half:
            k = max(0, k)
        out.append(k)
    return out


def bilinear_taps(n_in, n_out, align, half):
    scale = _f32_scale(n_in, n_out, align)
    lo, hi, frac = [], [], []
    for i in range(n_out):
        if half:
            v = np.float32(np.float32(np.float32(i) + np.float32(0.5)) * scale) - np.float32(0.5)
        else:
            v = np.float32(np.float32(i) * scale)
        v = np.float32(v)
        a = max(int(np.floor(v)), 0)
        lo.append(a)
        hi.append(min(int(np.ceil(v)), n_in - 1))
        frac.append(np.float32(v - np.float32(a)))
    return lo, hi, frac
