"""Float32 CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED: the register-blocked kernels'
constants (conv.py, depthwise.py and fully_connected.py call these for float inputs).

The kernels keep blocks of outputs in registers (several output pixels x 4 output channels for
a conv, 16 units for a fully connected layer, 2 x 4 output pixels of one channel for a
depthwise conv) and accumulate with EERIE_FMAF (templates/helpers/fma_f32.c.j2: one VFMA on an FPv4 /
FPv5 core). The weights are re-laid out here so that the inner loop reads them in order: a
conv's as [out_c / 4][kh][kw][in_c][4], a fully connected layer's as
[units / 16][depth][16] then [depth][units % 16]; a conv's output channels are zero-padded
to the block (the padding's outputs are never stored). Every output is still the sum over
(ky, kx, ic) in TFLM's order, the bias added last (as TFLM does: the host's results are
TFLM's to the bit, short of FMA contraction on cores that have it)."""
from __future__ import annotations

import numpy as np

from . import c_comment

CONV_OC = 4      # output channels per conv block
CONV_PX = 5      # output pixels per conv block (the interior path): 5 x 4 accumulators,
                 # 4 weights and an input value take 25 of the 32 s-registers (measured on
                 # the DS-CNN, mps2-an386: 4 pixels 2.0, 5 pixels 1.89, 6 pixels 1.95
                 # instructions per MAC over its convolutions)
FC_UNITS = 16    # units per fully connected block: the weights are loaded one at a time
                 # between the multiply-adds, so 16 accumulators leave registers free
DW_ROWS = 2      # output rows per depthwise block
DW_PX = 4        # output columns per depthwise block: 2 x 4 accumulators and a channel's
                 # kh x kw weights (9 for 3x3) stay in registers


def _pad_rows(a: np.ndarray, n: int) -> np.ndarray:
    """`a` with its first axis zero-padded to a multiple of n."""
    extra = -a.shape[0] % n
    return np.concatenate([a, np.zeros((extra, *a.shape[1:]), a.dtype)]) if extra else a


def _inside(out: int, k: int, stride: int, dil: int, pad: int, size: int) -> list[int]:
    """The outputs along one axis whose windows lie inside [0, size) (contiguous)."""
    return [o for o in range(out) if o * stride - pad >= 0 and o * stride - pad + (k - 1) * dil < size]


def conv_vars(ctx, w, b, win, in_h: int, in_w: int, out_c: int) -> dict:
    """Weights [out_c][kh][kw][in_c] as [ocp / 4][kh][kw][in_c][4], the bias padded to ocp;
    the columns whose windows lie inside the image's (from w_lo, w_groups groups of CONV_PX)
    and whether every row's do (rows_inside)."""
    k = int(np.prod(w.shape[1:]))
    wp = _pad_rows(w.data.reshape(out_c, k).astype(np.float32), CONV_OC)
    ocp = wp.shape[0]
    blocked = wp.reshape(ocp // CONV_OC, CONV_OC, k).transpose(0, 2, 1)
    cols = _inside(win.out_w, win.kw, win.sw, win.dw, win.pad_l, in_w)
    rows = _inside(win.out_h, win.kh, win.sh, win.dh, win.pad_t, in_h)
    v = dict(ocp=ocp, ob=CONV_OC, px=CONV_PX, w_lo=cols[0] if cols else 0,
             w_groups=len(cols) // CONV_PX, rows_inside=len(rows) == win.out_h)
    v["weights"] = ctx.const(blocked, "float", "weights", c_comment(w.label) + (
        f" ({ocp // CONV_OC} blocks of {CONV_OC} output channels, interleaved per tap)"))
    v["bias"] = None if b is None else ctx.const(
        _pad_rows(b.data.reshape(-1).astype(np.float32), CONV_OC), "float", "bias", c_comment(b.label))
    return v


def fc_vars(ctx, w, b, units: int, depth: int) -> dict:
    """Weights [units][depth] as blocks of FC_UNITS units, each [depth][FC_UNITS], then the
    remaining units % FC_UNITS as one block [depth][rest] (no padding)."""
    wd = w.data.reshape(units, depth).astype(np.float32)
    main = units - units % FC_UNITS
    parts = [wd[:main].reshape(main // FC_UNITS, FC_UNITS, depth).transpose(0, 2, 1).reshape(-1),
             wd[main:].T.reshape(-1)]
    v = dict(main=main, ub=FC_UNITS, rest=units - main)
    v["weights"] = ctx.const(np.concatenate(parts), "float", "weights", c_comment(w.label) + (
        f" (blocks of {FC_UNITS} units, then {units - main}, interleaved per input)"))
    v["bias"] = None if b is None else ctx.tensor_const(b, "bias")
    return v


def _taps(n: int, k: int, stride: int, dil: int, size: int, first: int | None):
    """Along one axis, the input positions i (relative to the first output's window start)
    that n adjacent outputs read, each with its users (output p, tap t): p * stride + t * dil
    = i. With `first` (the first window's start, known at compile time) positions outside
    [0, size) are left out; first None: the whole group lies inside the image."""
    taps = []
    for i in range((n - 1) * stride + (k - 1) * dil + 1):
        if first is not None and not 0 <= first + i < size:
            continue
        users = [(p, t) for p in range(n) for t in range(k) if p * stride + t * dil == i]
        if users:
            taps.append((i, users))
    return taps


def _segments(out: int, k: int, stride: int, dil: int, pad: int, size: int, group: int) -> list[dict]:
    """One axis of the output split into groups of up to `group` outputs: those whose windows
    lie inside the image in a loop (when it has at least two groups), every other group at a
    fixed position with its in-image taps known at compile time (no bounds tests)."""
    inside = _inside(out, k, stride, dil, pad, size)
    lo, hi = (inside[0], inside[-1] + 1) if inside else (0, 0)   # contiguous
    loop_n = (hi - lo) // group if hi - lo >= 2 * group else 0
    segs = []

    def fixed(a, b):
        for o in range(a, b, group):
            n = min(group, b - o)
            segs.append(dict(loop=False, start=o, n=n, taps=_taps(n, k, stride, dil, size, o * stride - pad)))
    if loop_n:
        fixed(0, lo)
        segs.append(dict(loop=True, start=lo, end=lo + loop_n * group, n=group,
                         taps=_taps(group, k, stride, dil, size, None)))
        fixed(lo + loop_n * group, out)
    else:
        fixed(0, out)
    return segs


def depthwise_vars(ctx, w, b, win, in_h: int, in_w: int) -> dict:
    """Template variables of depthwise_f32.c.j2: the output rows and columns as groups
    (_segments), the weights as TFLite lays them out ([kh][kw][out_c]) and the bias."""
    rows = _segments(win.out_h, win.kh, win.sh, win.dh, win.pad_t, in_h, DW_ROWS)
    cols = _segments(win.out_w, win.kw, win.sw, win.dw, win.pad_l, in_w, DW_PX)
    # When every tap falls outside the image (a dilated kernel on a tiny input) the outputs
    # are the bias alone and no weight is read: an unread constant array would be a gcc
    # -Werror=unused-const-variable failure (found by the differential tester).
    used = any(rs["taps"] and cs["taps"] for rs in rows for cs in cols)
    return dict(rows=rows, cols=cols, weights=ctx.tensor_const(w, "weights") if used else None,
                bias=None if b is None else ctx.tensor_const(b, "bias"))
