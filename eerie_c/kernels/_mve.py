"""Helium (MVE) variants of the int8 CONV_2D, FULLY_CONNECTED and DEPTHWISE_CONV_2D kernels,
for the cortex-m55 target only (templates/helpers/base_mve.c.j2, templates/kernels/*_mve.c.j2).

Each `lower_*_mve` returns a Lowered, or None when its preconditions do not hold (the caller
then falls back to the DSP variant, which the M55 also runs). The building blocks are MVE
intrinsics under `#if defined(__ARM_FEATURE_MVE)` and plain C with the same results
otherwise, so the generated file still builds anywhere and the source proof covers it.

Dot products use VMLADAVA.S8 (16 int8 MACs per instruction) against weights re-laid out at
compile time in the kernel's access order, with the input zero point folded into the bias.
Requantization is eerie_requant_fast of _dsp.py on 4 lanes: VQRDMULH(acc, mult) equals
SMMULR(2 * acc, mult) for mult >= 0 and |acc| < 2^30, so the DSP variant's compile-time proof
(right shifts only, accumulator bound from weights and bias, dead and constant channels)
carries over unchanged; layers it does not cover keep the DSP/portable kernels.
"""
from __future__ import annotations

import numpy as np

from ..templating import render
from . import Lowered, c_comment
from ._dsp import (acc_bound, constant_channels, fast_requant_consts, pad_to, round_up,
                   zero_channels)
from ._conv_rules import folded_bias, pointwise_inplace, ring_inplace
from ._quant import activation_range_int, per_channel_multipliers

MVE_TARGETS = ("cortex-m55",)
MVE_HELPERS = {"base_mve"}


def has_mve(target: str) -> bool:
    """Whether generated code for `target` gets the MVE kernels."""
    return target in MVE_TARGETS


class _Grab:
    """Stands in for LowerCtx.const to collect the arrays fast_requant_consts computes."""

    def __init__(self):
        self.arrays: dict[str, np.ndarray] = {}

    def const(self, data, ctype, hint, comment=""):
        self.arrays[hint] = np.asarray(data, np.int64)
        return hint


def fast_params(wrows: np.ndarray, fbias: np.ndarray, mult, shift, out_zp: int):
    """Per channel (weights, folded bias, mult, rshift, radd) for the vector requantization
    (output zero point folded into radd), or None when it would not be bit-exact. wrows is
    [channels][taps]; channels whose output is provably constant get zero weights and bias
    (their constant comes from the requantization parameters, see _dsp.py)."""
    wrows = np.asarray(wrows, np.int64)
    fbias = np.asarray(fbias, np.int64)
    n = wrows.shape[0]
    if n == 0 or np.abs(fbias).max(initial=0) >= 2 ** 31:
        return None
    mult, shift = np.asarray(mult, np.int64), np.asarray(shift, np.int64)
    wabs = np.abs(wrows).sum(axis=1)
    dead = zero_channels(mult, shift, acc_bound(fbias, wabs))
    wrows = np.where(dead[:, None], 0, wrows)
    fbias, wabs = np.where(dead, 0, fbias), np.where(dead, 0, wabs)
    consts = constant_channels(wabs, fbias, mult, shift, out_zp)
    fbias = np.where(wabs == 0, 0, fbias)
    grab = _Grab()
    fast = fast_requant_consts(grab, mult, shift, out_zp, acc_bound(fbias, wabs), True, n,
                               arrays=True, constants=consts)
    if fast is None or fast["rq_zp"] != 0:
        return None
    a = grab.arrays
    return wrows, fbias, a["multiplier"], a["rshift"], a["radd"]


def _params(ctx, m, rs, ra, bias4, what: str) -> str:
    """One int32 block of 16 per group of 4 lanes: mult x4, -rshift x4, radd x4, then the 4
    accumulator start values (folded biases), so a kernel walks one pointer for all of them."""
    blocks = np.stack([m.reshape(-1, 4), -rs.reshape(-1, 4), ra.reshape(-1, 4),
                       bias4.reshape(-1, 4)], axis=1).reshape(-1)
    return ctx.const(blocks.astype(np.int32), "int32_t", "mve_params",
                     f"per {what}: multiplier x4, minus the right shift x4, rounding term (plus "
                     f"the output zero point times 2^rshift) x4, biases with the input zero point "
                     f"folded in")


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


def lower_conv2d_mve(op, g, ctx, x, w, b, y, win, act: str, what: str,
                     residual: dict | None = None) -> Lowered | None:
    """int8 CONV_2D (templates/kernels/conv2d_s8_mve.c.j2), or None. With residual (CONV_2D_ADD,
    conv_add.py: rid and out, the residual and output tensor ids; vec_data, eerie_vadd_s8's
    constants, or ra, the scalar ADD's constants of residual_add_s8.j2), each pair of output pixels
    goes to scratch, then the ADD with the residual (C in0; the convolution's input is in1)
    writes the output over the residual's same elements."""
    batches, in_h, in_w, in_c = x.shape
    out_c, kh, kw, _ = w.shape
    k = kh * kw * in_c
    if k == 0 or out_c == 0 or batches * win.out_h * win.out_w == 0 or k // 16 > MAX_CHUNKS:
        return None
    bias = b.data.astype(np.int64).reshape(-1) if b is not None else np.zeros(out_c, np.int64)
    wflat = w.data.reshape(out_c, k).astype(np.int64)
    fb = folded_bias(bias, wflat.sum(axis=1), -x.zero_point, what)
    if w.quant.per_channel and len(w.quant.scale) != out_c:
        return None
    mult, shift = per_channel_multipliers(x, w, y, out_c)
    prep = fast_params(wflat, fb, mult, shift, y.zero_point)
    if prep is None:
        return None
    wflat, fb, m, rs, ra = prep
    kp, ocp = round_up(k, 16), round_up(out_c, 4)
    # [quads][kp/16][4 rows][16 taps]
    wl = pad_to(wflat.astype(np.int8), (ocp, kp)).reshape(ocp // 4, 4, kp // 16, 16).transpose(0, 2, 1, 3)

    def padded(a, fill):
        return np.concatenate([a, np.full(ocp - out_c, fill, np.int64)])

    direct = kh == 1 and kw == 1
    # one asm loop over all groups (conv_loop_asm) when every group is whole (with a fused ADD
    # too: its outputs go to scratch, the ADD follows per pixel pair)
    loop = out_c % 4 == 0 and round_up(k, 16) // 16 <= MAX_CHUNKS
    # In place (conv.pointwise_inplace): the pair's input pixels are copied to scratch before
    # its outputs are written
    inplace = pointwise_inplace(win, in_h, in_w, in_c, out_c) if direct and residual is None else False
    copy_in = bool(inplace)
    act_min, act_max = activation_range_int(act, y)
    full = k // 16
    pad = padded_image(win, in_h, in_w, in_c, kh, kw, kp) if loop and not direct else None
    # scratch: the two columns (im2col or in place; with the group loop an in-place pair is
    # interleaved straight from the input, before any output is written) or the padded
    # image, then the columns' chunks interleaved
    cols = 0 if direct and not copy_in or direct and loop else 2 * kp
    pieces = im2col_pieces(win, in_c, kh, kw) if loop and not direct and pad is None else None
    if pad is not None:
        cols = pad["bytes"]
    elif pieces is not None:
        cols = 0
    v = dict(batches=batches, in_h=in_h, in_w=in_w, in_c=in_c, out_c=out_c, w=win, K=k, kp=kp,
             direct=direct, copy_in=copy_in, zp_in=x.zero_point, act_min=act_min, act_max=act_max,
             full=full, asm=conv_block_asm(full), half=conv_half_asm(full) if residual else None,
             ilo=cols, grouploop=loop, pad=pad, pieces=pieces)
    if loop:
        v.update(chunks=kp // 16, loop_asm=conv_loop_asm(kp // 16), loop_clobbers=LOOP_CLOBBERS,
                 stream=ctx.const(conv_stream(wl, fb, m, rs, ra), "int32_t", "weights_mve_params",
                                  f"{c_comment(w.label)}: per group of 4 channels its weights "
                                  f"({kp // 16} chunks of the 4 rows' 16 taps, int8 in "
                                  f"little-endian words), then biases with the input zero point "
                                  f"folded in x4, multipliers x4, rounding terms (plus the "
                                  f"output zero point times 2^rshift) x4, minus the right shift x4"))
    else:
        v.update(weights=ctx.const(np.ascontiguousarray(wl), "int8_t", "weights_mve",
                                   f"{c_comment(w.label)} ({ocp} rows of {kp} taps, groups of 4 "
                                   f"rows interleaved per 16 taps)"),
                 params=_params(ctx, padded(m, 0), padded(rs, 1), padded(ra, 0), padded(fb, 0),
                                "group of 4 channels"))
    scratch = cols + 32 * (kp // 16 if loop else full)
    macs = batches * win.out_h * win.out_w * out_c * k
    if residual is not None:
        vec = None
        if residual.get("vec_data") is not None:
            vec = ctx.const(residual["vec_data"], "int32_t", "add_mve",
                            "the fused ADD's vector constants (see eerie_vadd_s8)")
        v.update(xin="in1", zoff=scratch, vec=vec, ra=residual.get("ra"))
        body = render("kernels/conv2d_s8_mve.c.j2", **v)
        return Lowered(body=body, inputs=[residual["rid"], x.id], outputs=[residual["out"]],
                       helpers=set(MVE_HELPERS) | ({"requant"} if v["vec"] is None else set()),
                       scratch_bytes=scratch + 2 * out_c, inplace=True, macs=macs,
                       noinline=full > 0)
    body = render("kernels/conv2d_s8_mve.c.j2", **v)
    return Lowered(body=body, inputs=[x.id], outputs=[y.id], helpers=set(MVE_HELPERS),
                   scratch_bytes=scratch, inplace=inplace, macs=macs, noinline=full > 0)


def lower_fc_mve(op, g, ctx, x, w, y, act: str, wdata, folded, mult, shift,
                 batches: int, units: int, depth: int) -> Lowered | None:
    """int8 FULLY_CONNECTED (templates/kernels/fully_connected_s8_mve.c.j2), or None."""
    if batches * units * depth == 0:
        return None
    prep = fast_params(wdata, folded, mult, shift, y.zero_point)
    if prep is None:
        return None
    wrows, fb, m, rs, ra = prep
    up, dp = round_up(units, 4), round_up(depth, 16)
    # [blocks of 4 rows][dp/16][4 rows][16 inputs]
    wl = pad_to(wrows.astype(np.int8), (up, dp)).reshape(up // 4, 4, dp // 16, 16).transpose(0, 2, 1, 3)

    def padded(a, fill):
        return np.concatenate([a, np.full(up - units, fill, np.int64)])

    act_min, act_max = activation_range_int(act, y)
    v = dict(batches=batches, units=units, depth=depth, dp=dp, act_min=act_min, act_max=act_max,
             weights=ctx.const(np.ascontiguousarray(wl), "int8_t", "weights_mve",
                               f"{c_comment(w.label)} (blocks of 4 rows interleaved per 16 inputs)"),
             params=_params(ctx, padded(m, 0), padded(rs, 1), padded(ra, 0), padded(fb, 0),
                            "block of 4 units"))
    body = render("kernels/fully_connected_s8_mve.c.j2", **v)
    return Lowered(body=body, inputs=[x.id], outputs=[y.id], helpers=set(MVE_HELPERS),
                   macs=batches * units * depth)


def lower_depthwise_mve(op, g, ctx, x, w, b, y, win, act: str, what: str) -> Lowered | None:
    """int8 DEPTHWISE_CONV_2D with depth multiplier 1 and channels a multiple of 4
    (templates/kernels/depthwise_s8_mve.c.j2), or None."""
    batches, in_h, in_w, c = x.shape
    _, kh, kw, out_c = w.shape
    if out_c != c or c % 4 or c == 0 or kh * kw > 25 or batches * win.out_h * win.out_w == 0:
        return None
    bias = b.data.astype(np.int64).reshape(-1) if b is not None else np.zeros(c, np.int64)
    wk = w.data.reshape(kh * kw, c).astype(np.int64)
    fb = folded_bias(bias, wk.sum(axis=0), -x.zero_point, what)
    if w.quant.per_channel and len(w.quant.scale) != c:
        return None
    mult, shift = per_channel_multipliers(x, w, y, c)
    prep = fast_params(wk.T, fb, mult, shift, y.zero_point)
    if prep is None:
        return None
    wrows, fb, m, rs, ra = prep
    # immediate offsets of the inline assembly (VLDRB.S32: 7 bits)
    if 4 * (3 * win.sw + (kw - 1) * win.dw) > 124 or 4 * (kh * kw - 1) > 124:
        return None
    kspan = (kh - 1) * win.dh + 1
    wp = (win.out_w - 1) * win.sw + (kw - 1) * win.dw + 1
    jlo, jhi = min(win.pad_l, wp), min(wp, win.pad_l + in_w)
    act_min, act_max = activation_range_int(act, y)
    # In place like the DSP variant (conv.ring_inplace)
    inplace = ring_inplace(g, x, win, in_h, in_w)
    v = dict(batches=batches, in_h=in_h, in_w=in_w, C=c, w=win, kspan=kspan, wp=wp, jlo=jlo,
             jhi=jhi, zp_in=x.zero_point, act_min=act_min, act_max=act_max,
             weights=ctx.const(np.ascontiguousarray(wrows.astype(np.int8).reshape(c // 4, 4, kh * kw)
                                                    .transpose(0, 2, 1)), "int8_t", "weights_mve",
                               f"{c_comment(w.label)} (groups of 4 channels: [C/4][taps][4])"),
             params=_params(ctx, m, rs, ra, fb, "4 channels"))
    body = render("kernels/depthwise_s8_mve.c.j2", **v)
    return Lowered(body=body, inputs=[x.id], outputs=[y.id], helpers=set(MVE_HELPERS),
                   scratch_bytes=kspan * wp * c, inplace=inplace,
                   macs=batches * win.out_h * win.out_w * c * kh * kw)
