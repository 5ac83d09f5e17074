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
from ._mve_asm import (LOOP_CLOBBERS, MAX_CHUNKS, conv_block_asm, conv_half_asm, conv_loop_asm,
                       conv_stream, im2col_pieces, padded_image)

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
    # (not over a patch stage's row band, patch/band_kernels.py: a band is a smaller image,
    # and its kernel may not take more scratch than the layer-by-layer kernel the plan sized)
    band = "tile_window" in op.attrs
    pad = padded_image(win, in_h, in_w, in_c, kh, kw, kp) if loop and not direct and not band else None
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
