"""Found by the differential tester (campaign seed 1, case 545, docs/testing.md): a dilated
DEPTHWISE_CONV_2D (2x1 kernel, dilation 2, SAME) on a 1x1 image has every tap outside the
image, so each output is the bias alone. The float kernel still emitted the weights array and
the per-block input index, which gcc -Werror rejected as unused: an internal error
("stack bound: compiling m.c failed") for a valid model. Float and int8, checked against TFLM.

Campaign seed 20261129 (cases 371 and 1271) found the transposed case: a 1x2 kernel dilated
along W on a 1-pixel-wide image left the float kernel's per-row weight declaration empty
(`const float` and nothing after it) when the kernel rows had taps and the columns none."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import assert_matches_tflm, random_inputs
from tflite_builder import ACT, PAD, ModelBuilder


def kshape(along: str, c: int) -> tuple:
    """A two-tap depthwise kernel along H (2x1) or W (1x2)."""
    return (1, 2, 1, c) if along == "H" else (1, 1, 2, c)


def model(dtype: str, hw=(1, 1), c=3, along="H") -> bytes:
    rng = np.random.default_rng(545)
    q = dtype == "int8"
    mb = ModelBuilder()
    x = mb.input([1, *hw, c], dtype, **(dict(scale=0.05, zero_point=3) if q else {}))
    if q:
        w = mb.const(rng.integers(-127, 128, kshape(along, c)), "int8", scale=[0.02] * c, zero_point=[0] * c, axis=3)
        b = mb.const(rng.integers(-500, 500, c), "int32", scale=[0.001] * c, zero_point=[0] * c)
    else:
        w = mb.const(rng.standard_normal(kshape(along, c)), "float32")
        b = mb.const(rng.standard_normal(c), "float32")
    y = mb.tensor([1, *hw, c], dtype, **(dict(scale=0.04, zero_point=-2) if q else {}))
    mb.op("DEPTHWISE_CONV_2D", [x, w, b], [y], "DepthwiseConv2DOptions", padding=PAD["SAME"], strideH=1,
          strideW=1, dilationHFactor=2 if along == "H" else 1,
          dilationWFactor=2 if along == "W" else 1, depthMultiplier=1,
          fusedActivationFunction=ACT["NONE"])
    mb.output(y)
    return mb.build()


@pytest.mark.parametrize("dtype", ["float32", "int8"])
@pytest.mark.parametrize("hw,along", [((1, 1), "H"), ((1, 4), "H"), ((1, 1), "W"), ((4, 1), "W")],
                         ids=["1x1-H", "1x4-H", "1x1-W", "4x1-W"])
def test_depthwise_with_every_tap_outside_the_image(dtype, hw, along, tmp_path):
    got, ref = assert_matches_tflm(model(dtype, hw, along=along),
                                   [random_inputs([1, *hw, 3], dtype, 2, seed=1)], tmp_path)
    assert np.unique(got[0].reshape(-1, 3), axis=0).shape[0] == 1   # the bias alone, at every pixel
