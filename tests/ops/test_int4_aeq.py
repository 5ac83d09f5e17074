"""MLPerf Tiny's DS-CNN keyword spotter quantized by Google's AI Edge Quantizer with 4-bit
channel-wise weights and int8 activations (INT4 convolutions and classifier; the quantizer
keeps depthwise layers out of 4-bit static quantization, so they are int8): bit-exact with
LiteRT's reference kernels on the host and on the M4, M55 and RISC-V boards in QEMU, with
the weights two per byte. The quantizer is a test dependency (pyproject's test extra)."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import eerie_run, require_board_tools
from int4_models import aeq_quantize, float_dscnn, litert_run

BOARDS = [("mps2-an386", "cortex-m4"), ("mps3-an547", "cortex-m55"), ("riscv-virt", "riscv32imafc")]


@pytest.fixture(scope="module")
def kws_w4a8(tmp_path_factory) -> bytes:
    return aeq_quantize(float_dscnn(), 4, tmp_path_factory.mktemp("aeq"))


def _inputs(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(-128, 128, size=(n, 1, 49, 10, 1)).astype(np.int8)


def test_aeq_kws_w4a8_host(tmp_path, kws_w4a8):
    from eerie_c.frontend.tflite import load_tflite
    g = load_tflite(kws_w4a8, "kws")
    int4 = [op.kind for op in g.ops if len(op.inputs) > 1 and op.inputs[1] and g.t(op.inputs[1]).int4]
    assert int4 == ["CONV_2D"] * 5 + ["FULLY_CONNECTED"], int4   # the "INT4 x6"
    xs = _inputs(8, 0)
    got, rep = eerie_run(kws_w4a8, [xs], tmp_path)
    np.testing.assert_array_equal(got[0], litert_run(kws_w4a8, xs))


@pytest.mark.parametrize("board,core", BOARDS, ids=[b for b, _ in BOARDS])
def test_aeq_kws_w4a8_board(tmp_path, kws_w4a8, board, core):
    require_board_tools(board)
    xs = _inputs(3, 1)
    got, rep = eerie_run(kws_w4a8, [xs], tmp_path, board=board)
    assert rep["target"] == core, rep["target"]
    np.testing.assert_array_equal(got[0], litert_run(kws_w4a8, xs))
