"""Compile-time side of the int8 DEPTHWISE_CONV_2D kernel for 32-bit RISC-V
(templates/kernels/depthwise_s8_rv.c.j2), picked for the targets of _rv.RV_TARGETS.

Per output row and channel, the channel's kh x kw weights (at most MAX_TAPS) are loaded once
into int32 locals and the row's output columns are computed two at a time, so the inner
block is only byte loads (lb, never a misaligned word), muls and adds with offsets known at
generation time. The output rows and columns are split here into groups whose windows have
the same taps inside the image: the interior is one group, each border row or column its own.
Every group gets its own unrolled code, with the taps that fall outside the image left out, so
no tap is bounds-checked at run time. The accumulators start from the bias with the input zero
point folded in (bias - zp * sum(w)); a window with taps left out adds zp * (their weights)
back, which is the reference's sum over in-image taps of (x - zp) * w exactly. Requantization
runs once per output with eerie_rv_out (helpers/gemm_rv.c.j2): the mul + mulh formula where
_dsp.fast_requant_consts proves it exact, else TFLite's general one.
"""
from __future__ import annotations

import numpy as np

from ._conv_rules import folded_bias
from ._quant import per_channel_multipliers
from ._rv import rq_vars

MAX_TAPS = 9       # weights held in registers: 9 + 2 accumulators + pointers fit 31 GPRs
PX = 2            # output columns per trip (their input columns overlap: loads shared)
MAX_GROUPS = 5     # groups per axis (interior + border rows): bounds the unrolled code size


def axis_groups(size: int, out: int, k: int, stride: int, dil: int, pad: int) -> list[dict]:
    """Consecutive output indices [lo, hi) whose windows have the same taps inside [0, size):
    taps lists those tap indices, out the others (left out of the generated code)."""
    groups: list[dict] = []
    for o in range(out):
        taps = tuple(t for t in range(k) if 0 <= o * stride - pad + t * dil < size)
        if groups and groups[-1]["taps"] == taps:
            groups[-1]["hi"] = o + 1
        else:
            groups.append(dict(lo=o, hi=o + 1, taps=taps))
    for g in groups:
        g["out"] = tuple(t for t in range(k) if t not in g["taps"])
    return groups


def dw_rv_vars(ctx, x, w, b, y, win, in_h: int, in_w: int, act: str, what: str, label: str):
    """Template variables of depthwise_s8_rv.c.j2, or None where the kernel does not apply
    (more taps than registers, or so many border groups that the unrolled code would bloat)."""
    _, kh, kw, out_c = w.shape
    if kh * kw > MAX_TAPS:
        return None
    rows = axis_groups(in_h, win.out_h, kh, win.sh, win.dh, win.pad_t)
    cols = axis_groups(in_w, win.out_w, kw, win.sw, win.dw, win.pad_l)
    if len(rows) > MAX_GROUPS or len(cols) > MAX_GROUPS:
        return None
    bias = b.data.astype(np.int64).reshape(-1) if b is not None else np.zeros(out_c, np.int64)
    wk = w.data.reshape(kh * kw, out_c).astype(np.int64)
    fb = folded_bias(bias, wk.sum(axis=0), -x.zero_point, what)
    mult, shift = per_channel_multipliers(x, w, y, out_c)
    v, wrows, fb = rq_vars(ctx, wk.T, fb, mult, shift, y, act, out_c)
    zp, in_c = int(x.zero_point), x.shape[3]
    for rg in rows:       # the code of each (row group, column group) block
        rg["blocks"] = [dict(lo=cg["lo"], hi=cg["hi"], loop_end=cg["lo"] + (cg["hi"] - cg["lo"]) // PX * PX,
                             taps=[(ky * kw + kx, (ky * win.dh * in_w + kx * win.dw) * in_c)
                                   for ky in rg["taps"] for kx in cg["taps"]],
                             out=[ky * kw + kx for ky in range(kh) for kx in range(kw)
                                  if ky not in rg["taps"] or kx not in cg["taps"]] if zp else [])
                        for cg in cols]
        # weights the row reads (a local per weight it does not read would be unused)
        rg["wused"] = sorted({t for blk in rg["blocks"] for t, _ in blk["taps"]}
                             | {t for blk in rg["blocks"] for t in blk["out"]})
    v.update(rows=rows, px=PX, loops=any(cg["hi"] - cg["lo"] >= PX for cg in cols), zp_in=zp, taps=kh * kw,
             weights=ctx.const(np.ascontiguousarray(wrows.astype(np.int8)), "int8_t", "weights",
                               f"{label} (per channel: its {kh} x {kw} taps, [{out_c}][{kh * kw}])"),
             bias=ctx.const(np.asarray(fb).astype(np.int32), "int32_t", "bias_folded",
                            "bias with the input zero point folded in"))
    return v
