"""Found by the differential tester (campaign seed 1, case 545, docs/testing.md): a dilated
DEPTHWISE_CONV_2D (2x1 kernel, dilation 2, SAME) on a 1x1 image has every tap outside the
image, so each output is the bias alone. The float kernel still emitted the weights array and
the per-block input index, which gcc -Werror rejected as unused: an internal error
("stack bound: compiling m.c failed") for a valid model. Float and int8, checked against TFLM."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import assert_matches_tflm, random_inputs
from tflite_builder import ACT, PAD, ModelBuilder


def model(dtype: str, hw=(1, 1), c=3) -> bytes:
    rng = np.random.default_rng(545)
    q = dtype == "int8"
    mb = ModelBuilder()
    x = mb.input([1, *hw, c], dtype, **(dict(scale=0.05, zero_point=3) if q else {}))
    if q:
        w = mb.const(rng.integers(-127, 128, (1, 2, 1, c)), "int8", scale=[0.02] * c, zero_point=[0] * c, axis=3)
        b = mb.const(rng.integers(-500, 500, c), "int32", scale=[0.001] * c, zero_point=[0] * c)
    else:
        w = mb.const(rng.standard_normal((1, 2, 1, c)), "float32")
        b = mb.const(rng.standard_normal(c), "float32")
    y = mb.tensor([1, *hw, c], dtype, **(dict(scale=0.04, zero_point=-2) if q else {}))
    mb.op("DEPTHWISE_CONV_2D", [x, w, b], [y], "DepthwiseConv2DOptions", padding=PAD["SAME"], strideH=1,
          strideW=1, dilationHFactor=2, dilationWFactor=1, depthMultiplier=1,
          fusedActivationFunction=ACT["NONE"])
    mb.output(y)
    return mb.build()


@pytest.mark.parametrize("dtype", ["float32", "int8"])
@pytest.mark.parametrize("hw", [(1, 1), (1, 4)], ids=["1x1", "1x4"])
def test_depthwise_with_every_tap_outside_the_image(dtype, hw, tmp_path):
    got, ref = assert_matches_tflm(model(dtype, hw), [random_inputs([1, *hw, 3], dtype, 2, seed=1)], tmp_path)
    assert np.unique(got[0].reshape(-1, 3), axis=0).shape[0] == 1   # the bias alone, at every pixel
