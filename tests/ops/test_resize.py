"""RESIZE_NEAREST_NEIGHBOR (float32, int8, int16) and RESIZE_BILINEAR (float32; int8 on
TFLM's integer-only path) vs TFLM: up- and down-scaling, non-integer ratios, align_corners,
half_pixel_centers, size 1."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, random_inputs
from tflite_builder import ModelBuilder

Q = {"int8": dict(scale=0.05, zero_point=-4), "int16": dict(scale=0.01, zero_point=0)}

SIZES = [((1, 4, 5, 3), (8, 10)), ((2, 5, 7, 2), (3, 4)), ((1, 3, 3, 1), (7, 5)), ((1, 4, 4, 2), (1, 1))]
MODES = [(False, False), (True, False), (False, True)]


def model(kind, dtype, shape, size, ac, hp):
    mb = ModelBuilder()
    q = Q.get(dtype, {})
    x = mb.input(list(shape), dtype, **q)
    y = mb.tensor([shape[0], size[0], size[1], shape[3]], dtype, **q)
    opts = "ResizeBilinearOptions" if kind == "RESIZE_BILINEAR" else "ResizeNearestNeighborOptions"
    mb.op(kind, [x, mb.const(np.array(size, np.int32), "int32")], [y], opts, alignCorners=ac,
          halfPixelCenters=hp)
    mb.output(y)
    return mb.build()


@pytest.mark.parametrize("kind", ["RESIZE_NEAREST_NEIGHBOR", "RESIZE_BILINEAR"])
@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("case", SIZES)
@pytest.mark.parametrize("mode", MODES)
def test_resize(tmp_path, kind, dtype, case, mode):
    shape, size = case
    assert_matches_tflm(model(kind, dtype, shape, size, *mode), [random_inputs(shape, dtype, 2)], tmp_path)


@pytest.mark.parametrize("mode", MODES)
def test_resize_nearest_int16(tmp_path, mode):
    shape = (1, 3, 5, 2)
    assert_matches_tflm(model("RESIZE_NEAREST_NEIGHBOR", "int16", shape, (7, 3), *mode),
                        [random_inputs(shape, "int16", 2)], tmp_path)


def test_resize_bilinear_int8_extremes(tmp_path):
    """All +127 / -128 inputs: the widest sums, rounding of negative values."""
    shape = (1, 3, 4, 2)
    xs = random_inputs(shape, "int8", 3)
    xs[0] = 127
    xs[1] = -128
    assert_matches_tflm(model("RESIZE_BILINEAR", "int8", shape, (7, 9), False, True), [xs], tmp_path)
