"""Patch stages (patch/stage.py) against TFLM: a prefix of int8 CONV_2D / DEPTHWISE_CONV_2D run
tile by tile must give the very bytes the layer-by-layer kernels give, for every grid (even,
uneven, single rows or columns, one tile per output pixel), with SAME / VALID padding,
strides, dilation, per-tensor and per-channel weights, and with ops after the stage."""
import numpy as np
import pytest

from conftest import eerie_run, random_inputs, tflm_run
from patch_models import MOBILENET, ODD, chain_model


def _check(tmp_path, model, shape, patch, n=3, **kw):
    x = random_inputs(list(shape), "int8", n, seed=5)
    ref = tflm_run(model, [x])
    got, report = eerie_run(model, [x], tmp_path, patch=patch, **kw)
    assert np.abs(ref[0].astype(int)).max() < 128, "outputs all saturated: a weak test"
    np.testing.assert_array_equal(got[0], ref[0])
    return report


@pytest.mark.parametrize("layers, grid", [(4, (2, 2)), (4, (3, 4)), (4, (1, 5)), (4, (99, 99)),
                                          (2, (4, 3)), (3, (2, 1))])
def test_mobilenet_prefix_bit_exact(tmp_path, layers, grid):
    shape = (1, 19, 23, 3)
    report = _check(tmp_path, chain_model(shape, MOBILENET), shape, (layers, grid))
    chosen = report["patches"]["chosen"]
    assert chosen["layers"] == layers and report["patches"]["mode"] == "forced"
    assert report["ops"][0]["kind"] == "PATCH_STAGE"


@pytest.mark.parametrize("layers, grid", [(4, (2, 3)), (3, (5, 1)), (4, (1, 1))])
def test_valid_padding_dilation_strides_bit_exact(tmp_path, layers, grid):
    shape = (1, 21, 18, 4)
    _check(tmp_path, chain_model(shape, ODD, seed=3), shape, (layers, grid))


def test_ops_after_the_stage_run_as_before(tmp_path):
    shape = (1, 24, 20, 3)
    report = _check(tmp_path, chain_model(shape, MOBILENET, tail="pool"), shape, (4, (3, 2)))
    assert [o["kind"] for o in report["ops"]] == ["PATCH_STAGE", "AVERAGE_POOL_2D"]


def test_auto_chooses_a_stage_that_shrinks_the_arena(tmp_path):
    shape = (1, 64, 64, 3)
    report = _check(tmp_path, chain_model(shape, MOBILENET, tail="pool"), shape, "auto", n=2,
                    inputs_in_arena=True)
    p = report["patches"]
    assert p["chosen"] is not None, p
    assert p["arena_bytes_after"] == report["arena_bytes"] < p["arena_bytes_before"]
    assert p["chosen"]["extra_macs"] * 100 <= 20 * p["model_macs_before"]
    assert any(v["check"] == "patch_plan" and v["ok"] for v in report["verified"])


def test_recompute_bound_zero_means_no_patches(tmp_path):
    shape = (1, 64, 64, 3)
    report = _check(tmp_path, chain_model(shape, MOBILENET, tail="pool"), shape, "auto", n=1,
                    max_recompute=0)
    assert report["patches"]["chosen"] is None
    assert all(o["kind"] != "PATCH_STAGE" for o in report["ops"])
