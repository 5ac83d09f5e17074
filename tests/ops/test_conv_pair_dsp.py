"""The shared int8 CONV_2D kernels of the DSP targets (eerie_conv_pair_s8 and, under --optimize
speed, eerie_conv_pair_s8w with weights stored sign-extended; helpers/gemm_dsp.c.j2)
vs TFLM, on shapes that reach each part of it: the 4-group assembly loop and its pair and
single-group tails (kp / 4 = 19, 21, 39, 16 groups), odd pixel counts (the last pixel twice),
odd output channels, batches > 1, strides, dilation, padding, SSAT alone and the ReLU6 clamp,
per-channel and per-tensor requantization. Built for the host (the plain-C branch, with
UBSan and the source proof) and run on the real instructions in QEMU on the M4 (mps2-an386)
and the M7 (mps2-an500)."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import random_inputs, tflm_run
from eerie_c.api import compile_model, run_model
from test_conv import conv_model
from test_dsp_kernels import check_dsp_board, check_dsp_target


@pytest.fixture(autouse=True)
def _int8_weights_when_balanced(monkeypatch):
    """These shapes are small enough that --optimize balanced would store their weights
    sign-extended too (conv.py WIDE_BALANCED_BYTES); the int8 weight kernels are the ones
    under test here, so balanced keeps int8 weights (test_balanced_widens_small_layers checks
    the threshold itself)."""
    import eerie_c.kernels.conv as conv
    monkeypatch.setattr(conv, "WIDE_BALANCED_BYTES", 0)


# in_shape, out_c, kernel, stride, padding, dilation, act, per_channel
SHAPES = {
    "pw-K76-odd": ((1, 5, 3, 76), 7, (1, 1), (1, 1), "SAME", (1, 1), "RELU6", True),
    "k3-K156-s2-batch2": ((2, 4, 5, 17), 9, (3, 3), (2, 2), "SAME", (1, 1), "NONE", True),
    "k3-K84-dil2": ((1, 6, 7, 9), 6, (3, 3), (1, 1), "SAME", (2, 2), "RELU", False),
    "pw-K64-valid-s2": ((1, 7, 6, 64), 12, (1, 1), (2, 2), "VALID", (1, 1), "RELU", True),
}


def _model(case):
    in_shape, out_c, k, stride, padding, dil, act, pc = SHAPES[case]
    return in_shape, conv_model("int8", in_shape, out_c, k, stride, padding, dil, act=act, per_channel=pc)


@pytest.mark.parametrize("case", sorted(SHAPES))
def test_conv_pair_host(tmp_path, case):
    in_shape, model = _model(case)
    src = tmp_path / "m.tflite"
    src.write_bytes(model)
    code = compile_model(src, target="cortex-m4", name="m").files["m.c"]
    assert "eerie_conv_pair_s8(ca" in code, "the shared kernel is the one under test"
    check_dsp_target(tmp_path, model, in_shape)


@pytest.mark.parametrize("board", ["mps2-an386", "mps2-an500"])
@pytest.mark.parametrize("case", sorted(SHAPES))
def test_conv_pair_qemu(tmp_path, case, board):
    in_shape, model = _model(case)
    check_dsp_board(tmp_path, model, in_shape, board, seed=3)


def _speed(monkeypatch):
    """Compiles made by helpers that take no optimize argument (dsp_target_run) use speed."""
    import eerie_c.kernels as kernels
    orig = kernels.LowerCtx.__init__

    def init(self, graph, target="host", optimize="balanced"):
        orig(self, graph, target, "speed")
    monkeypatch.setattr(kernels.LowerCtx, "__init__", init)


@pytest.mark.parametrize("case", sorted(SHAPES))
def test_conv_pair_wide_host(tmp_path, monkeypatch, case):
    """--optimize speed: weights stored sign-extended (eerie_conv_pair_s8w), host build."""
    in_shape, model = _model(case)
    src = tmp_path / "m.tflite"
    src.write_bytes(model)
    code = compile_model(src, target="cortex-m4", name="m", optimize="speed").files["m.c"]
    assert "eerie_conv_pair_s8w(ca" in code
    _speed(monkeypatch)
    check_dsp_target(tmp_path, model, in_shape)


@pytest.mark.parametrize("board", ["mps2-an386", "mps2-an500"])
@pytest.mark.parametrize("case", sorted(SHAPES))
def test_conv_pair_wide_qemu(tmp_path, case, board):
    in_shape, model = _model(case)
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    xs = [random_inputs(list(in_shape), "int8", 2, seed=7)]
    got, rep = run_model(p, xs, board=board, optimize="speed", out_dir=tmp_path / "fw", name="m")
    assert "eerie_conv_pair_s8w(ca" in (tmp_path / "fw" / "m.c").read_text()
    np.testing.assert_array_equal(got[0], tflm_run(model, xs)[0])
