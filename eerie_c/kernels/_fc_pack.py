"""Weight encodings of the FULLY_CONNECTED kernels for DSP targets, each with the compile-time
proof that its kernel's int32 arithmetic is exact (else the encoder returns None and the
layer keeps a simpler format). Inputs: the int8 weights w [units, depth] (int64, dead
channels already zeroed) and the folded bias (int64, input zero point folded in), so every
kernel computes acc[u] = bias[u] + sum_j w[u, j] * x[j] with x in [-128, 127].

Columns are zero-padded to dp = depth rounded up to 4 (the kernel reads 4 inputs per word,
padded inputs are 0); words are little-endian pairs of int16 lanes, one lane per input, the
two words of a group of 4 inputs holding inputs (0, 2) and (1, 3) (SXTB16 of the input word
and of it rotated by 8 gives exactly those pairs).

* "mix" (helpers/fc_dsp_mix.c.j2): rows in pairs (A, B), lane h = 256 w_B + w_A (int16 when
  no weight is -128 where it would overflow; TFLite's int8 weights are symmetric, [-127, 127]).
* "p4" (helpers/fc_dsp_p4.c.j2): 4 rows per lane, h = u0 + 16 u1 + 256 u2 + 4096 w3.
* "p556" (helpers/fc_dsp_p556.c.j2): 3 rows per lane, h = u0 + 32 u1 + 1024 w2.
  In both, w' = the weight wrapped into [-2^(b-1), 2^(b-1)) for a b-bit field, u = w' + 2^(b-1)
  (unsigned fields), the top field signed; the weight is w' + k 2^b and every k != 0 is a
  correction: its column, |k| times, in its row's list of k > 0 or of k < 0 columns (fix_n:
  n+ | n- << 16 per row; columns uint8 when dp <= 256, else uint16), so the kernel adds
  2^b (sum of x over the first list - sum over the second) with no multiply.
  p556 also reorders the rows (perm: position -> output row; bias and requantization
  parameters follow at compile time, the kernel stores through perm): the units // 3 rows
  that gain most from the 6-bit field take it, which on ad01's first layer leaves 1,168
  corrections instead of 3,254 with rows in order.
"""
from __future__ import annotations

import numpy as np

from ._dsp import pad_to, round_up

LIMIT = 2 ** 31          # every |partial sum| of the kernels' int32 arithmetic stays below
XMAX = 128               # |x| for int8 activations
COLUMN_BITS = 11         # columns of the packed formats below 2^11 (the range their tests cover)


def wrap(w: np.ndarray, bits: int) -> np.ndarray:
    """w reduced modulo 2^bits into [-2^(bits-1), 2^(bits-1))."""
    half = 1 << (bits - 1)
    return (w + half) % (1 << bits) - half


def lane_words(h: np.ndarray) -> np.ndarray:
    """[..., dp] int16 lanes -> [..., dp / 2] int32 words, per group of 4 inputs the word of
    inputs (0, 2) then the word of inputs (1, 3)."""
    g = h.reshape(*h.shape[:-1], h.shape[-1] // 4, 4)[..., [0, 2, 1, 3]]
    return np.ascontiguousarray(g.astype("<i2")).view("<i4").reshape(*h.shape[:-1], -1)


def encode_mix(w: np.ndarray, bias: np.ndarray) -> dict | None:
    """Two rows per halfword; None when a lane leaves int16, or a pair's mixed sum or
    256 times row B's sum could reach 2^31 (the kernel's m - a is 256 S_B only while
    nothing wraps)."""
    units, depth = w.shape
    up, dp = round_up(units, 4), round_up(depth, 4)
    wp = pad_to(w, (up, dp))
    h = 256 * wp[1::2] + wp[0::2]                                   # [up / 2 pairs, dp]
    if h.min(initial=0) < -2 ** 15 or h.max(initial=0) >= 2 ** 15:
        return None
    bias_a = np.abs(pad_to(bias, (up,))[0::2])
    if int(np.max(bias_a + XMAX * np.abs(h).sum(axis=1), initial=0)) >= LIMIT:
        return None
    if int(np.max(XMAX * 256 * np.abs(wp[1::2]).sum(axis=1), initial=0)) >= LIMIT:
        return None   # m - a = 256 * S_B itself must fit int32
    words = lane_words(h).reshape(up // 4, 2, dp // 4, 2).transpose(0, 2, 1, 3)   # [blk][grp][pair][2]
    parts = [words.reshape(-1)]
    if units % 4 in (1, 2):   # the last block's second pair is all padding: not stored
        parts = [words[:-1].reshape(-1), words[-1, :, 0].reshape(-1)]
    return dict(fmt="mix", rows=4, up=up, dp=dp, weights=np.concatenate(parts))


def _corrections(k: np.ndarray, dp: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Per row the counts n+ | n- << 16 (uint32) and the columns of the row's corrections,
    its k > 0 columns first then its k < 0 ones, each repeated |k| times (k = +-1 is almost
    every correction, so the kernel adds or subtracts x[column] with no multiply); columns
    are uint8 when dp <= 256, else uint16. None when a row needs more than 65535 of either."""
    mag = np.abs(k)
    plus, minus = np.where(k > 0, mag, 0), np.where(k < 0, mag, 0)
    n_plus, n_minus = plus.sum(axis=1), minus.sum(axis=1)
    if max(n_plus.max(initial=0), n_minus.max(initial=0)) > 65535:
        return None
    cols = np.arange(k.shape[1])
    entries = [np.concatenate([np.repeat(cols, p), np.repeat(cols, m)]) for p, m in zip(plus, minus)]
    col_type = np.uint8 if dp <= 256 else np.uint16
    return ((n_plus | n_minus << 16).astype(np.uint32),
            np.concatenate(entries + [np.zeros(0, np.int64)]).astype(col_type))


def top_field_order(w: np.ndarray, low_bits: int, top_bits: int) -> np.ndarray:
    """Rows in block order (position -> row) for blocks of 3 rows whose third field is wider:
    the units // 3 rows with the most weights that fit the top field but not the low ones
    get it (ties by row number); the other rows fill the low fields, so a partial last block
    holds low rows only and its padding stays at the end."""
    units = w.shape[0]
    q = units // 3
    gain = (w != wrap(w, low_bits)).sum(axis=1) - (w != wrap(w, top_bits)).sum(axis=1)
    ranked = np.argsort(-gain, kind="stable")
    top, low = np.sort(ranked[:q]), np.sort(ranked[q:])
    order = np.concatenate([low[:2 * q].reshape(q, 2), top[:, None]], axis=1).reshape(-1)
    return np.concatenate([order, low[2 * q:]])


def encode_packed(w: np.ndarray, bias: np.ndarray, bits: tuple[int, ...]) -> dict | None:
    """Sub-byte fields, one row per field of widths `bits` (low to high; the last one is
    signed): (4, 4, 4, 4) is "p4", (5, 5, 6) is "p556" (rows reordered, "perm"). None when a
    bound fails."""
    units, depth = w.shape
    nrow = len(bits)
    perm = None
    if bits[-1] != bits[0]:
        perm = top_field_order(w, bits[0], bits[-1])
        w, bias = w[perm], bias[perm]
    up, dp = round_up(units, nrow), round_up(depth, 4)
    if dp >= 1 << COLUMN_BITS:
        return None
    wp = pad_to(w, (up, dp)).reshape(up // nrow, nrow, dp)              # [blk][row][col]
    shifts = np.cumsum((0,) + bits[:-1])
    wr = np.stack([wrap(wp[:, r], b) for r, b in enumerate(bits)], axis=1)
    k = (wp - wr) >> np.asarray(bits)[None, :, None]
    if np.abs(k).max(initial=0) > 15 or k.min(initial=0) < -16:
        return None
    offsets = np.asarray([1 << (b - 1) for b in bits[:-1]] + [0])      # unsigned fields: +2^(b-1)
    fields = wr + offsets[None, :, None]
    scaled = fields << shifts[None, :, None]                            # field r in place
    h = scaled.sum(axis=1)                                              # [blk][col]
    if h.min(initial=0) < -2 ** 15 or h.max(initial=0) >= 2 ** 15:
        return None
    # bounds per block (rows padded to the block, columns to dp; |x| <= 128):
    low = XMAX * scaled[:, :-1].sum(axis=(1, 2))          # the unsigned fields' sums (>= 0)
    mixed = XMAX * np.abs(h).sum(axis=1)                  # SMLAD of whole words
    top = XMAX * np.abs(scaled[:, -1]).sum(axis=1)        # 2^shift * |row nrow-1's field sum|
    if int(np.max(mixed + low, initial=0)) >= LIMIT or int(np.max(top, initial=0)) >= LIMIT:
        return None
    fixes = _corrections(k.reshape(up, dp), dp)
    if fixes is None:
        return None
    fix_n, entries = fixes
    bias_p = np.abs(pad_to(bias, (up,))).reshape(up // nrow, nrow)
    off = XMAX * dp * offsets                                            # |2^(b-1) sum(x)|
    row_field = XMAX * np.abs(fields).sum(axis=2)                        # unscaled field sums
    fix = XMAX * np.abs(k).sum(axis=2) << np.asarray(bits)[None, :]
    rows = bias_p + off[None, :] + row_field + fix
    if int(np.max(rows, initial=0)) >= LIMIT:
        return None
    enc = dict(fmt="p4" if perm is None else "p556", rows=nrow, up=up, dp=dp,
               weights=lane_words(h).reshape(-1), fix_n=fix_n, fix=entries,
               outliers=int(entries.size))
    if perm is not None:
        enc["perm"] = perm.astype(np.uint16)
    return enc


def encode(fmt: str, w: np.ndarray, bias: np.ndarray) -> dict | None:
    """The layout `fmt` ("mix", "p4", "p556") of these weights, or None when not exact."""
    if fmt == "mix":
        return encode_mix(w, bias)
    return encode_packed(w, bias, (4, 4, 4, 4) if fmt == "p4" else (5, 5, 6))
