"""The int8 MAX_POOL_2D kernel (kernels/_pool_split.py, kernels/pool_max_s8_split.c.j2) vs
TFLM, bit-exact: one model of many pool layers (an input and an output each), so a single
compile and a single run cover channel counts below, at and past the vectors (4 per DSP
word, 16 per Helium vector, 1 elsewhere), strides, SAME/VALID, a filter larger than the
input (no interior pixel), a window past the unroll limit, batch 2, and the fused
activations with clamps that bite. On the host (the portable scalar kernel, and the DSP and
Helium kernels' plain-C stand-ins under UBSan with the source proof), then the real
instructions in QEMU: mps2-an386 (SSUB8/SEL), mps3-an547 (VMAX.S8) and riscv-virt."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import assert_matches_tflm, random_inputs, tflm_run
from eerie_c.runner import run_model
from test_dsp_kernels import dsp_target_run
from test_mve_kernels import mve_host_run
from test_pooling import out_size
from tflite_builder import ACT, PAD, ModelBuilder

# shape, filter, stride, padding, fused activation (scale 0.03, zero point -100: RELU clamps
# at -100, RELU6 at -100..100, RELU_N1_TO_1 at -128..-67)
LAYERS = [
    ([1, 8, 8, 3], (2, 2), (2, 2), "VALID", "NONE"),         # fewer channels than a word
    ([1, 7, 9, 20], (3, 3), (2, 2), "SAME", "RELU6"),        # 16 + 4: a predicated Helium tail
    ([2, 5, 6, 13], (3, 2), (1, 2), "SAME", "RELU"),         # batch 2, 3 words + 1
    ([1, 9, 7, 16], (4, 3), (3, 1), "VALID", "NONE"),        # whole vectors only
    ([1, 4, 5, 9], (5, 5), (2, 3), "SAME", "RELU_N1_TO_1"),  # filter larger: no interior pixel
    ([1, 7, 6, 8], (6, 6), (1, 1), "VALID", "RELU"),         # 36 taps: the interior loops
    ([1, 10, 11, 35], (3, 3), (1, 1), "SAME", "NONE"),       # 2 x 16 + 3, 8 words + 3
    ([1, 9, 9, 1], (2, 2), (2, 2), "SAME", "RELU6"),         # one channel, odd input, SAME
    ([1, 12, 12, 6], (3, 3), (2, 2), "SAME", "NONE"),        # SAME with padding only at the end
]
QIN = (0.03, -100)


def pools_model(layers=LAYERS) -> bytes:
    mb = ModelBuilder()
    for shape, filt, stride, padding, act in layers:
        n, h, w, c = shape
        oshape = [n, out_size(padding, h, filt[0], stride[0]), out_size(padding, w, filt[1], stride[1]), c]
        x = mb.input(shape, "int8", scale=QIN[0], zero_point=QIN[1])
        y = mb.tensor(oshape, "int8", scale=QIN[0], zero_point=QIN[1])
        mb.op("MAX_POOL_2D", [x], [y], "Pool2DOptions", padding=PAD[padding], strideH=stride[0],
              strideW=stride[1], filterHeight=filt[0], filterWidth=filt[1],
              fusedActivationFunction=ACT[act])
        mb.output(y)
    return mb.build()


def pools_inputs(n=3, seed=0):
    return [random_inputs(layer[0], "int8", n, seed=seed + k) for k, layer in enumerate(LAYERS)]


def _same(got, ref):
    assert len(got) == len(ref) == len(LAYERS)
    for k, (g, r) in enumerate(zip(got, ref)):
        np.testing.assert_array_equal(g, r, err_msg=f"layer {k}: {LAYERS[k]}")


def test_max_pool_host(tmp_path):
    """The host target: the scalar kernel (branch-free max), every layer."""
    got, _ = assert_matches_tflm(pools_model(), pools_inputs(), tmp_path,
                                 labels=[str(x) for x in LAYERS])
    assert len(got) == len(LAYERS)


def test_max_pool_dsp_stand_ins(tmp_path):
    model, xs = pools_model(), pools_inputs()
    got = dsp_target_run(model, xs, tmp_path)
    text = (tmp_path / "build" / "m.c").read_text()
    assert text.count("eerie_max_s8x4(m, eerie_read_s8x4(") >= 7 and "eerie_min_s8x4(m, " in text
    _same(got, tflm_run(model, xs))


def test_max_pool_mve_stand_ins(tmp_path):
    model, xs = pools_model(), pools_inputs()
    got = mve_host_run(model, xs, tmp_path, ("eerie_vmax8(m, eerie_vld8(", "eerie_vld8_n(p"))
    _same(got, tflm_run(model, xs))


def test_max_pool_extremes(tmp_path):
    """All -128 and all 127 records: the lanes' limits, where a wrong signed compare shows."""
    model = pools_model()
    xs = [np.concatenate([np.full((1, *layer[0]), -128, np.int8), np.full((1, *layer[0]), 127, np.int8),
                          random_inputs(layer[0], "int8", 1, seed=9)]) for layer in LAYERS]
    _same(dsp_target_run(model, xs, tmp_path), tflm_run(model, xs))


@pytest.mark.usefixtures("board_tools")   # fails (never skips) without the tools
@pytest.mark.parametrize("board,mark", [("mps2-an386", "eerie_max_s8x4(m, eerie_read_s8x4("),
                                        ("mps3-an547", "eerie_vmax8(m, eerie_vld8("),
                                        ("riscv-virt", "eerie_max_i32(m, ")])
def test_max_pool_on_boards(tmp_path, board, mark):
    """Every layer in one QEMU boot on the board's own instructions."""
    p = tmp_path / "m.tflite"
    model = pools_model()
    p.write_bytes(model)
    xs = pools_inputs(n=2, seed=20)
    got, _ = run_model(p, xs, board=board, out_dir=tmp_path / "fw", name="m", patch="off")
    assert mark in (tmp_path / "fw" / "m.c").read_text()
    _same(got, tflm_run(model, xs))
