"""Lowerings of PyTorch pooling: max_pool2d, avg_pool2d (ceil_mode, count_include_pad) and
adaptive_avg_pool2d (any output size) -> MAX_POOL_2D / AVERAGE_POOL_2D / MEAN, each NHWC between
transposes (an adaptive pool with uneven windows: two averaging matrix products).

Where torch's windows are not TFLite's SAME or VALID ones, the input is padded explicitly and
an average is corrected by a constant per-position factor.
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import EerieError
from .lower_nn import _geometry, _nchw_in, _nchw_out, _pairs, _same_padding_matches
from .lower_shape import _slice_op
from .registry import lowers


@lowers("max_pool2d_with_indices", "max_pool2d")
def _max_pool(L, node, x, kernel, stride=None, padding=0, dilation=1, ceil_mode=False):
    what = f"max pool {node.name}"
    x = L.ensure_act(x, what)
    k = _pairs(kernel)
    s = _pairs(stride) if stride else list(k)
    p, d = _pairs(padding), _pairs(dilation)
    if d != [1, 1]:
        raise EerieError(f"{what}: dilated pooling is not supported")
    oshape = L.meta_shape()
    xn = _nchw_in(L, x, what)
    if _ceil_changes(L.t(xn).shape, k, s, p, ceil_mode):
        xin, pad = _pool_pad_explicit(L, xn, k, s, p, oshape, -math.inf), "VALID"
    else:
        xin, pad = _geometry(L, xn, k, s, d, p, what, pad_value=-math.inf)
    n, c = L.t(xn).shape[0], L.t(xn).shape[3]
    y = L.op("MAX_POOL_2D", [xin], (n, oshape[2], oshape[3], c), "float32",
             {"padding": pad, "stride_h": s[0], "stride_w": s[1], "filter_height": k[0],
              "filter_width": k[1], "fused_activation_function": "NONE"})
    _check_pool_shape(L, xin, y, k, s, pad, what, ceil_mode)
    y = _nchw_out(L, y)
    return (y, None) if node.target.__name__.startswith("max_pool2d_with_indices") else y


def _pool_out(n, k, s, p, ceil_mode):
    """torch's pooled extent: with ceil_mode a last partial window, unless it would start
    beyond the input and its left padding."""
    out = (n + 2 * p - k + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _ceil_changes(nhwc, k, s, p, ceil_mode) -> bool:
    return bool(ceil_mode) and any(_pool_out(n, kk, ss, pp, True) != _pool_out(n, kk, ss, pp, False)
                                   for n, kk, ss, pp in zip(nhwc[1:3], k, s, p))


def _pool_pad_explicit(L, xn, k, s, p, oshape, value):
    """The NHWC input padded (value) so that a VALID pool gives exactly torch's windows: p
    before, and after whatever the last window needs (cropped when it needs less than none)."""
    n, h, w, c = L.t(xn).shape
    after = [(o - 1) * ss + kk - size - pp for o, ss, kk, size, pp in zip(oshape[2:4], s, k, (h, w), p)]
    for dim, a in ((1, after[0]), (2, after[1])):
        if a < 0:   # the last rows/columns fall in no window
            xn = _slice_op(L, xn, dim, 0, L.t(xn).shape[dim] + a, 1)
    pads = np.array([[0, 0], [p[0], max(after[0], 0)], [p[1], max(after[1], 0)], [0, 0]], np.int32)
    _, h, w, _ = L.t(xn).shape
    ins = [xn, L.const(pads, "int32", "paddings")]
    kind = "PAD"
    if value != 0.0:
        kind = "PADV2"
        ins.append(L.const(np.array(value, np.float32), "float32", "pad_value"))
    return L.op(kind, ins, (n, h + int(pads[1].sum()), w + int(pads[2].sum()), c), L.t(xn).dtype)


def _avg_divisors(size, k, s, p, out, count_include_pad):
    """torch's divisor per output position along one dim: the window clipped to the padded
    input (count_include_pad) or to the input itself."""
    d = []
    for o in range(out):
        start = o * s - p
        end = min(start + k, size + p)
        d.append(end - start if count_include_pad else min(end, size) - max(start, 0))
    return np.array(d, np.float64)


def _check_pool_shape(L, xin, y, k, s, pad, what, ceil_mode):
    _, h, w, _ = L.t(xin).shape
    if pad == "SAME":
        exp = ((h + s[0] - 1) // s[0], (w + s[1] - 1) // s[1])
    else:
        exp = ((h - k[0]) // s[0] + 1, (w - k[1]) // s[1] + 1)
    if exp != tuple(L.t(y).shape[1:3]):
        raise EerieError(f"{what}: output {list(L.t(y).shape[1:3])} differs from the TFLite pooling "
                         f"geometry {list(exp)}{' (ceil_mode)' if ceil_mode else ''}")


@lowers("avg_pool2d")
def _avg_pool(L, node, x, kernel, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
              divisor_override=None):
    what = f"average pool {node.name}"
    x = L.ensure_act(x, what)
    if divisor_override:
        raise EerieError(f"{what}: divisor_override is not supported")
    k = _pairs(kernel)
    s = _pairs(stride) if stride else list(k)
    p = _pairs(padding)
    oshape = L.meta_shape()
    xn = _nchw_in(L, x, what)
    _, h, w, _ = L.t(xn).shape
    same_ok = p == [0, 0] or all(_same_padding_matches(n, kk, ss, 1, pp) for n, kk, ss, pp in zip((h, w), k, s, p))
    if _ceil_changes(L.t(xn).shape, k, s, p, ceil_mode) or (not count_include_pad and not same_ok):
        # Zero padding, a VALID pool (which divides by k*k), then a constant per-position
        # factor k*k / torch's divisor where the two differ.
        xin = _pool_pad_explicit(L, xn, k, s, p, oshape, 0.0)
        n, c = L.t(xn).shape[0], L.t(xn).shape[3]
        y = L.op("AVERAGE_POOL_2D", [xin], (n, oshape[2], oshape[3], c), "float32",
                 {"padding": "VALID", "stride_h": s[0], "stride_w": s[1], "filter_height": k[0],
                  "filter_width": k[1], "fused_activation_function": "NONE"})
        _check_pool_shape(L, xin, y, k, s, "VALID", what, ceil_mode)
        div = np.outer(_avg_divisors(h, k[0], s[0], p[0], oshape[2], count_include_pad),
                       _avg_divisors(w, k[1], s[1], p[1], oshape[3], count_include_pad))
        if (div != k[0] * k[1]).any():
            fix = (k[0] * k[1] / div).astype(np.float32).reshape(1, oshape[2], oshape[3], 1)
            y = L.op("MUL", [y, L.const(fix, "float32", "divisor_fix")], L.t(y).shape, "float32",
                     {"fused_activation_function": "NONE"})
        return _nchw_out(L, y)
    if p != [0, 0] and count_include_pad:
        # Padding counted in the average: pad with zeros explicitly and pool VALID.
        n, h, w, c = L.t(xn).shape
        xin = L.op("PAD", [xn, L.const(np.array([[0, 0], [p[0], p[0]], [p[1], p[1]], [0, 0]], np.int32),
                                       "int32", "paddings")], (n, h + 2 * p[0], w + 2 * p[1], c), "float32")
        pad = "VALID"
    else:
        xin, pad = _geometry(L, xn, k, s, [1, 1], p, what, allow_pad_op=False)
    n, c = L.t(xn).shape[0], L.t(xn).shape[3]
    y = L.op("AVERAGE_POOL_2D", [xin], (n, oshape[2], oshape[3], c), "float32",
             {"padding": pad, "stride_h": s[0], "stride_w": s[1], "filter_height": k[0],
              "filter_width": k[1], "fused_activation_function": "NONE"})
    _check_pool_shape(L, xin, y, k, s, pad, what, ceil_mode)
    return _nchw_out(L, y)


@lowers("_adaptive_avg_pool2d", "adaptive_avg_pool2d")
def _adaptive_avg(L, node, x, output_size):
    what = f"adaptive average pool {node.name}"
    x = L.ensure_act(x, what)
    _, c, h, w = L.t(x).shape
    oh, ow = _pairs(output_size)
    oh, ow = oh or h, ow or w
    if (oh, ow) == (1, 1):
        return L.op("MEAN", [x, L.const(np.array([2, 3], np.int32), "int32", "axes")], L.meta_shape(),
                    "float32", {"keep_dims": True})
    wins_h, wins_w = _adaptive_windows(h, oh), _adaptive_windows(w, ow)
    geo_h, geo_w = _uniform(wins_h), _uniform(wins_w)
    if geo_h is None or geo_w is None:
        return _adaptive_by_matrices(L, x, wins_h, wins_w)
    # Windows of one size at a fixed stride (any exact divisor, also e.g. 7 -> 2 or 7 -> 3,
    # whose windows overlap): an ordinary average pool.
    xn = _nchw_in(L, x, what)
    (kh, sh), (kw, sw) = geo_h, geo_w
    y = L.op("AVERAGE_POOL_2D", [xn], (L.t(xn).shape[0], oh, ow, c), "float32",
             {"padding": "VALID", "stride_h": sh, "stride_w": sw, "filter_height": kh,
              "filter_width": kw, "fused_activation_function": "NONE"})
    return _nchw_out(L, y)


def _adaptive_windows(n: int, o: int) -> list[tuple[int, int]]:
    """torch's adaptive pooling windows along one axis: [floor(i*n/o), ceil((i+1)*n/o))."""
    return [(i * n // o, -(-(i + 1) * n // o)) for i in range(o)]


def _uniform(wins):
    """(size, stride) when every window has one size and they start a fixed stride apart."""
    sizes = {e - s for s, e in wins}
    steps = {b[0] - a[0] for a, b in zip(wins, wins[1:])}
    if len(sizes) != 1 or len(steps) > 1:
        return None
    return sizes.pop(), (steps.pop() if steps else 1)


def _adaptive_by_matrices(L, x, wins_h, wins_w):
    """Windows of different sizes (e.g. 5 -> 3): the pool is separable, so it is two products
    with constant averaging matrices, over W and then over H (FULLY_CONNECTED on NCHW)."""
    n, c, h, w = L.t(x).shape

    def avg_matrix(wins, size):
        m = np.zeros((len(wins), size), np.float32)
        for i, (s, e) in enumerate(wins):
            m[i, s:e] = 1.0 / (e - s)
        return m

    def over_last(v, m):
        shape = tuple(L.t(v).shape[:-1]) + (m.shape[0],)
        return L.op("FULLY_CONNECTED", [v, L.const(m, "float32", "avg_weights"), None], shape, "float32",
                    {"fused_activation_function": "NONE", "keep_num_dims": True})

    y = over_last(x, avg_matrix(wins_w, w))                      # [N, C, H, ow]
    y = over_last(L.transpose(y, [0, 1, 3, 2]), avg_matrix(wins_h, h))   # [N, C, ow, oh]
    return L.transpose(y, [0, 1, 3, 2])
