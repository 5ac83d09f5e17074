"""The C of a patch stage (patch/stage.py): one function that runs the stage's int8 CONV_2D /
DEPTHWISE_CONV_2D layers tile by tile, from a const table of per-tile regions, through patch
buffers in its scratch block (templates/kernels/patch_stage_s8.c.j2).

A portable per-tile kernel on every target: the point is the memory, so the arithmetic is the
plainest form that is bit-exact with TFLM (the folded-bias form of conv.py, with a tap in the
padding adding the zero point's term instead of being skipped). The stage is described by plain
data (duck-typed: ops, layers, tiles, buf_offsets), so this module needs nothing from plan/.
"""
from __future__ import annotations

import numpy as np

from ..errors import CompilerBug
from ..templating import render
from ..kernels import Lowered, c_comment, c_ident
from ..kernels._conv_rules import folded_bias
from ..kernels._dsp import acc_bound, fast_requant_consts, has_dsp
from ..kernels._quant import activation_range_int, per_channel_multipliers
from ..kernels.conv import conv_operands, int8_requant_vars
from ..kernels.window import op_what
from ..kernels.depthwise import dsp_weights
from .band_kernels import applies as bands_apply, lower_bands


def _layer_vars(op, g, ctx, lay) -> dict:
    what = op_what(op)
    x, w, b, y = conv_operands(op, g, what)
    act = op.attrs.get("fused_activation_function", "NONE")
    out_c = lay.out_c
    bias = b.data.astype(np.int64).reshape(-1) if b is not None else np.zeros(out_c, np.int64)
    if lay.kind == "CONV_2D":
        wdata = w.data.reshape(out_c, -1)                 # [out_c][kh * kw * in_c]
        wsum = wdata.astype(np.int64).sum(axis=1)
    else:
        wdata = w.data.reshape(lay.kh * lay.kw, out_c)    # [tap][channel]
        wsum = wdata.astype(np.int64).sum(axis=0)
    v = dict(g=lay, name=c_comment(op.name.split(";")[0] or op.kind), zp_in=x.zero_point)
    fb = folded_bias(bias, wsum, -x.zero_point, what)
    # convolutions on a core with SMLAD: weights as sign-extended int16 pairs (k, k+2),
    # (k+1, k+3) per 4 taps, which is what SXTB16 / SXTB16 ROR #8 make of 4 input bytes
    v["smlad"] = has_dsp(ctx.target) and lay.kind == "CONV_2D"
    # direct: a 1x1 window over a multiple of 4 channels is read in place; other windows are
    # gathered into a column of kp bytes (taps rounded up to 4) first
    v["direct"] = lay.kh == lay.kw == 1 and lay.pad_t == lay.pad_l == 0 and lay.in_c % 4 == 0
    v["kp"] = (wdata.shape[1] + 3) // 4 * 4
    # small windows: two output channels at a time, the dot product unrolled
    v["unroll"] = v["smlad"] and out_c % 2 == 0 and v["kp"] <= 64
    if v["smlad"]:
        padded = np.zeros((out_c, v["kp"]), np.int64)
        padded[:, :wdata.shape[1]] = wdata
        q = padded.reshape(out_c, v["kp"] // 4, 4)
        lo = (q[..., 0] & 0xFFFF) | ((q[..., 2] & 0xFFFF) << 16)
        hi = (q[..., 1] & 0xFFFF) | ((q[..., 3] & 0xFFFF) << 16)
        words = np.stack([lo, hi], axis=-1).astype(np.uint32).view(np.int32)
        v["weights"] = ctx.const(words, "int32_t", "weights_dsp", c_comment(w.label) +
                                 " (int16 pairs (c, c+2), (c+1, c+3) per 4 input channels)")
    else:
        v["weights"] = ctx.const(wdata, "int8_t", "weights", c_comment(w.label))
    # depthwise on a core with SMLAD, 4 channels per word (the layout of depthwise.py's DSP
    # kernel), for windows wholly inside the image; the border keeps the int8 weights
    v["wdsp"] = (dsp_weights(ctx, wdata, out_c) if has_dsp(ctx.target) and lay.kind != "CONV_2D"
                 and out_c % 4 == 0 else None)
    v["fbias"] = ctx.const(fb, "int32_t", "bias_folded", "bias with the input zero point folded in")
    # eerie_requant_fast where it is proven bit-exact (_dsp.py): |acc| <= |bias'| + 128 sum|w|
    # holds here too, a padding tap adding zp_in * w with |zp_in| <= 128
    wabs = np.abs(wdata.astype(np.int64)).sum(axis=1 if lay.kind == "CONV_2D" else 0)
    mult, shift = per_channel_multipliers(x, w, y, out_c)
    fast = fast_requant_consts(ctx, mult, shift, y.zero_point, acc_bound(fb, wabs),
                               w.quant.per_channel, out_c, arrays=True)
    v["fast"] = fast is not None
    if fast is not None:
        v.update(fast)
        v["act_min"], v["act_max"] = activation_range_int(act, y)
    else:
        v.update(int8_requant_vars(ctx, x, w, y, out_c, act, what))
    return v


def lower_patch_stage(op, g, ctx) -> Lowered:
    stage = op.attrs["patch"]
    if bands_apply(stage):   # row bands: each layer's own kernel per band (patch/band_kernels.py)
        return lower_bands(op, g, ctx, stage)
    if any(s is not None for s in (stage.skips or [])):
        raise CompilerBug("patch stage: a fused ADD outside row bands (patch/stage.py make_plan refuses it)")
    if any(lay.kind not in ("CONV_2D", "DEPTHWISE_CONV_2D") for lay in stage.layers):
        raise CompilerBug("patch stage: a pool, PAD or element-wise layer outside row bands "
                          "(patch/stage.py make_plan refuses it)")
    n = len(stage.layers)
    layers = []
    outer = ctx.layer
    for k, (sop, lay) in enumerate(zip(stage.ops, stage.layers)):
        ctx.layer = f"l{sop.index}_{c_ident(sop.name)}"
        v = _layer_vars(sop, g, ctx, lay)
        rows, cols = stage.max_region(k)
        v.update(rows=rows, cols=cols, first=k == 0, last=k == n - 1,
                 src_offset=stage.buf_offsets[k - 1] if k else None,
                 dst_offset=stage.buf_offsets[k] if k < n - 1 else None)
        layers.append(v)
    ctx.layer = outer
    table = ctx.const(np.asarray(stage.tiles, np.int16).reshape(-1), "int16_t", "tiles",
                      f"per tile ({stage.grid[0]}x{stage.grid[1]} grid), per layer: y0, x0, rows, "
                      f"cols of the output region the layer computes for the tile")
    rows = getattr(stage, "rows", None)   # --input rows: in0 is the ring, one grid row per call
    body = render("kernels/patch_stage_s8.c.j2", ntiles=len(stage.tiles), nlayers=n, table=table,
                  layers=layers, rows=rows is not None, grid_cols=stage.grid[1])
    names = ", ".join(f"op {o.index}" for o in stage.ops)
    return Lowered(body=body, inputs=[stage.tensors[0]], outputs=[stage.tensors[-1]],
                   helpers={"requant", "dsp"}, scratch_bytes=stage.scratch_bytes, macs=stage.patched_macs,
                   # the output may share the input's bytes at the stage's proven shift
                   inplace="shift" if stage.shift is not None else False,
                   int_params=["tile_row", "base_row"] if rows is not None else [],
                   comment=f"patch stage: {n} layers ({names}) in {len(stage.tiles)} tiles "
                           f"({stage.grid[0]}x{stage.grid[1]}), {stage.extra_macs} MACs of halo recomputation")
