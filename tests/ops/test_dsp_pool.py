"""The int8 AVERAGE_POOL_2D generated for DSP cores (window sums of 4 channels per word with
SXTAB16: templates/helpers/pool_dsp.c.j2, kernels/pool_avg_s8_dsp.c.j2) vs TFLM: channel
counts not a multiple of 4 (the scalar tail), strides, SAME windows clipped at the borders,
batch > 1, fused activations, the largest window it takes (256 elements: the int16 halfwords'
bound, checked with all -128 and all 127 inputs) and the first one it leaves to the portable
kernel. On the host (plain-C stand-ins, UBSan, source proof) and in QEMU on mps2-an386 (M4) and
mps2-an500 (M7)."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import tflm_run
from test_dsp_kernels import DSP_BOARDS, check_dsp_board, check_dsp_target, dsp_target_run
from test_mve_pool import POOL_GEOMETRIES, _extremes
from test_pooling import pool_model

MARK = "eerie_pool_avg_s8_dsp(out0"


def _ids(geo):
    shape, filt, stride, padding = geo
    return f"{'x'.join(map(str, shape))}-f{filt[0]}x{filt[1]}-s{stride[0]}x{stride[1]}-{padding}"


@pytest.mark.parametrize("geo", POOL_GEOMETRIES, ids=_ids)
def test_avg_pool_dsp_host(tmp_path, geo):
    shape, filt, stride, padding = geo
    model = pool_model("AVERAGE_POOL_2D", "int8", shape, filt, stride, padding)
    check_dsp_target(tmp_path, model, shape, seed=shape[-1])
    assert MARK in (tmp_path / "build" / "m.c").read_text()


@pytest.mark.parametrize("act", ["RELU", "RELU6", "RELU_N1_TO_1"])
def test_avg_pool_dsp_activations(tmp_path, act):
    model = pool_model("AVERAGE_POOL_2D", "int8", [1, 6, 7, 11], (3, 3), (2, 2), "SAME", act,
                       qin=(0.03, -100))
    check_dsp_target(tmp_path, model, [1, 6, 7, 11])
    assert MARK in (tmp_path / "build" / "m.c").read_text()


@pytest.mark.parametrize("side,dsp", [(16, True), (17, False)], ids=["256-dsp", "289-portable"])
def test_avg_pool_dsp_window_bound(tmp_path, side, dsp):
    shape = [1, side, side, 10]
    model = pool_model("AVERAGE_POOL_2D", "int8", shape, (side, side), (1, 1), "VALID")
    xs = [_extremes(shape)]
    got = dsp_target_run(model, xs, tmp_path, need_dsp=dsp)
    assert (MARK in (tmp_path / "build" / "m.c").read_text()) == dsp
    np.testing.assert_array_equal(got[0], tflm_run(model, xs)[0])
    assert got[0][0].min() == -128 and got[0][1].max() == 127


@pytest.mark.usefixtures("board_tools")   # fails (never skips) without the tools
@pytest.mark.parametrize("board", sorted(DSP_BOARDS))
@pytest.mark.parametrize("case", ["odd-c3", "c20-same", "batch2-c13", "kws-global"])
def test_avg_pool_dsp_on_boards(tmp_path, board, case):
    """The same on the real SXTAB16 (QEMU mps2-an386 / mps2-an500), with a clamp."""
    shape, filt, stride, padding = POOL_GEOMETRIES[{"odd-c3": 0, "c20-same": 1, "batch2-c13": 2,
                                                    "kws-global": 4}[case]]
    model = pool_model("AVERAGE_POOL_2D", "int8", shape, filt, stride, padding, "RELU6",
                       qin=(0.03, -100))
    assert MARK in check_dsp_board(tmp_path, model, shape, board, seed=7, n=3)
