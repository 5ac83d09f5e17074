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
(the folded bias cancels them exactly, as the reference skips them); requantization
(TFLite's formula, eerie_requantize) runs once per output, after the K loop.
"""
from __future__ import annotations

import numpy as np

from ._dsp import pad_to, round_up
from ._quant import activation_range_int

RV_TARGETS = ("riscv", "riscv32imc", "riscv32imac", "riscv32imafc")
BLOCK = 4          # output channels per register block (the weights' interleave)


def has_rv(target: str) -> bool:
    """Whether `target` gets the RISC-V GEMM kernels."""
    return target in RV_TARGETS


def gemm_vars(ctx, wflat: np.ndarray, fbias: np.ndarray, mult, shift, y, act: str,
              label: str) -> dict:
    """Constants of eerie_gemm_rv_s8 for weights [out_c][K] (int8) and the folded bias:
    weights as [ocp / 4][K][4], bias, multiplier and shift as int32 arrays of ocp entries
    (per-tensor parameters repeated, so the kernel has one form)."""
    out_c, k = wflat.shape
    ocp = round_up(out_c, BLOCK)
    wdata = pad_to(np.asarray(wflat, np.int8), (ocp, k))
    wdata = wdata.reshape(ocp // BLOCK, BLOCK, k).transpose(0, 2, 1)
    mult = np.broadcast_to(np.asarray(mult, np.int64).reshape(-1), (out_c,))
    shift = np.broadcast_to(np.asarray(shift, np.int64).reshape(-1), (out_c,))
    act_min, act_max = activation_range_int(act, y)
    return dict(
        k=k, out_c=out_c, ocp=ocp, out_zp=y.zero_point, act_min=act_min, act_max=act_max,
        weights=ctx.const(np.ascontiguousarray(wdata), "int8_t", "weights",
                          f"{label} (blocks of 4 rows interleaved per tap: [{ocp // BLOCK}][{k}][4])"),
        bias=ctx.const(pad_to(np.asarray(fbias, np.int64).astype(np.int32), (ocp,)), "int32_t",
                       "bias_folded", "bias with the input zero point folded in"),
        mult=ctx.const(pad_to(mult.astype(np.int32), (ocp,)), "int32_t", "multiplier"),
        shift=ctx.const(pad_to(shift.astype(np.int32), (ocp,)), "int32_t", "shift"))
