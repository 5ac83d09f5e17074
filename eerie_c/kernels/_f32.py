"""Float32 CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED: the register-blocked kernels'
constants (conv.py, depthwise.py and fully_connected.py call these for float inputs).

The kernels keep blocks of outputs in registers (several output pixels x 4 output channels for
a conv, 16 units for a fully connected layer, 4 output pixels of a row x 2 channels for a depthwise
conv) and accumulate with EERIE_FMAF (templates/helpers/fma_f32.c.j2: one VFMA on an FPv4 /
FPv5 core). The weights are re-laid out here so that the inner loop reads them in order: a
conv's as [out_c / 4][kh][kw][in_c][4], a fully connected layer's as
[units / 16][depth][16] then [depth][units % 16]; a conv's output channels are zero-padded
to the block (the padding's outputs are never stored). Every output is still the sum over
(ky, kx, ic) in TFLM's order, the bias added last (depthwise: first, as the accumulators'
starting value; reordering moves the result by rounding only)."""
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
DW_CH = 2        # channels per depthwise block (depth multiplier 1)
DW_PX = 4        # output pixels of one row per depthwise block


def _pad_rows(a: np.ndarray, n: int) -> np.ndarray:
    """`a` with its first axis zero-padded to a multiple of n."""
    extra = -a.shape[0] % n
    return np.concatenate([a, np.zeros((extra, *a.shape[1:]), a.dtype)]) if extra else a


def conv_vars(ctx, w, b, out_c: int) -> dict:
    """Weights [out_c][kh][kw][in_c] as [ocp / 4][kh][kw][in_c][4], the bias padded to ocp."""
    k = int(np.prod(w.shape[1:]))
    wp = _pad_rows(w.data.reshape(out_c, k).astype(np.float32), CONV_OC)
    ocp = wp.shape[0]
    blocked = wp.reshape(ocp // CONV_OC, CONV_OC, k).transpose(0, 2, 1)
    v = dict(ocp=ocp, ob=CONV_OC, px=CONV_PX)
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


def _columns(win, in_w: int, n: int, ix0: int | None) -> list[tuple[int, list[tuple[int, int]]]]:
    """The input columns j (relative to the first pixel's window start) that n horizontally
    adjacent output pixels read, each with its users (pixel p, tap kx): p * sw + kx * dw = j.
    With ix0 (the first window's start column, known at compile time) columns outside the
    image are left out; ix0 None: the group lies inside the image."""
    span = (n - 1) * win.sw + (win.kw - 1) * win.dw + 1
    cols = []
    for j in range(span):
        if ix0 is not None and not 0 <= ix0 + j < in_w:
            continue
        users = [(p, kx) for p in range(n) for kx in range(win.kw) if p * win.sw + kx * win.dw == j]
        if users:
            cols.append((j, users))
    return cols


def depthwise_segments(win, in_w: int) -> list[dict]:
    """How one output row is split into groups of up to DW_PX pixels: the columns whose windows
    lie inside the image in a loop over ox (when it has at least two groups), every other
    group at a fixed ox with its in-image columns known at compile time (no bounds tests)."""
    lo, hi = 0, 0
    for ox in range(win.out_w):   # the interior columns: contiguous (see conv._interior_range)
        ix = ox * win.sw - win.pad_l
        if ix >= 0 and ix + (win.kw - 1) * win.dw < in_w:
            lo, hi = (ox, ox + 1) if hi == 0 else (lo, ox + 1)
    segs, loop_n = [], (hi - lo) // DW_PX if hi - lo >= 2 * DW_PX else 0

    def fixed(a, b):
        for ox in range(a, b, DW_PX):
            n = min(DW_PX, b - ox)
            segs.append(dict(loop=False, ox=ox, n=n, cols=_columns(win, in_w, n, ox * win.sw - win.pad_l)))
    if loop_n:
        fixed(0, lo)
        segs.append(dict(loop=True, ox=lo, end=lo + loop_n * DW_PX, n=DW_PX, cols=_columns(win, in_w, DW_PX, None)))
        fixed(lo + loop_n * DW_PX, win.out_w)
    else:
        fixed(0, win.out_w)
    return segs


def depthwise_vars(ctx, w, b, win, in_w: int, out_c: int, mult: int) -> dict:
    """Template variables of depthwise_f32.c.j2: the row's pixel groups, the channels per
    block (2 with depth multiplier 1, else 1), the weights as TFLite lays them out
    ([kh][kw][out_c]: one tap's channels are adjacent) and the bias."""
    cg = DW_CH if mult == 1 else 1
    return dict(segments=depthwise_segments(win, in_w), cg=cg, c_main=out_c - out_c % cg,
                weights=ctx.tensor_const(w, "weights"),
                bias=None if b is None else ctx.tensor_const(b, "bias"))
