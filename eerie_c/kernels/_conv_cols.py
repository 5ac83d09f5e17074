"""The DSP CONV_2D kernel's im2col columns built straight from the input (conv.py,
templates/kernels/conv2d_s8_dsp.c.j2, macro `column` with `cols`).

A column is kp sign-extended taps as words (x0, x2), (x1, x3) per group of 4 taps. The order
of the taps in a column only has to match the order of the weights in a row, so the weights
are permuted at compile time to make the column cheap to build: each contiguous run of taps
in the input (a whole kernel row of kw * in_c bytes when the horizontal dilation is 1, else
one pixel's in_c bytes) gives its full words of 4 taps first, each one unaligned LDR and two
SXTB16; the few taps left over from every run (vww's first layer: 9 bytes per kernel row,
so 1 per row) come last, gathered byte by byte (LDRSB, PKHBT). The last group may be short:
its missing taps are past K, where the weights are zero, so they may hold anything (the sign
bits of a byte load). Integer sums do not depend on the order: bit-exact as before.

Where a window lies inside the image the column reads the input itself; windows that overlap
the padding read a zero-point-framed copy of the input when it is small (`frame`, built once
per batch in scratch: every window is then inside it, no bounds tests), else the window's
bytes staged as before (the same plan with the stage's offsets). Before, every column went
through the staged bytes: per kernel row a bounds test and a memcpy, then a conversion.
"""
from __future__ import annotations

from dataclasses import dataclass

# largest zero-point-framed input copy (bytes of scratch) a layer may take
FRAME_MAX = 2048


@dataclass
class Frame:
    rows: int        # framed rows (pad_t above the image, enough below for every window)
    cols: int        # framed columns per row
    top: int         # rows of padding above the image
    left: int        # columns of padding left of the image

    @property
    def bytes_per_row(self) -> int:
        return self.cols

    def size(self, in_c: int) -> int:
        return self.rows * self.cols * in_c


def _runs(win, in_c: int) -> list[list[int]]:
    """Taps (indices into a weight row, [kh][kw][in_c] order) in runs contiguous in memory."""
    row = win.kw * in_c
    if win.dw == 1:
        return [list(range(ky * row, (ky + 1) * row)) for ky in range(win.kh)]
    return [list(range((ky * win.kw + kx) * in_c, (ky * win.kw + kx + 1) * in_c))
            for ky in range(win.kh) for kx in range(win.kw)]


def tap_order(win, in_c: int) -> tuple[list[int], list[list[int]], list[list[int]]]:
    """(perm, full, left): the column's tap order (perm[i] = the weight-row tap at position
    i), the full words (4 taps contiguous in memory) and the groups of left-over taps."""
    full, left = [], []
    for run in _runs(win, in_c):
        n = len(run) // 4 * 4
        full += [run[i:i + 4] for i in range(0, n, 4)]
        left += run[n:]
    groups = [left[i:i + 4] for i in range(0, len(left), 4)]
    perm = [t for g in full + groups for t in g]
    return perm, full, groups


def _offset(t: int, win, in_c: int, row_bytes: int) -> int:
    """Byte offset of tap t from the window's first tap, rows row_bytes apart."""
    ky, rest = divmod(t, win.kw * in_c)
    kx, c = divmod(rest, in_c)
    return ky * win.dh * row_bytes + kx * win.dw * in_c + c


def words(win, in_c: int, row_bytes: int | None) -> list[tuple[str, list[int]]]:
    """The column's groups as ("w", [offset]) (one word) or ("g", [offsets]) (gathered taps),
    offsets from the window's first tap, rows row_bytes apart (None: the stage, where the
    taps lie in weight-row order)."""
    _, full, groups = tap_order(win, in_c)
    off = (lambda t: t) if row_bytes is None else (lambda t: _offset(t, win, in_c, row_bytes))
    return [("w", [off(g[0])]) for g in full] + [("g", [off(t) for t in g]) for g in groups]


def frame_for(win, in_h: int, in_w: int, in_c: int) -> Frame | None:
    """The zero-point-framed copy of one batch's input every window fits in, when the layer
    has windows over the padding and the copy is at most FRAME_MAX bytes; else None."""
    if not win.has_border:
        return None
    last_y = (win.out_h - 1) * win.sh - win.pad_t + (win.kh - 1) * win.dh
    last_x = (win.out_w - 1) * win.sw - win.pad_l + (win.kw - 1) * win.dw
    f = Frame(rows=win.pad_t + max(in_h, last_y + 1), cols=win.pad_l + max(in_w, last_x + 1),
              top=win.pad_t, left=win.pad_l)
    return f if f.size(in_c) <= FRAME_MAX else None


def column_vars(win, in_h: int, in_w: int, in_c: int) -> dict:
    """The template's `cols`: the tap permutation of the weights, the word plans (reading the
    input, the frame, the stage) and the frame."""
    perm, _, _ = tap_order(win, in_c)
    frame = frame_for(win, in_h, in_w, in_c)
    v = dict(perm=perm, frame=frame, stage_words=words(win, in_c, None))
    v["has_words"] = any(kind == "w" for kind, _ in v["stage_words"])
    if frame is not None:
        v["frame_words"] = words(win, in_c, frame.cols * in_c)
    v["input_words"] = words(win, in_c, in_w * in_c)
    return v
