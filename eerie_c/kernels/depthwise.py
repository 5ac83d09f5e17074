"""DEPTHWISE_CONV_2D (NHWC input, weights [1, kh, kw, in_c * mult]): int8 (TFLM scheme) and
float32. Output channel oc reads input channel oc / mult (oc = ic * mult + m).

Padding, stride and dilation follow TFLite exactly as for CONV_2D (see conv.py). int8: the
interior of the output (every tap in bounds) uses a bias with the input zero point folded in
(bias'[oc] = bias[oc] - zp_in * sum(w[.., oc])); the border keeps the reference's per-tap
(x - zp_in) * w form over the in-bounds taps only, so skipped taps stay exact.

Targets with the DSP extension (see _dsp.py) get depthwise_s8_dsp.c.j2 instead when the depth
multiplier is 1 and the channels a multiple of 4: four channels per word with SXTB16 and
SMLABB/SMLATT, taps outside the image reading the zero point, which the folded bias cancels.
RISC-V targets get depthwise_s8_rv.c.j2 (see _rv_dw.py) for kernels of up to 9 taps.
"""
from __future__ import annotations

import numpy as np

from ..templating import render
from . import Lowered, c_comment, kernel
from ._dsp import channel_quant, fast_requant_consts, fast_requant_values, has_dsp
from ._quant import activation_range_float, activation_range_int
from ._mve import has_mve, lower_depthwise_mve
from ._conv_pack import dw_size_preamble, dw_size_vars
from ._conv_rules import folded_bias, ring_inplace
from ._depthwise_s2 import s2_vars
from ._dw_pairs import pairs_ok, pairs_table, pairs_vars
from ._f32 import depthwise_vars as depthwise_f32_vars
from ._int4 import choice as int4_choice, packed_weights
from ._rv import has_rv
from ._rv_dw import dw_rv_vars
from .conv import conv_operands, int8_requant_vars
from .window import depthwise_window, op_what


# Which int8 DSP kernel, from measurements on mps2-an386 (vww, kws):
# - stride 1: the kernel over sign-extended rows (depthwise_s8_dsp_rows.c.j2; every input
#   word extended once instead of once per window, no border path): kws 4.20 -> 3.20, vww's
#   8 channels 4.47 -> 3.83, 32 channels 4.06 -> 3.42 instructions per MAC;
# - strided: each input word is read by about 2 windows, so extending rows first does not
#   pay (vww 16 channels 4.12 -> 4.38, 32 channels 3.64 -> 3.96); depthwise_s8_dsp.c.j2
#   with the table from 32 channels on (4.06 -> 3.64), with separate arrays below (gcc's code
#   for the table with 8 or 16 channels was slower: 4.12 -> 5.45).
TABLE_MIN_CHANNELS = 32


def rows_ok(win) -> bool:
    """Whether the kernel over sign-extended rows applies (with the table path)."""
    return win.sh == 1 and win.sw == 1


def dsp_weights(ctx, wk, in_c, scale: int = 1):
    """Weights (times `scale`) sign-extended per 4 channels and tap as words (w_c, w_c+2),
    (w_c+1, w_c+3): the halfword order SXTB16 gives the input word, for SMLABB/SMLATT."""
    t = scale * wk.astype(np.int64).reshape(wk.shape[0], in_c // 4, 4)   # [tap][group][4 channels]
    lo = (t[..., 0] & 0xFFFF) | ((t[..., 2] & 0xFFFF) << 16)
    hi = (t[..., 1] & 0xFFFF) | ((t[..., 3] & 0xFFFF) << 16)
    words = np.stack([lo, hi], axis=-1).transpose(1, 0, 2)           # [group][tap][2]
    return ctx.const(words.astype(np.uint32).view(np.int32), "int32_t", "weights_dsp",
                     "weights sign-extended in pairs of channels (c, c+2), (c+1, c+3) per tap"
                     + (", doubled" if scale == 2 else ""))


def int8_dsp_vars(ctx, x, w, y, wk, fb, win, in_w, in_c, act, what, pairs=False) -> dict:
    """Everything the DSP variant reads: its weight layout, tap offsets, the zero-point word,
    the folded bias (0 for channels with constant outputs) and the requantization. With the
    fast requantization, weights and bias are stored doubled (int8 weights doubled fit the
    int16 halfwords) so the accumulator arrives as the 2 * acc that SMMULR needs, and bias and
    requantization parameters are one table read in order per 4 channels."""
    q = channel_quant(x, w, y, wk, fb, in_c)
    wk, fb, dfb, mult, shift, consts, bound = q.wk, q.fb, q.dfb, q.mult, q.shift, q.consts, q.bound
    zp = x.zero_point & 0xFF
    v = dict(taps=[(ky, kx, (ky * win.dh * in_w + kx * win.dw) * in_c)
                   for ky in range(win.kh) for kx in range(win.kw)],
             zpw=int(np.array([zp * 0x01010101], np.uint32).view(np.int32)[0]))
    values = fast_requant_values(mult, shift, y.zero_point, bound, consts)
    if values is not None and values[3] == 0 and (in_c >= TABLE_MIN_CHANNELS or rows_ok(win)):
        mult_, rshift, radd, _ = values
        if pairs:
            v.update(fast=True, table=True, pairs=True, per_channel=w.quant.per_channel,
                     out_zp=y.zero_point, wtab=pairs_table(ctx, wk, dfb, mult_, radd, rshift, in_c))
            v["act_min"], v["act_max"] = activation_range_int(act, y)
            return v
        cols = [np.broadcast_to(np.asarray(a, np.int64), (in_c,)).reshape(in_c // 4, 4)
                for a in (2 * dfb, mult_, radd, rshift)]
        # --optimize size: the table from 9 bytes per channel, expanded in scratch (_conv_pack.py)
        small = dw_size_vars(ctx, dfb, values, y.zero_point, in_c, wk) if ctx.optimize == "size" else None
        v.update(small or dict(rq_table=ctx.const(
            np.concatenate(cols, axis=1).astype(np.int32), "int32_t", "bias_requant",
            "per 4 channels: doubled folded bias, multiplier, radd, rshift (four of each)")))
        v.update(fast=True, table=True, per_channel=w.quant.per_channel, out_zp=y.zero_point)
        if "wexp" not in v:
            v["wexp"] = dsp_weights(ctx, wk, in_c, 2)
        v["act_min"], v["act_max"] = activation_range_int(act, y)
        return v
    v.update(table=False, wexp=dsp_weights(ctx, wk, in_c))
    fast = fast_requant_consts(ctx, mult, shift, y.zero_point, bound,
                               w.quant.per_channel, in_c, constants=consts)
    if fast is not None:
        v.update(fast, fast=True, per_channel=w.quant.per_channel, out_zp=y.zero_point)
        v["act_min"], v["act_max"] = activation_range_int(act, y)
        fb = dfb
    else:
        v.update(int8_requant_vars(ctx, x, w, y, in_c, act, what), fast=False)
    v["fbias"] = ctx.const(fb.astype(np.int32), "int32_t", "bias_folded",
                           "bias with the input zero point folded in")
    return v


@kernel("DEPTHWISE_CONV_2D", dtypes=("int8", "float32"))
def lower_depthwise_conv2d(op, g, ctx):
    what = op_what(op)
    x, w, b, y = conv_operands(op, g, what)
    win = depthwise_window(op, x, w, b, y, what)
    batches, in_h, in_w, in_c = x.shape
    kh, kw, out_c = w.shape[1:]
    mult = out_c // in_c
    act = op.attrs.get("fused_activation_function", "NONE")
    v = dict(batches=batches, in_h=in_h, in_w=in_w, in_c=in_c, out_c=out_c, depth_mult=mult, w=win)
    scratch = 0
    inplace = False
    pair_helpers: set[str] = set()
    if x.dtype == "float32":
        v.update(depthwise_f32_vars(ctx, w, b, win, in_h, in_w))
        v["act_min"], v["act_max"] = activation_range_float(act)
        body = render("kernels/depthwise_f32.c.j2", **v)
        helpers = {"fma_f32"}
    else:
        in_off = -x.zero_point
        bias = b.data.astype(np.int64).reshape(-1) if b is not None else np.zeros(out_c, np.int64)
        wk = w.data.reshape(kh * kw, out_c)
        fast_ok = not w.int4   # 4-bit weights: the portable kernel reading them packed
        if fast_ok and has_mve(ctx.target):   # cortex-m55: Helium kernel (_mve.py) when it applies
            low = lower_depthwise_mve(op, g, ctx, x, w, b, y, win, act, what)
            if low is not None:
                return low
        if fast_ok and has_rv(ctx.target):    # RISC-V: weights in registers, borders unrolled (_rv_dw.py)
            rv = dw_rv_vars(ctx, x, w, b, y, win, in_h, in_w, act, what, c_comment(w.label))
            if rv is not None:
                v.update(rv)
                return Lowered(body=render("kernels/depthwise_s8_rv.c.j2", **v), inputs=[x.id],
                               outputs=[y.id], helpers={"requant", "gemm_rv"},
                               macs=batches * win.out_h * win.out_w * out_c * kh * kw)
        dsp = fast_ok and has_dsp(ctx.target) and mult == 1 and in_c % 4 == 0 and kh * kw <= 25
        v.update(dsp=dsp, in_off=in_off, fast=False, lag=-1, rows=False)
        # 3x3 stride 2 on the DSP cores: its own kernel when it applies (_depthwise_s2.py)
        s2 = dsp and ctx.optimize != "size" and s2_vars(ctx, x, w, y, wk, bias, win, act, what)
        if s2:
            v.update(s2)
            scratch, pair_helpers = s2["scratch"], s2["s2_helpers"]
        elif dsp:
            # low_scratch (set by a patch stage's planner, patch/choice.py): no kernel over
            # sign-extended rows (the pairs or rows kernel), whose rows in scratch can set a
            # cached stage's scratch block; the table kernel below needs none (more instructions)
            low_scratch = bool(op.attrs.get("low_scratch"))
            fb = folded_bias(bias, wk.astype(np.int64).sum(axis=0), in_off, what)
            v.update(int8_dsp_vars(ctx, x, w, y, wk, fb, win, in_w, in_c, act, what,
                                   pairs=pairs_ok(win, in_c, in_w) and ctx.optimize != "size"
                                   and not low_scratch))
            inplace = ring_inplace(g, x, win, in_h, in_w)
            if v.get("pairs"):
                # per-channel extended rows, blocks of up to 5 outputs (_dw_pairs.py); in
                # place as the rows kernel below (every input row up to oy is extended
                # before output row oy is written)
                pv, pair_helpers, scratch = pairs_vars(win, in_w, in_c, x.zero_point,
                                                       v["act_min"], v["act_max"])
                v.update(pv)
            elif v.get("table") and rows_ok(win) and not low_scratch:
                # sign-extended input rows (depthwise_s8_dsp_rows.c.j2): each input word is
                # extended once instead of once per window reading it, and no border path.
                # In place it needs no ring of output rows: output row oy covers input row
                # oy's bytes, and every input row up to oy is extended before it is written.
                pad_r = max(0, (win.out_w - 1) * win.sw - win.pad_l + (kw - 1) * win.dw - (in_w - 1))
                zp = x.zero_point & 0xFFFF
                v.update(rows=True, pw=win.pad_l + in_w + pad_r, px=in_c // 2,
                         rspan=(kh - 1) * win.dh + 1,
                         zpe=int(np.array([zp | zp << 16], np.uint32).view(np.int32)[0]))
                scratch = 4 * (v["rspan"] + 1) * v["pw"] * v["px"]
            elif inplace:
                # In place (conv.ring_inplace): a ring of pad_t + 1 output rows in scratch;
                # see depthwise_s8_dsp.c.j2.
                v["lag"] = win.pad_t
                scratch = (win.pad_t + 1) * in_w * in_c
        else:
            v["weights"] = packed_weights(ctx, w) if w.int4 else ctx.tensor_const(w, "weights")
            v["w4"] = w.int4
            if win.has_interior:
                v["fbias"] = ctx.const(folded_bias(bias, wk.astype(np.int64).sum(axis=0), in_off, what),
                                       "int32_t", "bias_folded", "bias with the input zero point folded in")
            if win.has_border:
                v["bias"] = ctx.tensor_const(b, "bias") if b is not None else None
            v.update(int8_requant_vars(ctx, x, w, y, out_c, act, what))
        body = render("kernels/depthwise_s8.c.j2", **v)
        helpers = ({"requant", "dsp"} | pair_helpers) if dsp else {"requant"} | ({"int4"} if w.int4 else set())
        if v.get("rq_meta"):      # --optimize size: the table goes after the kernel's scratch
            offset = (scratch + 3) // 4 * 4
            pre, extra = dw_size_preamble(v, offset)
            body, scratch = pre + body, offset + extra
            helpers |= {"conv_pack"}
    # The strided DSP kernel out of line: inlined into NAME_invoke, gcc 12's allocation of its
    # loop moved with every change elsewhere in the model (with the out-of-line pairs blocks,
    # vww's 48x48x16 layer on the M7 went 311,760 -> 744,480 instructions); in its own
    # function it keeps its code (321,080 there, the M4 unchanged). Not in size mode, where
    # it cost the M7 64k instructions and flash 128 bytes.
    strided = (x.dtype == "int8" and v.get("dsp") and not v.get("pairs") and not v.get("rows")
               and ctx.optimize != "size")
    return Lowered(body=body, inputs=[x.id], outputs=[y.id], helpers=helpers, scratch_bytes=scratch,
                   macs=batches * win.out_h * win.out_w * out_c * kh * kw, inplace=inplace,
                   choice=int4_choice(op) if w.int4 else v.get("size_why", ""),
                   noinline=bool(strided))
