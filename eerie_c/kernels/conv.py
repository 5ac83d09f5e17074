"""CONV_2D (NHWC input, weights [out_c, kh, kw, in_c]): int8 (TFLM scheme) and float32.

Padding follows TFLite: the output size comes from the padding type, the total padding is
(out - 1) * stride + effective_kernel - in (at least 0), and only its floor half is applied
before the image; an odd total puts the extra row/column after it. Out-of-bounds taps
contribute nothing (the reference skips them).

int8: the reference accumulates (x - zp_in) * w over the in-bounds taps. zp_in is folded into
the bias at compile time (bias'[c] = bias[c] - zp_in * sum(w[c])), so the inner loop is a plain
int8 dot product; a tap outside the image then reads zp_in itself, whose product the folded
bias cancels exactly (the reference skips the tap), so every output uses the same form.

Targets with the DSP extension (cortex-m4/m7/m33/m55, see _dsp.py) get a different kernel
(conv2d_s8_dsp.c.j2): im2col into sign-extended columns and 2x2 SMLAD blocks, with the
weights re-laid out for it; RISC-V targets the register-blocked GEMM of _rv.py
(conv2d_s8_rv.c.j2); other targets get the portable loops of conv2d_s8.c.j2.
"""
from __future__ import annotations

import numpy as np

from ..templating import render
from ..errors import EerieError
from . import Lowered, c_comment, kernel
from ._dsp import (UNROLL_MAX_GROUPS, UNROLL_MIN_K, acc_bound, constant_channels, dsp_conv_helpers,
                   dsp_conv_scratch, fast_requant_consts, fast_requant_values, has_dsp, pad_to,
                   pair_weights, round_up, zero_channels)
from ._conv_cols import column_vars
from ._conv_pack import size_lowering, size_vars
from ._conv_rules import folded_bias, pointwise_inplace
from ._f32 import conv_vars as conv_f32_vars
from ._int4 import choice as int4_choice, packed_weights
from ._mve import has_mve, lower_conv2d_mve
from ._rv import gemm_vars, has_rv
from .window import conv_window, op_what
from ._quant import activation_range_float, activation_range_int, per_channel_multipliers


def conv_operands(op, g, what: str):
    """(input, weights, bias or None, output) with the checks every conv-like op needs."""
    if len(op.inputs) < 2 or op.inputs[1] is None:
        raise EerieError(f"{what}: missing weights")
    x, w, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
    b = g.t(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] is not None else None
    if not w.is_const or (b is not None and not b.is_const):
        raise EerieError(f"{what}: weights and bias must be constant tensors")
    if len(x.shape) != 4 or len(w.shape) != 4 or len(y.shape) != 4:
        raise EerieError(f"{what}: expected 4-D input, weights and output, got "
                         f"{list(x.shape)}, {list(w.shape)}, {list(y.shape)}")
    if x.shape[0] != y.shape[0]:
        raise EerieError(f"{what}: batch {x.shape[0]} in, {y.shape[0]} out")
    if x.dtype == "float32":
        if w.dtype != "float32" or y.dtype != "float32" or (b is not None and b.dtype != "float32"):
            raise EerieError(f"{what}: float input needs float weights, bias and output "
                             f"(hybrid quantization is not supported)")
    else:
        if w.dtype != "int8" or y.dtype != "int8" or (b is not None and b.dtype != "int32"):
            raise EerieError(f"{what}: int8 input needs int8 weights and output and int32 bias")
        if x.quant is None or y.quant is None or w.quant is None:
            raise EerieError(f"{what}: int8 tensors without quantization parameters")
        if np.any(np.asarray(w.quant.zero_point) != 0):
            raise EerieError(f"{what}: int8 weights must be symmetric (zero point 0)")
    return x, w, b, y


def int8_requant_vars(ctx, x, w, y, channels: int, act: str, what: str,
                      pad_to_channels: int | None = None) -> dict:
    if w.quant.per_channel and len(w.quant.scale) != channels:
        raise EerieError(f"{what}: {len(w.quant.scale)} weight scales for {channels} output channels")
    mult, shift = per_channel_multipliers(x, w, y, channels)
    per_channel = w.quant.per_channel
    act_min, act_max = activation_range_int(act, y)
    if pad_to_channels and per_channel:
        mult, shift = pad_to(mult, (pad_to_channels,)), pad_to(shift, (pad_to_channels,))
    return dict(
        per_channel=per_channel,
        mult=ctx.const(mult, "int32_t", "multiplier") if per_channel else int(mult[0]),
        shift=ctx.const(shift, "int32_t", "shift") if per_channel else int(shift[0]),
        out_zp=y.zero_point, act_min=act_min, act_max=act_max)


# smallest padded depth (kp) that goes through the shared kernel eerie_conv_pair_s8. Measured
# on vww (kp = 8, 16, 28, 32 layers): from 16 on it beats the inline C kernel on the M4 and
# the M7; at 8 it helps the M4 (3.56 -> 3.31 instructions per MAC) but costs the M7.
SHARED_MIN_K = 16

def int8_conv_vars(ctx, x, w, b, y, act, what, out_c, k, pack: tuple = (), perm=None,
                   w4: bool = False) -> dict:
    """Constants of an int8 CONV_2D: weights as [out_c][K] rows, bias with the input zero point
    folded in, requantization. For DSP targets: rows zero-padded to kp = K rounded up to 4 and
    to an even count (ocp) and interleaved in pairs per 4 taps for the 2x2 SMLAD blocks;
    channels whose output is provably constant get zero weights and bias (see _dsp.py), and
    the requantization is eerie_requant_fast's when proven exact. pack: the compact formats of
    _conv_pack.py the caller can lower under --optimize size (size_fmt in the result). perm:
    the order of the taps in a row (the columns' order, _conv_cols.py), else the model's.
    w4: 4-bit weights (_int4.py) for eerie_conv_pair_s4 (shared, not unrolled, sums times 16
    within int32); the result has shared False when that kernel does not apply."""
    in_off = -x.zero_point
    bias = b.data.astype(np.int64).reshape(-1) if b is not None else np.zeros(out_c, np.int64)
    wflat = w.data.reshape(out_c, k)
    if perm is not None:
        wflat = wflat[:, perm]
    fbias = folded_bias(bias, wflat.astype(np.int64).sum(axis=1), in_off, what)
    mult, shift = per_channel_multipliers(x, w, y, out_c)
    dsp = has_dsp(ctx.target)
    kp, ocp = (round_up(k, 4), round_up(out_c, 2)) if dsp else (k, out_c)
    v = dict(dsp=dsp, kp=kp, kstride=kp, ocp=ocp, in_off=in_off, zp_in=x.zero_point, fast=False)
    fast = None
    wide = False   # the shared kernel's weights stored sign-extended (wide_weights)
    if dsp:
        wabs = np.abs(wflat.astype(np.int64)).sum(axis=1)
        dead = zero_channels(mult, shift, acc_bound(fbias, wabs))
        if dead.any():    # output always the zero point: acc = 0 requantizes the same
            wflat, fbias = np.where(dead[:, None], 0, wflat).astype(np.int8), np.where(dead, 0, fbias)
            wabs = np.where(dead, 0, wabs)
        # all-zero weight rows give constant outputs: produced by the requantization
        # constants from a zero bias, so the accumulator bound stays small
        consts = constant_channels(wabs, fbias, mult, shift, y.zero_point)
        dfb = np.where(wabs == 0, 0, fbias)
        if w.quant.per_channel and len(w.quant.scale) != out_c:
            raise EerieError(f"{what}: {len(w.quant.scale)} weight scales for {out_c} output channels")
        bound = acc_bound(dfb, wabs)
        values = fast_requant_values(mult, shift, y.zero_point, bound, consts)
        # the shared out-of-line kernel (helpers/gemm_dsp.c.j2) takes the zero point folded in
        # (its loops are bounded for the source proof: groups <= 32768, pairs <= 65536; the
        # assembly loop's counter, groups / 4, <= 8192)
        # the unrolled copy (helpers/gemm_dsp_g.c.j2): no clamp beyond SSAT, every pair of
        # channels stored whole; not under --optimize size, whose compact constants feed the
        # general kernel
        unroll = (kp // 4 <= UNROLL_MAX_GROUPS and out_c % 2 == 0 and ctx.optimize != "size"
                  and activation_range_int(act, y) == (-128, 127))
        v["shared"] = (values is not None and values[3] == 0 and ocp // 2 <= 65536
                       and (UNROLL_MIN_K if unroll else SHARED_MIN_K) <= kp <= 4 * 32768)
        if w4:   # any depth; row 0's sums times 16 and row 1's register must fit int32
            v["shared"] = (values is not None and values[3] == 0 and ocp // 2 <= 65536
                           and kp <= 4 * 32768 and w4_sums_fit(dfb, wflat, bound, ocp))
            if not v["shared"]:
                return v
            unroll = unroll and kp >= UNROLL_MIN_K
        if v["shared"] and pack and ctx.optimize == "size":
            sv = size_vars(ctx, wflat, dfb, values, k, kp, ocp, out_c, y.zero_point, c_comment(w.label),
                           pack)
            if sv is not None:
                v.update(sv, fast=True, per_channel=w.quant.per_channel, out_zp=y.zero_point)
                v["act_min"], v["act_max"] = activation_range_int(act, y)
                return v
        if v["shared"]:
            # per pair of channels 8 words, read in order: bias, multiplier, radd, rshift,
            # each for the two channels (the unrolled kernel: the biases before the pair's
            # weights, the rest after them, in one stream)
            fbias = dfb
            rows = [pad_to(np.asarray(a, np.int64), (ocp,)).reshape(ocp // 2, 2)
                    for a in (fbias,) + tuple(values[i] for i in (0, 2, 1))]
            # the unrolled kernel skips the doubling before SMMLAR when its sums arrive doubled:
            # from doubled weights when they are wide, else from doubled columns (one SADD16 per
            # column word: kp / 2 per pixel, against one instruction saved per output value)
            wide = wide_weights(ctx, ocp * kp) and not w4
            doubled = unroll and (wide or out_c > kp // 2) and not w4
            rows[0] = rows[0] * (2 if doubled else 1)     # |bias| < 2^30: doubled fits int32
            if w4:   # the 4-bit kernel's biases: 16 b0 (row 0), 16 b0 + b1 (row 1; gemm_dsp.c.j2)
                rows[0] = np.stack([16 * rows[0][:, 0], 16 * rows[0][:, 0] + rows[0][:, 1]], axis=1)
            if w4 and unroll:
                # the unrolled 4-bit kernel's stream: multiplier and t = rshift - 1 (radd
                # = (2 zp + 1) << t at run time), if every channel's radd is that
                t = pad_to(np.asarray(values[1], np.int64) - 1, (ocp,)).reshape(ocp // 2, 2)
                radd = pad_to(np.asarray(values[2], np.int64), (ocp,)).reshape(ocp // 2, 2)
                if np.array_equal(radd, (2 * y.zero_point + 1) << t):
                    rows = [rows[0], rows[1], t]
                else:   # (constant channels: radd 2 v + 1) the general kernel's table
                    unroll = False
            table = np.concatenate(rows, axis=1).astype(np.int32)
            v.update(fast=True, rq_zp=0, per_channel=w.quant.per_channel, out_zp=y.zero_point,
                     unrolled=kp // 4 if unroll else 0,
                     dcols=doubled and not wide)
            if v["unrolled"]:
                v["rq_rows"] = table
            else:
                v["rq_table"] = ctx.const(table, "int32_t", "bias_requant", "per pair of channels: "
                                          "folded bias, multiplier, radd, rshift (two of each)")
            fast = v
        else:
            fast = fast_requant_consts(ctx, mult, shift, y.zero_point, bound,
                                       w.quant.per_channel, ocp, arrays=True, constants=consts)
        if fast is not None:
            fbias = dfb
            if not v["shared"]:
                v.update(fast, fast=True, per_channel=w.quant.per_channel, out_zp=y.zero_point)
            v["act_min"], v["act_max"] = activation_range_int(act, y)
    if fast is None:
        v.update(int8_requant_vars(ctx, x, w, y, out_c, act, what, pad_to_channels=ocp))
    wdata = pad_to(wflat, (ocp, kp))
    if dsp:   # pairs of rows interleaved per 4 taps: [ocp/2][kp/4][2 rows][4 taps]
        wdata = wdata.reshape(ocp // 2, 2, kp // 4, 4).transpose(0, 2, 1, 3)
    what_w = c_comment(w.label) + (
        f" ({ocp} rows of {kp} taps, pairs of rows interleaved per 4 taps)" if dsp else "")
    if wide:
        # weights stored sign-extended (speed, or balanced for small layers), per group
        # (t0, t2), (t1, t3) for each row of the pair (eerie_conv_pair_s8w: no SXTB16, 12
        # instead of 15 instructions per 16 MACs, twice the weight bytes)
        # The unrolled kernel takes weights and biases doubled (2 * w fits int16, 2 * |bias|
        # < 2^31 as the bound is < 2^30), so its sums arrive doubled: no shift before SMMLAR
        double = 2 if v.get("unrolled") else 1
        t = (double * wdata.astype(np.int64)) & 0xFFFF       # [pairs][groups][2 rows][4 taps]
        words = np.stack([t[..., 0] | t[..., 2] << 16, t[..., 1] | t[..., 3] << 16], axis=-1)
        v["weights"] = pair_weights(ctx, v, words.astype(np.uint32).view(np.int32).reshape(-1),
                                     what_w + ", sign-extended: (t0, t2), (t1, t3) per row")
        v["wide"] = True
        return v
    if w4:   # per pair of rows and group one word: byte i = 16 w0 + w1 + 8 (rows 0, 1, tap i)
        t = wdata.astype(np.int64)                        # [pairs][groups][2 rows][4 taps]
        b8 = (16 * t[:, :, 0, :] + t[:, :, 1, :] + 8).astype(np.int8)
        words = np.frombuffer(np.ascontiguousarray(b8).tobytes(), "<i4").astype(np.int32)
        ctx.packed4.add(w.id)
        v["weights"] = pair_weights(ctx, v, words, what_w + ", 4-bit: per pair and 4 taps one "
                                    "word, byte i = row 0 tap i << 4 | row 1 tap i",
                                    "weights_int4")
        v["w4"] = True
        return v
    if v.get("shared"):   # as little-endian words: the kernel loads them with LDRD (word-aligned)
        words = np.frombuffer(np.ascontiguousarray(wdata, np.int8).tobytes(), "<i4").astype(np.int32)
        v["weights"] = pair_weights(ctx, v, words, what_w + ", 4 taps per word")
        return v
    v["weights"] = ctx.const(wdata, "int8_t", "weights", what_w)
    v["fbias"] = ctx.const(pad_to(fbias.astype(np.int32), (ocp,)), "int32_t", "bias_folded",
                           "bias with the input zero point folded in")
    return v


def int4_conv_vars(ctx, x, w, b, y, act, what, out_c, k) -> dict:
    """Constants of the portable CONV_2D over 4-bit weights (conv2d_s8.c.j2 with w4): the
    weights packed as TFLite stores them ([out_c][k] rows, _int4.py), the bias with the input
    zero point folded in, the requantization."""
    bias = b.data.astype(np.int64).reshape(-1) if b is not None else np.zeros(out_c, np.int64)
    fbias = folded_bias(bias, w.data.reshape(out_c, k).astype(np.int64).sum(axis=1),
                        -x.zero_point, what)
    v = dict(dsp=False, kstride=k, in_off=-x.zero_point, zp_in=x.zero_point, w4=True,
             weights=packed_weights(ctx, w),
             fbias=ctx.const(fbias.astype(np.int32), "int32_t", "bias_folded",
                             "bias with the input zero point folded in"))
    v.update(int8_requant_vars(ctx, x, w, y, out_c, act, what))
    return v


def w4_sums_fit(fbias, wflat, bound, ocp: int) -> bool:
    """Whether eerie_conv_pair_s4's registers stay in int32 (helpers/gemm_dsp.c.j2): row 0's
    16 x (bias + sum), row 1's 16 b0 + b1 + sum of x (16 w0 + w1 + 8) with |x| <= 128."""
    b = pad_to(np.asarray(fbias, np.int64), (ocp,)).reshape(-1, 2)
    w = pad_to(np.asarray(wflat, np.int64), (ocp, wflat.shape[1])).reshape(-1, 2, wflat.shape[1])
    row1 = np.abs(16 * b[:, 0] + b[:, 1]) + 128 * np.abs(16 * w[:, 0] + w[:, 1] + 8).sum(axis=1)
    return 16 * int(np.max(bound, initial=0)) < 2 ** 31 and int(row1.max(initial=0)) < 2 ** 31


# --optimize balanced stores a layer's weights sign-extended, as speed does, when they are at
# most this many bytes: the SXTB16s cost a quarter of an instruction per MAC whatever the
# layer's size, the extra flash only the weights' bytes again (MobileNetV2's 1x1 layers over
# 8 channels: 384 bytes more, 1.8 -> 1.5 instructions per MAC)
WIDE_BALANCED_BYTES = 2048


def wide_weights(ctx, weight_bytes: int) -> bool:
    return ctx.optimize == "speed" or (ctx.optimize == "balanced" and weight_bytes <= WIDE_BALANCED_BYTES)


def conv_choice(v: dict) -> str:
    """report.md's line for a DSP convolution: its weight format under --optimize."""
    if v.get("size_why"):
        return v["size_why"]
    if v.get("wide"):
        return ("weights sign-extended to int16 (eerie_conv_pair_s8w, twice the bytes: speed, "
                f"or balanced for weights of at most {WIDE_BALANCED_BYTES} bytes)")
    if v.get("shared"):
        return "weights int8 (eerie_conv_pair_s8; speed would store them sign-extended)"
    return ""


def lower_conv2d_rv(ctx, x, w, b, y, win, act, what, v, residual=None, w4=False) -> Lowered:
    """CONV_2D on RISC-V (conv2d_s8_rv.c.j2); with `residual` (CONV_2D_ADD's constants, its
    v carrying xin) the fused ADD runs on each pair of pixels' outputs in scratch."""
    out_c, kh, kw, in_c = w.shape
    k = kh * kw * in_c
    bias = b.data.astype(np.int64).reshape(-1) if b is not None else np.zeros(out_c, np.int64)
    wflat = w.data.reshape(out_c, k)
    fbias = folded_bias(bias, wflat.astype(np.int64).sum(axis=1), -x.zero_point, what)
    if w.quant.per_channel and len(w.quant.scale) != out_c:
        raise EerieError(f"{what}: {len(w.quant.scale)} weight scales for {out_c} output channels")
    mult, shift = per_channel_multipliers(x, w, y, out_c)
    v.update(gemm_vars(ctx, wflat, fbias, mult, shift, y, act, c_comment(w.label), w4=w4))
    if w4:
        ctx.packed4.add(w.id)
    # a 1x1 window never overlaps the padding (TFLite pads 1x1 by 0): read pixels in place
    v.update(zp_in=x.zero_point, direct=kh == kw == 1 and win.pad_t == win.pad_l == 0)
    body = render("kernels/conv2d_s8_rv.c.j2", residual=residual, **v)
    scratch = (0 if v["direct"] else 2 * k) + (2 * out_c if residual else 0)
    return Lowered(body=body, inputs=[x.id], outputs=[y.id],
                   helpers={"requant", "gemm_rv"} | ({"gemm_rv_s4"} if w4 else set()),
                   scratch_bytes=scratch, macs=v["batches"] * win.out_h * win.out_w * out_c * k,
                   choice=v.get("w4_choice", ""))


def lower_conv2d_dsp4(op, ctx, x, w, b, y, win, act, what, v) -> Lowered | None:
    """CONV_2D with 4-bit weights on the DSP targets: the shared pair kernel over nibble
    words (eerie_conv_pair_s4, helpers/gemm_dsp_s4.c.j2), or None when it does not apply."""
    batches, in_h, in_w, in_c = x.shape
    out_c, kh, kw = w.shape[:3]
    direct = kh == 1 and kw == 1 and in_c % 4 == 0
    cols = column_vars(win, in_h, in_w, in_c) if not direct else None
    cp = ctx.checkpoint()
    packed = set(ctx.packed4)
    d = int8_conv_vars(ctx, x, w, b, y, act, what, out_c, kh * kw * in_c,
                       perm=cols["perm"] if cols else None, w4=True)
    if not d.get("w4"):
        ctx.rollback(cp)
        ctx.packed4 = packed
        return None
    v = dict(v, **d, direct=direct)
    if cols:
        v["cols"] = cols
    body = render("kernels/conv2d_s8.c.j2", **v)
    scratch = dsp_conv_scratch(v)
    inplace = pointwise_inplace(win, in_h, in_w, in_c, out_c) if direct else False
    return Lowered(body=body, inputs=[x.id], outputs=[y.id],
                   helpers=dsp_conv_helpers(v) | (set() if v.get("unrolled") else {"gemm_dsp_s4"}),
                   scratch_bytes=scratch,
                   macs=batches * win.out_h * win.out_w * out_c * kh * kw * in_c, inplace=inplace,
                   choice=int4_choice(op, "eerie_conv_pair_s4"))


@kernel("CONV_2D", dtypes=("int8", "float32"))
def lower_conv2d(op, g, ctx):
    what = op_what(op)
    x, w, b, y = conv_operands(op, g, what)
    win = conv_window(op, x, w, b, y, what)
    batches, in_h, in_w, in_c = x.shape
    out_c, kh, kw = w.shape[:3]
    act = op.attrs.get("fused_activation_function", "NONE")
    v = dict(batches=batches, in_h=in_h, in_w=in_w, in_c=in_c, out_c=out_c, w=win)
    scratch = 0
    if x.dtype == "float32":
        v.update(conv_f32_vars(ctx, w, b, win, in_h, in_w, out_c))
        v["act_min"], v["act_max"] = activation_range_float(act)
        body = render("kernels/conv2d_f32.c.j2", **v)
        helpers = {"fma_f32"}
    elif w.int4:   # 4-bit weights (_int4.py)
        low = lower_conv2d_dsp4(op, ctx, x, w, b, y, win, act, what, v) \
            if has_dsp(ctx.target) else None
        if low is not None:
            return low
        if has_rv(ctx.target):    # RISC-V: the GEMM over nibble words (eerie_gemm_rv_s4)
            return lower_conv2d_rv(ctx, x, w, b, y, win, act, what,
                                   dict(v, w4_choice=int4_choice(op, "eerie_gemm_rv_s4")), w4=True)
        # elsewhere (or where the DSP kernel does not apply) the portable kernel reading them
        v.update(int4_conv_vars(ctx, x, w, b, y, act, what, out_c, kh * kw * in_c),
                 size_why=int4_choice(op))
        body = render("kernels/conv2d_s8.c.j2", **v)
        helpers = {"requant", "int4"}
    else:
        sized = None
        if has_mve(ctx.target) and ctx.optimize == "size":
            # --optimize size on the M55: the DSP kernel when packed weights are the layer's
            # smallest format (fewer weight bytes than Helium's int8 rows); else the Helium
            # kernel (rq alone would save 7 B per channel at several times the instructions)
            cp = ctx.checkpoint()
            sized = int8_conv_vars(ctx, x, w, b, y, act, what, out_c, kh * kw * in_c,
                                   pack=("rq", "packed"))
            if sized.get("size_fmt") != "packed":
                ctx.rollback(cp)
                sized = None
        if has_mve(ctx.target) and sized is None:   # cortex-m55: Helium kernel (_mve.py) when it applies
            low = lower_conv2d_mve(op, g, ctx, x, w, b, y, win, act, what)
            if low is not None:
                return low
        if has_rv(ctx.target):    # RISC-V: GEMM of _rv.py, im2col into scratch unless 1x1
            return lower_conv2d_rv(ctx, x, w, b, y, win, act, what, v)
        direct = kh == 1 and kw == 1 and in_c % 4 == 0
        # im2col columns built straight from the input (_conv_cols.py): the weights' taps
        # in the columns' order; not under --optimize size (its packed rows keep the model's)
        cols = (column_vars(win, in_h, in_w, in_c) if has_dsp(ctx.target) and not direct
                and sized is None and ctx.optimize != "size" else None)
        v.update(sized or int8_conv_vars(ctx, x, w, b, y, act, what, out_c, kh * kw * in_c,
                                         pack=("rq", "packed"),
                                         perm=cols["perm"] if cols else None))
        v["direct"] = direct
        if cols and not v.get("size_fmt"):
            v["cols"] = cols
        if v.get("size_fmt"):   # --optimize size: compact constants (_conv_pack.py)
            body, scratch, may_inplace = size_lowering(v)
            inplace = may_inplace and v["direct"] and pointwise_inplace(win, in_h, in_w, in_c, out_c)
            return Lowered(body=body, inputs=[x.id], outputs=[y.id], scratch_bytes=scratch,
                           helpers={"requant", "dsp", "gemm_dsp", "conv_pack"}, inplace=inplace,
                           macs=batches * win.out_h * win.out_w * out_c * kh * kw * in_c,
                           choice=conv_choice(v))
        body = render("kernels/conv2d_s8.c.j2", **v)
        helpers = dsp_conv_helpers(v)
        if v["dsp"]:
            scratch = dsp_conv_scratch(v)
    inplace = False
    if x.dtype == "int8" and v.get("dsp") and v.get("direct"):
        inplace = pointwise_inplace(win, in_h, in_w, in_c, out_c)
    return Lowered(body=body, inputs=[x.id], outputs=[y.id], helpers=helpers, scratch_bytes=scratch,
                   macs=batches * win.out_h * win.out_w * out_c * kh * kw * in_c, inplace=inplace,
                   choice=conv_choice(v))
