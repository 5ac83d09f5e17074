"""The int8 MAX_POOL_2D and AVERAGE_POOL_2D kernels (kernels/_pool_split.py, _pool_avg.py,
kernels/pool_s8_split.c.j2) vs TFLM, bit-exact: one model of many pool layers (an input and
an output each), so a single compile and a single run cover channel counts below, at and
past the vectors (4 per DSP word, 16 per Helium int8 vector, 8 per int16 one, 1 elsewhere),
strides, SAME/VALID, a filter larger than the input (no interior pixel), windows past the
unroll limit, batch 2, the fused activations with clamps that bite, and for the average the
interior's division by a multiply (even counts, where halves round away from zero, odd
ones, counts with no 16-bit multiplier, the int16 sums' largest window, 256, and the first
past it, 289, checked with all -128 and all 127 inputs). On the host (the portable scalar kernel, and the DSP and
Helium kernels' plain-C stand-ins under UBSan with the source proof), then the real
instructions in QEMU: mps2-an386 (M4) and mps2-an500 (M7: SSUB8/SEL, SXTAB16), mps3-an547
(M55: VMAX.S8, VMULH.U16) and riscv-virt."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import assert_matches_tflm, random_inputs, tflm_run
from eerie_c.runner import run_model
from test_dsp_kernels import dsp_target_run
from test_mve_kernels import mve_host_run
from test_pooling import out_size
from tflite_builder import ACT, PAD, ModelBuilder

# kind, shape, filter, stride, padding, fused activation (scale 0.03, zero point -100: RELU
# clamps at -100, RELU6 at -100..100, RELU_N1_TO_1 at -128..-67)
MAX, AVG = "MAX_POOL_2D", "AVERAGE_POOL_2D"
LAYERS = [
    (MAX, [1, 8, 8, 3], (2, 2), (2, 2), "VALID", "NONE"),         # fewer channels than a word
    (MAX, [1, 7, 9, 20], (3, 3), (2, 2), "SAME", "RELU6"),        # 16 + 4: a predicated tail
    (MAX, [2, 5, 6, 13], (3, 2), (1, 2), "SAME", "RELU"),         # batch 2, 3 words + 1
    (MAX, [1, 9, 7, 16], (4, 3), (3, 1), "VALID", "NONE"),        # whole vectors only
    (MAX, [1, 4, 5, 9], (5, 5), (2, 3), "SAME", "RELU_N1_TO_1"),  # filter larger: no interior
    (MAX, [1, 7, 6, 8], (6, 6), (1, 1), "VALID", "RELU"),         # 36 taps: the interior loops
    (MAX, [1, 10, 11, 35], (3, 3), (1, 1), "SAME", "NONE"),       # 2 x 16 + 3, 8 words + 3
    (MAX, [1, 9, 9, 1], (2, 2), (2, 2), "SAME", "RELU6"),         # one channel, odd input
    (MAX, [1, 12, 12, 6], (3, 3), (2, 2), "SAME", "NONE"),        # SAME padding only at the end
    (AVG, [1, 8, 8, 3], (2, 2), (2, 2), "VALID", "NONE"),         # count 4: ties, no word
    (AVG, [1, 7, 9, 20], (3, 3), (2, 2), "SAME", "RELU6"),        # count 9, 8 + 8 + 4 lanes
    (AVG, [2, 5, 6, 13], (3, 2), (1, 2), "SAME", "RELU"),         # batch 2, count 6
    (AVG, [1, 9, 7, 16], (4, 3), (3, 1), "VALID", "RELU_N1_TO_1"),
    (AVG, [1, 4, 5, 9], (5, 5), (2, 3), "SAME", "NONE"),          # no interior pixel
    (AVG, [1, 8, 7, 11], (7, 7), (1, 1), "VALID", "NONE"),        # 49 taps: the interior loops
    (AVG, [1, 14, 15, 5], (14, 14), (1, 1), "VALID", "RELU"),     # count 196: no multiplier
    (AVG, [1, 16, 16, 10], (16, 16), (1, 1), "VALID", "NONE"),    # 256: the int16 sums' limit
    (AVG, [1, 17, 17, 6], (17, 17), (1, 1), "VALID", "NONE"),     # 289: int32 sums everywhere
    (AVG, [1, 6, 6, 24], (1, 1), (2, 2), "VALID", "NONE"),        # count 1
    (AVG, [1, 10, 11, 35], (2, 2), (1, 1), "SAME", "RELU6"),      # 4 x 8 + 3, 8 words + 3
]
QIN = (0.03, -100)


def pools_model(layers=LAYERS) -> bytes:
    mb = ModelBuilder()
    for kind, shape, filt, stride, padding, act in layers:
        n, h, w, c = shape
        oshape = [n, out_size(padding, h, filt[0], stride[0]), out_size(padding, w, filt[1], stride[1]), c]
        x = mb.input(shape, "int8", scale=QIN[0], zero_point=QIN[1])
        y = mb.tensor(oshape, "int8", scale=QIN[0], zero_point=QIN[1])
        mb.op(kind, [x], [y], "Pool2DOptions", padding=PAD[padding], strideH=stride[0],
              strideW=stride[1], filterHeight=filt[0], filterWidth=filt[1],
              fusedActivationFunction=ACT[act])
        mb.output(y)
    return mb.build()


def pools_inputs(n=3, seed=0):
    return [random_inputs(layer[1], "int8", n, seed=seed + k) for k, layer in enumerate(LAYERS)]


def _same(got, ref):
    assert len(got) == len(ref) == len(LAYERS)
    for k, (g, r) in enumerate(zip(got, ref)):
        np.testing.assert_array_equal(g, r, err_msg=f"layer {k}: {LAYERS[k]}")


def test_pool_host(tmp_path):
    """The host target: the scalar kernels, every layer."""
    got, _ = assert_matches_tflm(pools_model(), pools_inputs(), tmp_path,
                                 labels=[str(x) for x in LAYERS])
    assert len(got) == len(LAYERS)


def extreme_inputs():
    """Per layer all -128, all 127, then two random records: the lanes' limits, where a wrong
    signed compare or a wrapping int16 sum shows."""
    return [np.concatenate([np.full((1, *layer[1]), -128, np.int8), np.full((1, *layer[1]), 127, np.int8),
                            random_inputs(layer[1], "int8", 2, seed=9 + k)]) for k, layer in enumerate(LAYERS)]


def _check_window_limits(ref, text: str, avg_256: str):
    """The 256 window sums in int16 (avg_256: its division), the 289 one in int32; and the
    extremes reach the int8 limits through the 256 window."""
    assert avg_256 in text and "eerie_pool_avg_out(s, 289," in text
    k = next(i for i, layer in enumerate(LAYERS) if layer[2] == (16, 16))
    assert ref[k][0].min() == -128 and ref[k][1].max() == 127


def test_pool_dsp_stand_ins(tmp_path):
    model, xs = pools_model(), extreme_inputs()
    got, ref = dsp_target_run(model, xs, tmp_path), tflm_run(model, xs)
    _same(got, ref)
    text = (tmp_path / "build" / "m.c").read_text()
    assert text.count("eerie_max_s8x4(m, eerie_read_s8x4(") >= 7 and "eerie_min_s8x4(m, " in text
    assert "s13 = eerie_sxtab16_ror8(s13, w)" in text and "eerie_pool_avg_const(eerie_sum_hi16(" in text
    _check_window_limits(ref, text, "eerie_pool_avg_const(eerie_sum_lo16(s02), 32896,")


def test_pool_mve_stand_ins(tmp_path):
    model, xs = pools_model(), extreme_inputs()
    got = mve_host_run(model, xs, tmp_path, ("eerie_vmax8(m, eerie_vld8(", "eerie_vld8_n(p",
                                             "eerie_vpool_avg_const(q", "eerie_vld8_16_n(p"))
    ref = tflm_run(model, xs)
    _same(got, ref)
    _check_window_limits(ref, (tmp_path / "build" / "m.c").read_text(), "eerie_vpool_avg_const(q, s, 32896,")


@pytest.mark.usefixtures("board_tools")   # fails (never skips) without the tools
@pytest.mark.parametrize("board,mark", [("mps2-an386", "eerie_max_s8x4(m, eerie_read_s8x4("),
                                        ("mps2-an500", "s13 = eerie_sxtab16_ror8(s13, w)"),
                                        ("mps3-an547", "eerie_vmax8(m, eerie_vld8("),
                                        ("riscv-virt", "eerie_max_i32(m, ")])
def test_pool_on_boards(tmp_path, board, mark):
    """Every layer in one QEMU boot on the board's own instructions."""
    p = tmp_path / "m.tflite"
    model = pools_model()
    p.write_bytes(model)
    xs = pools_inputs(n=2, seed=20)
    got, _ = run_model(p, xs, board=board, out_dir=tmp_path / "fw", name="m", patch="off")
    assert mark in (tmp_path / "fw" / "m.c").read_text()
    _same(got, tflm_run(model, xs))
