"""Rules the portable, DSP and MVE int8 convolution kernels share (conv.py, _mve.py): the bias
with the input zero point folded in, and when a kernel may run in place over its input."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import EerieError
if TYPE_CHECKING:   # annotations only: conv.py imports this module
    from .window import Window


def folded_bias(bias: np.ndarray, wsum: np.ndarray, in_off: int, what: str) -> np.ndarray:
    folded = bias.astype(np.int64) + in_off * wsum.astype(np.int64)
    if folded.min(initial=0) < -2**31 or folded.max(initial=0) >= 2**31:
        raise EerieError(f"{what}: bias with the input zero point folded in overflows int32")
    return folded.astype(np.int32)


def ring_inplace(g, x, win: Window, in_h: int, in_w: int) -> bool:
    """Whether a depthwise kernel should run in place through a ring of output rows (the DSP
    and MVE kernels): stride 1 with the output as large as the input, and the input an
    intermediate that this op alone reads (else the planner could not use it, and the ring
    would cost scratch and copies for nothing)."""
    return (win.keeps_pixels(in_h, in_w) and x.id not in g.inputs and x.id not in g.outputs
            and len(g.consumers(x.id)) == 1)


def pointwise_inplace(win: Window, in_h: int, in_w: int, in_c: int, out_c: int) -> str | bool:
    """Lowered.inplace of a 1x1 conv kernel that copies each step's input pixels into scratch
    before it writes their outputs (the DSP and MVE kernels). With out_c <= in_c, out0 starts
    at in0's first byte ("start"): pixel p's output ends at out_c*(p+1) <= in_c*(p+1), where
    the next unread input pixel starts (strides only move that further on). With out_c > in_c,
    stride 1 and as many output pixels N as input pixels, in0 sits at the tail of out0 ("end",
    at byte N*(out_c-in_c)): pixel p's output ends at out_c*(p+1), the next unread input pixel
    starts at N*(out_c-in_c) + in_c*(p+1), and p+1 <= N makes the first no later. With
    out_c > in_c and strides that skip input pixels (ResNet's 1x1 stride-2 shortcut), "start"
    still holds when every pixel's output ends no later than the next output pixel's input
    pixel starts, checked here pixel by pixel. Else False."""
    if out_c <= in_c:
        return "start"
    if win.keeps_pixels(in_h, in_w):
        return "end"
    if win.out_h * win.out_w * out_c <= in_h * in_w * in_c and all(
            out_c * q <= in_c * ((q // win.out_w) * win.sh * in_w + (q % win.out_w) * win.sw)
            for q in range(1, win.out_h * win.out_w)):
        return "start"
    return False
