"""The int8 DEPTHWISE_CONV_2D kernel of the DSP targets (cortex-m4/m7/m33) for 3x3 windows at
stride 2 (templates/kernels/depthwise_s8_dsp_s2.c.j2); kernels/depthwise.py asks s2_vars.

Why a kernel of its own: at stride 2 each input word is read by about 2 windows, so extending
whole rows into scratch first (the stride-1 kernels) costs kilobytes of arena for little, and
the per-tap kernel (depthwise_s8_dsp.c.j2) spends 8 instructions per 4 MACs plus weight loads.
Here, per output pixel and 4 channels, each kernel row takes its first two pixels as one pair
word per channel (PKHBT / PKHTB of the two input words, then SXTB16: (x0, x1) of one
channel), so one SMLAD does taps 0 and 1 of a channel; tap 2 takes the third pixel's SXTB16
lanes with SMLABB / SMLATT. Weights, bias and requantization parameters are one stream of
words per 4 channels read by LDRD in the order the assembly uses them (34 words, as many as
the per-tap kernel's weights and table together).

Requantization: eerie_requant_fast2 computes (y + (y >> 31) + radd) >> rshift with
y = SMMULR(2 acc, mult). The kernel computes (SMMLAR(2 acc, mult, radd) + (2 acc >> 31)) >>
rshift instead: SMMLAR adds radd in the multiply, and the sign of the accumulator replaces
the sign of y. They differ only when acc < 0 and y = 0 (mult >= 0 makes y <= 0 whenever
acc < 0), where the sum is radd - 1 instead of radd; both shift to the same value when
radd = 2^(rshift-1) mod 2^rshift and rshift >= 1, which s2_vars checks per channel (it holds
for every radd fast_requant_values makes). One instruction less per output.

The assembly sits in out-of-line functions shared by layers of one shape (helpers/dw_s2.c.j2):
per output row one call runs the windows inside the image (kept out of NAME_invoke, so gcc's
register allocation of the other layers inlined there does not move). Borders: windows that
overlap the padding are copied into a 3x3 window in scratch (the input zero point outside
the image, cancelled by the folded bias) and run one at a time with the window's row stride:
scratch 9 * in_c bytes, only when the layer has such windows.
"""
from __future__ import annotations

import numpy as np

from ._conv_rules import folded_bias
from ._dsp import channel_quant, fast_requant_values
from ._quant import activation_range_int

# LDR's immediate offset reaches 4095 bytes: a window's last word sits two rows and two
# pixels from the pointer. Beyond that the kernel steps the pointer a row at a time (ADDW /
# SUBW, imm12: a row and two pixels within 4095 bytes)
LDR_REACH = 4095


def s2_ok(win, in_c: int, in_w: int) -> bool:
    """Whether the geometry fits the kernel: 3x3, stride 2, no dilation, a multiple of 4
    channels, and a kernel row's loads within LDR's immediate reach of the row's start."""
    return (win.kh == win.kw == 3 and win.sh == win.sw == 2 and win.dh == win.dw == 1
            and in_c % 4 == 0 and in_w * in_c + 2 * in_c <= LDR_REACH)


def s2_stream(wk, dfb, mult, radd, rshift, in_c: int) -> np.ndarray:
    """The per-4-channel word stream of the assembly, as uint32: doubled folded bias (4),
    per kernel row the pair words (w0, w1) of channels 0..3 and the lane words (w2 of c0, c2),
    (w2 of c1, c3) (doubled weights as int16 halves), then (multiplier, radd) of each channel,
    then the 4 rshift. Read in order by LDRD (LDM is outside what the source proof accepts in
    assembly)."""
    t = (2 * wk.astype(np.int64)).reshape(3, 3, in_c // 4, 4) & 0xFFFF      # [ky][kx][g][c]
    pair = t[:, 0] | t[:, 1] << 16                                           # [ky][g][4]
    lane_a = t[:, 2, :, 0] | t[:, 2, :, 2] << 16                             # [ky][g]
    lane_b = t[:, 2, :, 1] | t[:, 2, :, 3] << 16
    rows = np.concatenate([pair, lane_a[..., None], lane_b[..., None]], axis=2)   # [ky][g][6]
    rows = rows.transpose(1, 0, 2).reshape(in_c // 4, 18)
    col = [np.broadcast_to(np.asarray(a, np.int64), (in_c,)).reshape(in_c // 4, 4)
           for a in (2 * np.asarray(dfb, np.int64), mult, radd, rshift)]
    mr = np.stack([col[1], col[2]], axis=2).reshape(in_c // 4, 8)           # (mult, radd) per channel
    words = np.concatenate([col[0], rows, mr, col[3]], axis=1) & 0xFFFFFFFF
    return words.astype(np.uint32)


def helper_name(arg: str) -> str:
    """The C name of helper "dw_s2:arg" (templates/helpers/dw_s2.c.j2 makes the same)."""
    return "eerie_dw_s2_" + "_".join(arg.replace("-", "m").split())


def s2_vars(ctx, x, w, y, wk, bias, win, act, what) -> dict | None:
    """The template's inputs, or None when the layer must keep another kernel: another
    geometry, the fast requantization not exact, or its rounding term not of the form the
    SMMLAR step needs."""
    _, in_h, in_w, in_c = x.shape
    if not s2_ok(win, in_c, in_w):
        return None
    fb = folded_bias(bias, wk.astype(np.int64).sum(axis=0), -x.zero_point, what)
    q = channel_quant(x, w, y, wk, fb, in_c)
    wk, dfb = q.wk, q.dfb
    values = fast_requant_values(q.mult, q.shift, y.zero_point, q.bound, q.consts)
    if values is None or values[3] != 0:
        return None
    mult_, rshift, radd = (np.broadcast_to(np.asarray(a, np.int64), (in_c,)) for a in values[:3])
    if not (np.all(mult_ >= 0) and np.all(rshift >= 1) and np.all(rshift <= 31)
            and np.all(radd % (np.int64(1) << rshift) == np.int64(1) << (rshift - 1))):
        return None
    words = s2_stream(wk, dfb, mult_, radd, rshift, in_c)
    act_min, act_max = activation_range_int(act, y)
    border = not (win.pad_t == 0 and win.pad_l == 0
                  and 2 * (win.out_h - 1) + 2 < in_h and 2 * (win.out_w - 1) + 2 < in_w)
    # the interior columns (the template's ox_lo .. ox_hi): one run per output row
    ox_lo, ox_hi = (win.pad_l + 1) // 2, min((in_w - 3 + win.pad_l) // 2, win.out_w - 1)
    clamp = f"{act_min} {act_max}"
    run = f"{in_c} {in_w * in_c} {ox_hi - ox_lo + 1} {clamp}" if ox_lo <= ox_hi else None
    one = f"{in_c} {3 * in_c} 1 {clamp}" if border else None
    helpers = {f"dw_s2:{h}" for h in (run, one) if h}
    return dict(s2=True, s2_helpers=helpers, s2_run=run and helper_name(run), s2_one=one and helper_name(one), s2_table=ctx.const(words.view(np.int32).reshape(-1), "int32_t", "dw_s2_stream",
                                            "per 4 channels: doubled folded bias, per kernel row "
                                            "(w0, w1) of each channel and (w2 of c0, c2), (w2 of c1, c3), "
                                            "doubled, then (multiplier, radd) per channel, rshift"),
                zp=x.zero_point, s2_border=border, scratch=9 * in_c if border else 0)
