"""The int8 3x3 stride-1 DEPTHWISE_CONV_2D kernel of the DSP cores (Cortex-M4/M7/M33) over
per-channel extended rows: layout, blocks and table (templates/kernels/depthwise_s8_dsp_pairs.c.j2,
templates/helpers/dw_pairs.c.j2).

Each input row is sign-extended once into a ring of 3 rows per channel (ext[c][slot][x],
int16), so one word holds one channel at two neighbouring columns and SMLAD does two taps of
one output. An output row is cut into blocks of up to 5 outputs; one shared out-of-line
function per block shape runs a counted assembly loop over the channels, each trip the whole
block of one channel: the 5 accumulators, 2 input and 2 weight words, the row, table and
output pointers and the counter are the 13 registers there are (r7 is the frame pointer at
-O0). Per channel and block of n outputs: the bias (1 load), per kernel row the weight pair
(1 LDRD), the block's input words (LDRD per 2) and 2n multiplies, the requantization
parameters (2 loads) and per output SMMLAR (the rounding add folded in), the sign fix, ASR,
SSAT and STRB: 69 instructions for 45 MACs at n = 5, where two outputs per pass took 36 for 18.

Measured on mps2-an386 (bench/profile_layers.py; kws's 25x5x64 layers, one 5-block per row):
see bench/results.md.
"""
from __future__ import annotations

import numpy as np

from ._dsp import round_up

MAX_BLOCK = 5        # accumulators per trip: 5 + 4 operands + 4 pointers/counter = 13 registers
LDRD_REACH = 1020    # LDRD's immediate offset (and post-index) reach, bytes
CALL_COST = 20       # instructions per block call (arguments, prologue, epilogue), per row


def pairs_ok(win, in_c: int, in_w: int) -> bool:
    """Whether the kernel applies: 3x3, stride 1, no dilation; every LDRD offset within reach
    (the ring rows of a channel: 4 * pwp bytes and the block's words) and STRB's offset of a
    block's second output (in_c bytes on)."""
    if not (win.kh == win.kw == 3 and win.sh == win.sw == 1 and win.dh == win.dw == 1):
        return False
    pwp = layout(win, in_w)[2]
    return 4 * pwp + 16 <= LDRD_REACH and in_c <= 4095


def layout(win, in_w: int) -> tuple[int, int, int]:
    """(shift, xoff, pwp): input column 0 sits at ext column xoff = pad_l + shift, even, so the
    extension writes whole pairs of input columns (no zero-point half but the last one of an
    odd width) and output ox reads ext columns ox + shift .. ox + shift + 2; pwp columns per
    channel row (even) cover every word a block reads."""
    shift = win.pad_l % 2
    xoff = win.pad_l + shift
    pmax = win.out_w - 1 + shift
    words = (pmax + 2) // 2 + 1
    return shift, xoff, max(2 * words, round_up(xoff + in_w, 2))


def block_cost(n: int, par: int, in_c: int, clamps: int) -> int:
    """Instructions per channel of a block of n outputs whose first reads the second half of
    its first word (par = 1): bias, per kernel row (input LDRDs, weight LDRD, 2n multiplies),
    parameters, per output requantization (4), clamps (3 each) and store, loop."""
    words = (par + n + 1) // 2 + 1
    return 1 + 3 * ((words + 1) // 2 + 1 + 2 * n) + 2 + n * (5 + 3 * clamps) + 2


def blocks(win, shift: int, in_c: int, clamps: int) -> list[tuple[int, int]]:
    """The output row cut into blocks (ox0, n), n <= MAX_BLOCK (and the STRB offset of the
    block's last output within 4095 bytes), of the fewest instructions (block_cost per channel
    plus CALL_COST per block): a shortest path over the columns."""
    nmax = min(MAX_BLOCK, 1 + 4095 // in_c)
    best = [(0, [])] + [None] * win.out_w     # best[k]: the first k outputs
    for k in range(1, win.out_w + 1):
        for n in range(1, min(nmax, k) + 1):
            ox0 = k - n
            cost = best[ox0][0] + in_c * block_cost(n, (ox0 + shift) % 2, in_c, clamps) + CALL_COST
            if best[k] is None or cost < best[k][0]:
                best[k] = (cost, best[ox0][1] + [(ox0, n)])
    return best[win.out_w][1]


def pairs_table(ctx, wk, dfb, mult, radd, rshift, in_c):
    """Per channel, in the order the kernel reads them: the doubled folded bias, the words
    W01 = (w0, w1) and W12 = (w1, w2) of each kernel row (doubled weights as int16 halves),
    multiplier, radd, rshift."""
    t = (2 * wk.astype(np.int64)).reshape(3, 3, in_c) & 0xFFFF          # [ky][kx][c]
    w01 = t[:, 0] | t[:, 1] << 16
    w12 = t[:, 1] | t[:, 2] << 16
    taps = np.stack([w01, w12], axis=1).reshape(6, in_c).T               # [c][6]
    cols = [np.broadcast_to(np.asarray(a, np.int64), (in_c,))[:, None] for a in (mult, radd, rshift)]
    table = np.concatenate([(2 * np.asarray(dfb, np.int64))[:, None], taps] + cols, axis=1)
    return ctx.const((table & 0xFFFFFFFF).astype(np.uint32).view(np.int32).reshape(-1), "int32_t",
                     "weights_requant", "per channel: doubled folded bias, (w0, w1) and (w1, w2) "
                     "of each kernel row doubled, multiplier, radd, rshift")


def _num(v: int) -> str:
    return str(v) if v >= 0 else f"m{-v}"


def pairs_vars(win, in_w: int, in_c: int, zero_point: int, act_min: int, act_max: int) -> tuple[dict, set, int]:
    """The template's inputs (layout, blocks with their helper functions per ring variant),
    the helpers (one shared function per block shape, ring variant, row size, channel count
    and clamp: "dw_pairs:N P V CS IC LO HI") and the scratch bytes (3 rows of in_c x pwp
    int16)."""
    shift, xoff, pwp = layout(win, in_w)
    clamps = (act_min > -128) + (act_max < 127)
    zp = zero_point & 0xFFFF
    out, helpers = [], set()
    for ox0, n in blocks(win, shift, in_c, clamps):
        p0 = ox0 + shift
        fns = []
        for v in range(3):
            arg = f"{n} {p0 % 2} {v} {2 * pwp} {in_c} {act_min} {act_max}"
            helpers.add(f"dw_pairs:{arg}")
            fns.append(f"eerie_dw_pairs{n}{p0 % 2}{v}_{2 * pwp}_{in_c}_{_num(act_min)}_{_num(act_max)}")
        out.append(dict(ox0=ox0, n=n, word=p0 // 2, fns=fns))
    helpers.add(f"dw_extend:{in_w} {in_c} {3 * pwp // 2}")
    v = dict(pwp=pwp, xoff=xoff, blocks=out, extend=f"eerie_dw_extend_{in_w}_{in_c}_{3 * pwp // 2}",
             zpe=int(np.array([zp | zp << 16], np.uint32).view(np.int32)[0]))
    return v, helpers, 6 * in_c * pwp
