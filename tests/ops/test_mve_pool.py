"""The int8 AVERAGE_POOL_2D generated for cortex-m55 (Helium window sums, 8 channels per
int16 vector: templates/helpers/pool_mve.c.j2, kernels/pool_avg_s8_mve.c.j2) vs TFLM: odd
channel counts (predicated last group), strides, SAME windows clipped at the borders, batch
> 1, fused activations, the largest window it takes (256 elements: the int16 lanes' bound,
checked with all -128 and all 127 inputs) and the first one it leaves to the portable kernel.
On the host (plain-C stand-ins, UBSan, source proof) and in QEMU on mps3-an547."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import random_inputs, tflm_run
from eerie_c.api import compile_model, run_model
from test_mve_kernels import TARGET, check_host, mve_host_run
from test_pooling import pool_model

MARK = ("eerie_vpool_sum_s8(sums",)

POOL_GEOMETRIES = [
    # shape, filter, stride, padding
    ([1, 8, 8, 3], (2, 2), (2, 2), "VALID"),       # 3 channels: one predicated group
    ([1, 7, 9, 20], (3, 3), (2, 2), "SAME"),       # clipped windows on both borders, 8 + 8 + 4
    ([2, 5, 6, 13], (3, 2), (1, 2), "SAME"),       # batch 2, rectangular filter and stride
    ([1, 9, 7, 16], (4, 3), (3, 1), "VALID"),
    ([1, 25, 5, 64], (25, 5), (1, 1), "VALID"),    # kws_ref_model's global pool
    ([1, 4, 5, 9], (5, 5), (2, 3), "SAME"),        # filter larger than the input
]


@pytest.mark.parametrize("geo", range(len(POOL_GEOMETRIES)))
def test_avg_pool_mve_host(tmp_path, geo):
    shape, filt, stride, padding = POOL_GEOMETRIES[geo]
    model = pool_model("AVERAGE_POOL_2D", "int8", shape, filt, stride, padding)
    check_host(tmp_path, model, shape, MARK, seed=geo)


@pytest.mark.parametrize("act", ["RELU", "RELU6", "RELU_N1_TO_1"])
def test_avg_pool_mve_activations(tmp_path, act):
    model = pool_model("AVERAGE_POOL_2D", "int8", [1, 6, 7, 11], (3, 3), (2, 2), "SAME", act,
                       qin=(0.03, -100))
    check_host(tmp_path, model, [1, 6, 7, 11], MARK)


def _extremes(shape):
    """All -128, all 127, then random: the sums at the int16 lanes' limits."""
    return np.concatenate([np.full((1, *shape), -128, np.int8), np.full((1, *shape), 127, np.int8),
                           random_inputs(shape, "int8", 1, seed=3)])


@pytest.mark.parametrize("side,mve", [(16, True), (17, False)], ids=["256-mve", "289-portable"])
def test_avg_pool_mve_window_bound(tmp_path, side, mve):
    shape = [1, side, side, 10]
    model = pool_model("AVERAGE_POOL_2D", "int8", shape, (side, side), (1, 1), "VALID")
    xs = [_extremes(shape)]
    got = mve_host_run(model, xs, tmp_path, MARK if mve else ())
    if not mve:
        assert MARK[0] not in (tmp_path / "build" / "m.c").read_text()
    np.testing.assert_array_equal(got[0], tflm_run(model, xs)[0])
    assert got[0][0].min() == -128 and got[0][1].max() == 127


@pytest.mark.usefixtures("board_tools")   # fails (never skips) without the tools
@pytest.mark.parametrize("case", ["odd-c3", "c20-same", "batch2-c13", "kws-global", "window-256"])
def test_avg_pool_mve_on_cortex_m55(tmp_path, case):
    """The same on the real MVE instructions (QEMU mps3-an547, Cortex-M55)."""
    if case == "window-256":
        shape, filt, stride, padding = [1, 16, 16, 10], (16, 16), (1, 1), "VALID"
    else:
        shape, filt, stride, padding = POOL_GEOMETRIES[{"odd-c3": 0, "c20-same": 1, "batch2-c13": 2,
                                                        "kws-global": 4}[case]]
    model = pool_model("AVERAGE_POOL_2D", "int8", shape, filt, stride, padding, "RELU6",
                       qin=(0.03, -100))
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    xs = [_extremes(shape)]
    got, rep = run_model(p, xs, board="mps3-an547")
    assert rep["target"] == TARGET
    assert MARK[0] in compile_model(p, target=TARGET, name="m").files["m.c"]
    np.testing.assert_array_equal(got[0], tflm_run(model, xs)[0])
