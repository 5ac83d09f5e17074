"""The estimate's coefficients (estimate.py computes with them): per kernel family, per layer kind.

An estimate, not a measurement: instructions = per_mac x MACs + per_out x output elements
(+ per_in x input elements, all inputs, for ops without MACs) + a fixed call cost, with the coefficients a
least-squares fit of per-layer QEMU counts (bench/profile_layers.py: SysTick after every layer,
-icount shift=0) of the shared models kws_ref_model, vww_96_int8, pretrainedResnet_quant,
ad01_int8, ad01_fp32 and pretrainedResnet on mps2-an386 (M4), mps2-an500 (M7), mps2-an505
(M33), mps3-an547 (M55) and mps2-an385 (M3): in-sample, per layer within 0.45-1.75x of the
measurement (the outliers are small layers: softmax, a model's first convolution, whose few
input channels make per-pixel work dominate), whole models within 15%. No shared model fits the
micro:bit (cortex-m0, 16 KiB RAM): its figures are the M3's times V6M_SCALE, the ratio measured
on examples/tiny_conv.tflite (M0 31.2 vs M3 22.7 instructions per MAC in its convolution, 1.46x
over the model). Kernels the fit has not seen get their family's generic cost, so treat those
rows as rough. The host target (whatever the host compiler makes of the C) has no estimate.

RISC-V (family "rv32", every riscv* target, whose int8 code is the same with or without
C/A/F): fitted the same way to per-layer minstret counts of the same six models on riscv-virt
(RV32IMAFC), per layer within 0.67-2.0x (a model's first convolution is the 2x outlier), whole
models within 10%; int8 CONV_2D, CONV_2D_ADD and FULLY_CONNECTED refitted for the RISC-V GEMM
kernels (kernels/_rv.py) on the four int8 models, per layer within 0.55-1.04x (the small
FULLY_CONNECTED layers are the low end); int8 DEPTHWISE_CONV_2D refitted for kernels/_rv_dw.py
on kws and vww (3x3 only, so per MAC alone: per layer within 0.87-1.19x); float with the FPU from ResNet-8 and ad01_fp32; soft
float (riscv32imac/imc, libgcc's __mulsf3 and __addsf3 per MAC) from ad01_fp32 on sifive_e
only, so other float kernels in soft float are rough.

int8 MAX_POOL_2D and AVERAGE_POOL_2D: from their kernels' own vector loads and stores
(estimate_pools.py).

PATCH_STAGE (patch/stage.py, the per-tile kernel of patch/kernel.py, portable C with SMLAD on
DSP cores and no Helium): instructions per MAC of the stage *as run*, halos included (its "macs"
is the patched MAC count). Fitted on DSP and Helium cores alike (the same C): vww_96_int8's
4-layer 8x8 stage measured 5,951,160 (M4) and 5,739,343 (M55) instructions for 1,716,320 patched
MACs (bench/profile_layers.py --patch auto: 3.47 and 3.34 per MAC), the person detector's
8-layer 2x3 stage 7,826,800 (M4) for 2,378,496 (3.29 per MAC), its earlier 8-layer 4x4 stage
about 10.3M (M55) for 3,069,504 (3.36): 3.4 per patched MAC. The portable per-tile kernel from one
stage each, vww_96_int8's 5-layer stage (2,011,232 patched MACs): 19,392,000 on the M3
(mps2-an385, 9.64 per MAC), 22,886,553 on riscv-virt (11.38), and its 5-layer 4x5 stage on
riscv-virt 19,866,442 for 1,646,976 (12.06): 9.6 and 12.1 (the higher, so that the bound holds).
"""
from __future__ import annotations

from .estimate_pools import POOL_COSTS, POOL_LANES

# Kernel family per target: which kernels the target's code uses (kernels/_dsp.py, _mve.py).
FAMILY = {"cortex-m4": "dsp", "cortex-m7": "dsp", "cortex-m33": "dsp", "cortex-m55": "mve",
          "cortex-m3": "v7m", "cortex-m": "v7m", "cortex-m0": "v6m",
          "riscv": "rv32", "riscv32imc": "rv32", "riscv32imac": "rv32", "riscv32imafc": "rv32"}
RV32_FPU = ("riscv32imafc",)
V6M_SCALE = 1.4   # ARMv6-M (M0) vs ARMv7-M (M3): no MLA/SMLA, fewer addressing modes

# (family, float?) -> kind -> (per_mac, per_out, per_in, fixed). Float kernels are portable C:
# on cores with an FPU (M4/M7/M33/M55) one table, soft float (M3, the generic target) another.
COSTS = {
    # CONV_2D, CONV_2D_ADD and DEPTHWISE_CONV_2D refitted for issue 15's kernels of
    # 2026-11-26 by bench/fit_patch_cost.py --layers (M4, vww/kws/ResNet/person detector, NNLS
    # on relative errors): convolutions within 0.85-1.16x but the first layers over 1-3
    # channels (0.43-0.75x); CONV_2D's per output then lowered by the ~1.5 instructions per
    # output the unrolled kernel's SMMLAR requantization saves; DEPTHWISE_CONV_2D refitted the
    # same way after the stride-1 3x3 block kernel (kernels/_dw_pairs.py): per layer within
    # 0.77-1.17x (the input term is what a stride-2 layer pays per input pixel);
    # FULLY_CONNECTED's per MAC refitted to ad01's layers after the packed formats'
    # correction lists and choice (M4: within 0.87-1.18x)
    ("dsp", False): {"CONV_2D": (0.987, 12.6, 0, 0), "CONV_2D_ADD": (0.967, 0, 31.36, 0),
                     "DEPTHWISE_CONV_2D": (1.307, 0, 5.13, 8750), "FULLY_CONNECTED": (1.25, 15.2, 0, 150),
                     # a patch stage's low-scratch depthwise (the table kernel, no
                     # sign-extended rows, patch/choice.py): DEPTHWISE_CONV_2D's plus 2.29
                     # per MAC, fitted with CACHED_STEP (bench/fit_patch_cost.py --cached) on
                     # whole-model growth of vww's and the person detector's cached 8-layer
                     # stages with both stride-1 layers switched; per layer (bench/profile_stage.py)
                     # 1.9-4.1 per MAC over the layer's pairs kernel, depending on the weights
                     "DEPTHWISE_CONV_2D_LOW": (3.60, 0, 5.13, 8750),
                     "SOFTMAX": (0, 80, 0, 700)},
    # mve CONV_2D / CONV_2D_ADD refitted to the group-loop assembly (mps3-an547, the
    # kws/vww/ResNet layers within 0.9-1.1x but the first layers: vww 0.48x, ResNet 0.64x)
    ("mve", False): {"CONV_2D": (0.109, 4.5, 0, 200), "CONV_2D_ADD": (0.104, 13.8, 0, 200),
                     "DEPTHWISE_CONV_2D": (1.31, 0.15, 0, 200), "FULLY_CONNECTED": (0.137, 8.8, 0, 150),
                     "SOFTMAX": (0, 80, 0, 700)},
    ("v7m", False): {"CONV_2D": (5.16, 67, 0, 200), "CONV_2D_ADD": (5.03, 158, 0, 200),
                     "DEPTHWISE_CONV_2D": (18.1, 2, 0, 200), "FULLY_CONNECTED": (5.21, 44, 0, 150),
                     "SOFTMAX": (0, 80, 0, 700)},
    # float with an FPU refitted to issue 15's blocked VFMA kernels (M4: ResNet float 1.92,
    # ad01_fp32 2.30 instructions per MAC; DS-CNN depthwise 2.34)
    ("fpu", True): {"CONV_2D": (1.85, 19.4, 0, 200), "FULLY_CONNECTED": (2.2, 13.2, 0, 150),
                    "DEPTHWISE_CONV_2D": (2.35, 0, 0, 200),
                    "ADD": (0, 0, 5.8, 150), "AVERAGE_POOL_2D": (0, 0, 5.9, 150),
                    "SOFTMAX": (0, 90, 0, 700)},
    ("soft", True): {"CONV_2D": (62.7, 600, 0, 200), "FULLY_CONNECTED": (67.7, 232, 0, 150),
                     "ADD": (0, 0, 29, 150), "AVERAGE_POOL_2D": (0, 0, 37, 150),
                     "SOFTMAX": (0, 1400, 0, 700)},
}
COSTS.update({
    ("rv32", False): {"CONV_2D": (3.05, 27, 0, 200), "CONV_2D_ADD": (3.03, 135, 0, 200),
                      "DEPTHWISE_CONV_2D": (5.17, 0, 0, 200), "FULLY_CONNECTED": (3.74, 21.5, 0, 150),
                      "SOFTMAX": (0, 93, 0, 700)},
    # the same blocked kernels on RV32F (fmadd.s): ResNet float 2.14, ad01_fp32 2.30 per MAC
    ("rv32f", True): {"CONV_2D": (2.0, 90, 0, 200), "FULLY_CONNECTED": (2.2, 12, 0, 150),
                      "ADD": (0, 0, 5.9, 150), "AVERAGE_POOL_2D": (0, 0, 4.7, 150),
                      "SOFTMAX": (0, 38, 0, 700)},
    ("rv32soft", True): {"FULLY_CONNECTED": (160, 300, 0, 150)},
})
# where a pool's counts are not at hand (a row band's layer, older reports): the same kernels
# per input / output element, for channels a multiple of the lanes and windows that tile the
# input (stride = filter)
for (_fam, _kind), (_load, _store, _fixed) in POOL_COSTS.items():
    _lanes = POOL_LANES.get((_fam, _kind), 1)
    COSTS[(_fam, False)][_kind] = (0, _store / _lanes, _load / _lanes, _fixed)
# the patch stage per family (see above): per patched MAC, plus a fixed cost
# (where STAGE_FIT has no per-layer fit)
STAGE_COSTS = {"dsp": (3.4, 0, 0, 200), "mve": (3.4, 0, 0, 200), "v7m": (9.6, 0, 0, 200),
               "rv32": (12.1, 0, 0, 200)}
for (_fam, _float), _table in list(COSTS.items()):
    if not _float and _fam in STAGE_COSTS:
        _table["PATCH_STAGE"] = STAGE_COSTS[_fam]
# int8 ADD / SUB of two tensors with the input tables and one-SMMULR requantization
# (kernels/elementwise.py input_tables, >= 512 outputs): 21.0 instructions per output on
# mps2-an386 (arm_cifar10's nine residual adds, 2026-11-29); smaller layers keep the old loop
# (about 80 per output), estimated the same (their totals are small)
for _kind in ("ADD", "SUB"):
    COSTS[("dsp", False)][_kind] = (0, 21.0, 0, 150)
# Kinds the fit has not seen: the portable C kernels' typical costs per MAC and per element.
GENERIC = {("dsp", False): (5.0, 20, 8, 150), ("mve", False): (5.0, 20, 8, 150),
           ("v7m", False): (5.2, 44, 8, 150), ("fpu", True): (6.5, 20, 6, 150),
           ("soft", True): (65.0, 400, 40, 150), ("rv32", False): (7.5, 40, 8, 150),
           ("rv32f", True): (7.0, 20, 6, 150), ("rv32soft", True): (160.0, 900, 90, 150)}


# PAD / PADV2 (kernels/pad.py: memset of the output, then memcpy of the input rows, both the C
# library's): measured on a 1x48x48x48 -> 1x50x50x48 PAD (QEMU -icount shift=0, 2026-11-29):
# int8 112,360 (M4) and 115,843 (M55) instructions, 1,144,083 on riscv-virt (picolibc's
# byte loops); float32 446,120 (M4), 4,574,740 (riscv-virt). A pad value whose bytes differ
# (a float 1.5, say) is filled by a loop instead: rough there.
PAD_COSTS = {("dsp", False): (0, 0.5, 0.45, 150), ("mve", False): (0, 0.5, 0.45, 150),
             ("v7m", False): (0, 0.5, 0.45, 150), ("fpu", True): (0, 2.0, 1.86, 150),
             ("soft", True): (0, 2.0, 1.86, 150), ("rv32", False): (0, 5.0, 4.9, 150),
             ("rv32f", True): (0, 20.0, 19.6, 150), ("rv32soft", True): (0, 20.0, 19.6, 150)}
for _key, _cost in PAD_COSTS.items():
    for _kind in ("PAD", "PADV2"):
        COSTS[_key].setdefault(_kind, _cost)
# int8 UNIDIRECTIONAL_SEQUENCE_LSTM (kernels/lstm.py): per MAC and per output element (one
# unit of one step: four gate epilogues and the cell update), fitted on TFLM's mnist LSTM and
# micro_speech LSTM (QEMU -icount shift=0, 2026-11-29): the DSP gate products on the M4 and
# M55, the portable loops on the M3.
for _key, _cost in {("dsp", False): (1.75, 450, 0, 150), ("mve", False): (1.75, 450, 0, 150),
                    ("v7m", False): (6.72, 674, 0, 150)}.items():
    COSTS[_key]["UNIDIRECTIONAL_SEQUENCE_LSTM"] = _cost


# The patch stage per layer kind on DSP / Helium cores (the same per-tile C): a fixed cost per
# MAC misjudged stages whose first layers have few channels (the person detector's 3x3 conv
# over one grey channel measured 5.6 instructions per patched MAC, vww's stages 3.4), so the
# stage is the sum over tiles and layers of these features times coefficients fitted by
# bench/fit_patch_cost.py (non-negative least squares over 11 forced stages of vww_96_int8
# and the person detector on mps2-an386): convolution MACs, output values, output pixels (the
# window gathered once per pixel), the same for depthwise, and one per tile and layer.
STAGE_FEATURES = ("conv_macs", "conv_outs", "conv_pixels", "dw_macs", "dw_outs", "dw_pixels",
                  "tile_layers")
STAGE_FIT = {"dsp": (0.246, 19.43, 67.07, 0.0, 0.0, 911.0, 494.8)}
STAGE_FIT["mve"] = STAGE_FIT["dsp"]
# per band and layer of a row-band stage, beyond the layer kernel's own estimate: the table
# look-up and the switch, the kernel's set-up per call, and what the layer estimates miss on a
# band (bench/fit_patch_cost.py --bands: the step that makes the estimated growth of whole
# models with forced band stages equal the measured one, median of vww's, the person
# detector's and ResNet's: -360 to 8,300 on mps2-an386 with 2026-11-26's kernels; the M55's
# is the earlier fit)
BAND_STEP = {"dsp": 2800, "mve": 4500}
# A stage with cached halos (patch/cache.py) computes every row of every layer once, so
# its estimate is each layer's whole estimate (the very numbers of the prefix it replaces) in
# proportion to the rows each step computes, plus what running in steps adds, fitted by
# bench/fit_patch_cost.py --cached on mps2-an386 and mps3-an547 (bench/fit_cached.py):
# newlib's memmove of the kept rows, (per byte, per call): non-negative least squares over
# every moving layer of vww's 8-layer / 48-step and 4 / 12 and the person detector's 8 / 48
# stages (within 1.5% of each layer's moves on the M4, 2% on the M55)
MOVE_COST = {"dsp": (0.75, 36), "mve": (0.76, 28)}
# per halo input element of a stride-1 depthwise call: the DSP kernels sign-extend every input
# row a call reads, so the rows the previous step extended are extended again (the layer
# measured 50-59k instructions more over 48 or 24 one-row steps than whole on the M4: least
# squares over 5 such layers, each within 0.92-1.08x); the strided and 1x1 kernels measure no
# such cost (within a few hundred instructions of the whole layer). The M55's Helium kernel
# pays less (0.43: the 8 / 48 stages' layers within 0.8-1.03x; over vww's 12 four-row steps
# its 48x48x8 layer measured 8.5k *fewer* than whole)
DW_HALO = {"dsp": 1.51, "mve": 0.43}
# per kernel call, the rest (table look-up, switch, the kernel's set-up): fitted with the
# low-scratch depthwise's per MAC by non-negative least squares on whole-model growth
# (measured in QEMU against the layer-by-layer build) of six forced stages of vww and the
# person detector (8 layers / 48 steps with and without low-scratch, 4 / 24, 6 / 16): 0 on
# the M4 (unconstrained it fits -500, the person detector's first convolution over one grey
# channel running 117k instructions faster over one-row steps than whole); in-sample within
# 2.5 points of growth, held out (the person detector's auto stage, 8 / 48 with layer 5
# low-scratch; vww 6 / 24 with layer 1) within 2 points. On the M55 (Helium kernels, which
# have no low-scratch variant) the same four stages without it also fit 0 (unconstrained
# negative), in-sample within 0.9 points of growth, all estimated high
CACHED_STEP = {"dsp": 0, "mve": 0}
# the int8 element-wise kernels that clamp (vectorizable), and those that look each value up
# in a table (kernels/unary.py, logistic_tanh.py: scalar on every core)
CLAMPS = ("RELU", "RELU6", "RELU_N1_TO_1")
TABLE_LOOKUPS = ("HARD_SWISH", "LOGISTIC", "TANH", "LEAKY_RELU", "ELU", "ABS", "RSQRT", "TABLE_LOOKUP",
                 "CHANNEL_TABLE")
# per output element of an element-wise layer in a row-band stage, beyond its layer estimate:
# layer by layer gcc -O2 auto-vectorizes a plain clamp with Helium (the arena offsets are
# constants, so in0 and out0 are known apart), over a band it cannot (the offsets come from
# the band table, and -O2's very-cheap cost model adds no alias check), so it runs scalar.
# Measured on mps3-an547: a standalone RELU6 between a conv and a depthwise in a cached stage
# (36,864 outputs) cost about 9.8 instructions per output more than layer by layer (one fit
# point; without it that stage measured 1.31x at 1.04x estimated). HARD_SWISH / LOGISTIC / TANH
# (table look-ups) and the requantizing kernels are scalar both ways.
BAND_SCALAR = {"mve": {k: 10 for k in CLAMPS}}
# and those clamps layer by layer on the M55 (vectorized): a standalone RELU6 over 48x48x16
# measured 8,844 instructions, 0.24 per output (the generic 28 per element had it at ~1M,
# which also diluted every stage's growth in percent of the model)
COSTS[("mve", False)].update({k: (0, 0.24, 0, 150) for k in CLAMPS})
# the int8 table look-up kernels (kernels/unary.py, logistic_tanh.py), scalar everywhere: HARD_SWISH
# and LOGISTIC over 48x48x16 measured 3.31 per output on mps3-an547 (the generic 28 diluted
# the growth of stages holding one, and the planner took a 1.33x stage for 1.20x)
COSTS[("mve", False)].update({k: (0, 3.3, 0, 150) for k in TABLE_LOOKUPS})
# the same on the M4 (bench/profile_stage.py's layer-by-layer column, a conv -> RELU6 -> dw ->
# HARD_SWISH -> conv -> dw chain at 96x96x3, mps2-an386): the RELU6 over 48x48x16 measured
# 368,680 instructions, 10.0 per output (a scalar clamp), the HARD_SWISH 138,240, 3.75 per
# output (one fit point each). The generic 28 per element had each at ~1.03M, which put that
# chain's cached stage at 13.5% estimated growth for 17.3% measured, though its growth in
# instructions was estimated within 0.5% (836,790 for 840,000): the model it is a percent of
# was 1.34M too large
COSTS[("dsp", False)].update({k: (0, 10.0, 0, 150) for k in CLAMPS})
COSTS[("dsp", False)].update({k: (0, 3.75, 0, 150) for k in TABLE_LOOKUPS})
