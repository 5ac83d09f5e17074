"""Compile-time side of the int8 GEMM kernel for 32-bit RISC-V (templates/helpers/gemm_rv.c.j2),
used by CONV_2D (conv2d_s8_rv.c.j2) and FULLY_CONNECTED (fully_connected_s8_rv.c.j2).

RV32IM has no multiply-accumulate and no SIMD, so the inner loop is at best a byte load per
operand, a mul and an add per MAC. The kernel keeps a 4 output channels x 2 pixels block of
accumulators in registers (8 of the 31 GPRs; 4x4 would spill on RV32E-sized budgets and gave
gcc 12 no room for the unrolled loads): each input byte is loaded once for 4 channels, each
weight byte once for 2 pixels. The weights are re-laid out here as [ocp / 4][K][4] (out_c
zero-padded to ocp, a multiple of 4) so the inner loop walks them with one pointer. Loads are
byte loads only (lb): RISC-V MCUs trap or emulate misaligned words, and int8 activations in
the arena have no alignment we could prove for every layer.

The bias carries the input zero point folded in (kernels/_conv_rules.folded_bias), so the
accumulators start from it and padding taps of the convolution read the zero point itself
(the folded bias cancels them exactly, as the reference skips them); requantization runs
once per output, after the K loop: eerie_requant_fast's arithmetic (a mul and a mulh) where
_dsp.fast_requant_consts proves it exact for the layer, else TFLite's general formula. As
for the DSP kernels, channels whose output is provably constant get zero weights and bias
first (their requantization constants give the value), so their huge biases (vww_96_int8)
do not break the proof for the whole layer.
"""
from __future__ import annotations

import numpy as np

from ._dsp import acc_bound, constant_channels, fast_requant_consts, pad_to, round_up, zero_channels
from ._quant import activation_range_int

RV_TARGETS = ("riscv", "riscv32imc", "riscv32imac", "riscv32imafc")
BLOCK = 4          # output channels per register block (the weights' interleave)


def has_rv(target: str) -> bool:
    """Whether `target` gets the RISC-V GEMM kernels."""
    return target in RV_TARGETS


def rq_vars(ctx, wflat: np.ndarray, fbias: np.ndarray, mult, shift, y, act: str,
             ocp: int) -> tuple[dict, np.ndarray, np.ndarray]:
    """The requantization of rows [out_c][K] of weights with the folded bias, as int32
    arrays of ocp entries (per-tensor parameters repeated, so the kernels have one form):
    fast = 1 with mult, shift (the right shift) and radd of eerie_requant_fast, out_zp what
    is added after it; fast = 0 with TFLite's multiplier and exponent. Returns it with the
    weights and bias the kernel must use (dead and constant channels zeroed when fast)."""
    out_c, k = wflat.shape
    mult = np.broadcast_to(np.asarray(mult, np.int64).reshape(-1), (out_c,))
    shift = np.broadcast_to(np.asarray(shift, np.int64).reshape(-1), (out_c,))
    wflat, fbias = np.asarray(wflat, np.int64), np.asarray(fbias, np.int64)
    wabs = np.abs(wflat).sum(axis=1)
    dead = zero_channels(mult, shift, acc_bound(fbias, wabs))
    wz, bz = np.where(dead[:, None], 0, wflat), np.where(dead, 0, fbias)
    wabs = np.where(dead, 0, wabs)
    consts = constant_channels(wabs, bz, mult, shift, y.zero_point)
    bz = np.where(wabs == 0, 0, bz)
    fast = fast_requant_consts(ctx, mult, shift, y.zero_point, acc_bound(bz, wabs), True, ocp,
                               arrays=True, constants=consts)
    act_min, act_max = activation_range_int(act, y)
    v = dict(k=k, out_c=out_c, ocp=ocp, act_min=act_min, act_max=act_max)
    if fast is not None:
        wflat, fbias = wz, bz
        v.update(fast=1, mult=fast["rq_mult"], shift=fast["rq_rshift"], radd=fast["rq_radd"],
                 out_zp=fast["rq_zp"])
    else:
        v.update(fast=0, out_zp=y.zero_point,
                 mult=ctx.const(pad_to(mult.astype(np.int32), (ocp,)), "int32_t", "multiplier"),
                 shift=ctx.const(pad_to(shift.astype(np.int32), (ocp,)), "int32_t", "shift"))
        v["radd"] = v["shift"]   # not read by the general formula
    return v, wflat, fbias


def gemm_vars(ctx, wflat: np.ndarray, fbias: np.ndarray, mult, shift, y, act: str,
              label: str, w4: bool = False) -> dict:
    """Constants of eerie_gemm_rv_s8 for weights [out_c][K] (int8) and the folded bias:
    weights as [ocp / 4][K][4], bias, and the requantization of rq_vars. w4: 4-bit weights
    for eerie_gemm_rv_s4 (_int4.py), per block one word per two taps: nibble 4 t + r holds
    row r's tap t (an odd K's last word only its tap 0)."""
    out_c, k = wflat.shape
    ocp = round_up(out_c, BLOCK)
    v, wflat, fbias = rq_vars(ctx, wflat, fbias, mult, shift, y, act, ocp)
    wdata = pad_to(wflat.astype(np.int8), (ocp, k))
    wdata = wdata.reshape(ocp // BLOCK, BLOCK, k).transpose(0, 2, 1)
    if w4:
        t = pad_to(wdata.astype(np.int64), (ocp // BLOCK, k + k % 2, BLOCK)) & 0xF
        t = t.reshape(ocp // BLOCK, (k + 1) // 2, 2 * BLOCK)       # [blocks][pairs][4 t + r]
        words = (t << (4 * np.arange(2 * BLOCK))).sum(axis=-1)
        v["weights"] = ctx.const(words.astype(np.uint32).view(np.int32).reshape(-1), "int32_t",
                                 "weights_int4", f"{label} (4-bit: per block of 4 rows one word "
                                 f"per two taps, nibble 4 t + r: [{ocp // BLOCK}][{(k + 1) // 2}])")
        v["w4"] = True
    else:
        v["weights"] = ctx.const(np.ascontiguousarray(wdata), "int8_t", "weights",
                                 f"{label} (blocks of 4 rows interleaved per tap: [{ocp // BLOCK}][{k}][4])")
    v["bias"] = ctx.const(pad_to(fbias.astype(np.int32), (ocp,)), "int32_t", "bias_folded",
                          "bias with the input zero point folded in")
    return v
