"""The Helium convolution's inline assembly and im2col plans (kernels/_mve.py lowers the
layers; templates/kernels/conv2d_s8_mve.c.j2 renders them): the 2x4 VMLADAV block over 16-tap
chunks (conv_block_asm, conv_half_asm), the counted loop over a pixel pair's groups of 4 output
channels with the requantization (conv_loop_asm) and the weights + parameters stream it reads
(conv_stream), and how the loop's interleaved columns are gathered (padded_image,
im2col_pieces). Pure functions of the layer's geometry and constants."""
from __future__ import annotations

import numpy as np

_CHUNK = ("vldrb.u8 q0, [%[xp]], #16", "vldrb.u8 q1, [%[xp]], #16", "vldrb.u8 q2, [%[wt]], #16",
          "{op} %[a00], q0, q2", "vldrb.u8 q3, [%[wt]], #16", "{op} %[a10], q1, q2",
          "{op} %[a01], q0, q3", "vldrb.u8 q2, [%[wt]], #16", "{op} %[a11], q1, q3",
          "{op} %[a02], q0, q2", "vldrb.u8 q3, [%[wt]], #16", "{op} %[a12], q1, q2",
          "{op} %[a03], q0, q3", "{op} %[a13], q1, q3")


# Most 16-tap chunks a convolution's 2x4 block unrolls (K <= 1024 + 15); a longer K keeps the
# DSP kernel. A counted loop inside the block's assembly (the verifier accepts one) needs a
# 12th register beside the 8 even sums and 3 pointers: gcc 12 was seen to spin in register
# allocation on it, so the chunks are unrolled instead (K = 576, ResNet's largest: 36 chunks,
# 504 instructions).
MAX_CHUNKS = 64


def conv_block_asm(full: int) -> list[str]:
    """The instructions of conv2d_s8_mve.c.j2's 2x4 block over `full` (1..MAX_CHUNKS) 16-tap
    chunks: per chunk the two pixels' 16 taps (interleaved per chunk in scratch by
    eerie_vinterleave16, so one pointer %[xp] reads both) and the 4 weight rows in turn (6
    loads) against 8 VMLADAV.S8 (16 MACs each); the first chunk sets the 8 sums (the biases
    are added as a vector afterwards), the others accumulate. %[wt]: the layer's [4 rows][16]
    weights per chunk (advanced past them); the sums %[aIJ] (pixel I, row J) must be even
    registers (VMLADAV's RdaLo). Two pointers, not three: with 11 operands gcc 12 was seen to
    find no registers for some layers ("impossible constraints")."""
    if not 1 <= full <= MAX_CHUNKS:
        return []
    first = [ln.format(op="vmladav.s8") for ln in _CHUNK]
    more = [ln.format(op="vmladava.s8") for ln in _CHUNK]
    return first + more * (full - 1)


# Half a 2x4 block: the two pixels against 2 of the 4 rows (%[wt] starts at the half's first
# row and skips the other half's 32 bytes per chunk): 4 even sums and 2 pointers only
_HALF = ("vldrb.u8 q0, [%[xp]], #16", "vldrb.u8 q1, [%[xp]], #16", "vldrb.u8 q2, [%[wt]], #16",
         "{op} %[b0], q0, q2", "vldrb.u8 q3, [%[wt]], #48", "{op} %[b2], q1, q2",
         "{op} %[b1], q0, q3", "{op} %[b3], q1, q3")


def conv_half_asm(full: int) -> list[str]:
    """conv_block_asm for CONV_2D_ADD layers, as two statements of 4 sums each (%[b0], %[b1]
    pixel p, rows r, r + 1; %[b2], %[b3] pixel q): the fused ADD keeps more values live, and
    with 8 even-register sums gcc 12 was seen to fail there. Per chunk 4 loads + 4 VMLADAV per
    half (the weight pointer steps over the other half's rows by the second load's
    post-increment of 48)."""
    if not 1 <= full <= MAX_CHUNKS:
        return []
    return ([ln.format(op="vmladav.s8") for ln in _HALF]
            + [ln.format(op="vmladava.s8") for ln in _HALF] * (full - 1))


# The rest of a 2x4 block after its chunks (conv_loop_asm): the 8 sums packed into q0 (pixel p)
# and q1 (pixel q), then per group of 4 channels its 16 int32 parameters from the same stream
# as the weights, in the order they are used: biases, multipliers, rounding terms, -rshift
# (VMOV Qd[2], Qd[0], Rt, Rt2 writes Rt to lane 0 and Rt2 to lane 2, as gcc 12 emits it for
# vsetq_lane pairs)
_REQUANT = ("vmov q0[2], q0[0], %[a00], %[a02]", "vmov q0[3], q0[1], %[a01], %[a03]",
            "vmov q1[2], q1[0], %[a10], %[a12]", "vmov q1[3], q1[1], %[a11], %[a13]",
            "vldrw.u32 q2, [%[wt]], #16", "vadd.i32 q0, q0, q2", "vadd.i32 q1, q1, q2",
            "vldrw.u32 q2, [%[wt]], #16", "vqrdmulh.s32 q0, q0, q2", "vqrdmulh.s32 q1, q1, q2",
            "vshr.s32 q2, q0, #31", "vadd.i32 q0, q0, q2", "vshr.s32 q2, q1, #31",
            "vadd.i32 q1, q1, q2",
            "vldrw.u32 q2, [%[wt]], #16", "vadd.i32 q0, q0, q2", "vadd.i32 q1, q1, q2",
            "vldrw.u32 q2, [%[wt]], #16", "vshl.s32 q0, q0, q2", "vshl.s32 q1, q1, q2",
            "vmax.s32 q0, q0, %q[lo]", "vmax.s32 q1, q1, %q[lo]",
            "vmin.s32 q0, q0, %q[hi]", "vmin.s32 q1, q1, %q[hi]",
            "vstrb.32 q1, [%[y0], %q[yq]]", "vstrb.32 q0, [%[y0]], #4")


def conv_loop_asm(chunks: int) -> list[str]:
    """conv2d_s8_mve.c.j2's whole loop over the groups of 4 output channels of one pixel pair
    (layers with out_c % 4 == 0 and no fused ADD), as one counted asm loop: the 2x4 block over
    `chunks` 16-tap chunks (conv_block_asm; the last chunk's taps past K are zero in the
    interleaved columns and in the weights), the biases, the requantization of eerie_vrequant
    and the clamp to [%[lo], %[hi]], the two pixels' 4 bytes stored at %[y0] (advanced by 4)
    and, by a scatter store, at %[y0] + %[yq] (the byte offsets of pixel q's outputs: with a
    fifth pointer operand gcc 12 found "impossible constraints" in some layers; the narrowing
    store VSTRB.32 takes a low register, constraint "l"). %[wt] walks one stream of int32 words, per group the weights then the 16
    parameters; %[xp] goes back to the columns' start for the next group. Written with
    intrinsics around the block's assembly, gcc spent about 50 instructions per block on
    set-up and spills (the sums take all 8 even registers); here it is 29."""
    if not 1 <= chunks <= MAX_CHUNKS:
        return []
    lines = (["1:"] + conv_block_asm(chunks) + list(_REQUANT)
             + [f"sub %[xp], %[xp], #{32 * chunks}", "subs %[n], %[n], #1", "bne 1b"])
    # The sums in named registers (clobbered): as 8 "=&Te" operands beside the 5 pointers
    # and counter, gcc 12 found "impossible constraints"
    for name, reg in _SUMS.items():
        lines = [ln.replace(f"%[{name}]", reg) for ln in lines]
    return lines


# the sums' registers in conv_loop_asm: the 8 even ones (VMLADAV's RdaLo)
_SUMS = {"a00": "r0", "a01": "r2", "a02": "r4", "a03": "r6", "a10": "r8", "a11": "r10",
         "a12": "r12", "a13": "lr"}
LOOP_CLOBBERS = tuple(_SUMS.values())


def conv_stream(wl: np.ndarray, bias, m, rs, ra) -> np.ndarray:
    """The int32 words conv_loop_asm reads: per group of 4 channels its weights ([chunks][4
    rows][16 taps] int8, little-endian in words) then biases x4, multipliers x4, rounding
    terms x4, minus the right shifts x4."""
    g = wl.shape[0]
    w32 = np.ascontiguousarray(wl.reshape(g, -1)).view("<i4")
    par = np.stack([np.asarray(a, np.int64).reshape(g, 4) for a in (bias, m, ra, -np.asarray(rs))],
                   axis=1).reshape(g, 16)
    return np.concatenate([w32.astype(np.int64), par], axis=1).reshape(-1).astype(np.int32)


# Largest zero-point-padded copy of the input an im2col layer gets in scratch (padded_image)
PAD_IMAGE_BYTES = 1024


def padded_image(win, in_h: int, in_w: int, in_c: int, kh: int, kw: int, kp: int) -> dict | None:
    """For a small input with short kernel rows (kws's first layer: 49x10x1, rows of 4 taps),
    the group loop's im2col from a copy of the input framed by its zero point (built once per
    batch): each pixel's rows then go straight into the interleaved columns by constant-size
    copies, with no bounds checks (per pixel pair about 60 instructions instead of ~790).
    None where that does not apply (dilated rows, rows longer than 16 taps, a copy larger than
    PAD_IMAGE_BYTES). Returns the image's geometry and the row copies: (source offset from
    the pixel's window corner, offset in the interleaved columns, bytes), split at 16-tap
    chunk boundaries."""
    row = kw * in_c
    if win.dw != 1 or row > 16:
        return None
    ph = (win.out_h - 1) * win.sh + (kh - 1) * win.dh + 1
    pw = (win.out_w - 1) * win.sw + kw
    if ph * pw * in_c > PAD_IMAGE_BYTES:
        return None
    lpad = min(win.pad_l, pw)
    ncols = max(0, min(in_w, pw - win.pad_l))
    copies = [pc for ky in range(kh) for pc in il_pieces(ky * row, row, ky * win.dh * pw * in_c)]
    return dict(ph=ph, pw=pw, lpad=lpad, ncols=ncols, rpad=pw - lpad - ncols, copies=copies,
                bytes=ph * pw * in_c)


def il_pieces(t0: int, n: int, src: int = 0) -> list[tuple[int, int, int]]:
    """Taps t0..t0+n of a pixel's column as (source offset, offset in the interleaved columns
    of conv_loop_asm, bytes), split at 16-tap chunk boundaries (pixel q's are 16 further)."""
    out = []
    while n:
        m = min(n, 16 - t0 % 16)
        out.append((src, 32 * (t0 // 16) + t0 % 16, m))
        t0, n, src = t0 + m, n - m, src + m
    return out


# Most row pieces the direct-to-interleaved im2col (im2col_pieces) unrolls per pixel
MAX_PIECES = 96


def im2col_pieces(win, in_c: int, kh: int, kw: int) -> dict | None:
    """The group loop's im2col written straight into the interleaved columns (no column
    copies, no separate interleave), unrolled per kernel row: `rows[ky]` the pieces of a whole
    row read from the input (dw = 1 and the window inside the image horizontally), `taps[ky][kx]`
    those of one tap (at an edge). None when there would be more than MAX_PIECES."""
    row = kw * in_c
    taps = [[il_pieces(ky * row + kx * in_c, in_c) for kx in range(kw)] for ky in range(kh)]
    rows = [il_pieces(ky * row, row) for ky in range(kh)] if win.dw == 1 else None
    if sum(len(t) for r in taps for t in r) > MAX_PIECES:
        return None
    return dict(rows=rows, taps=taps)
