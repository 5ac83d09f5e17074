"""SOFTMAX vs TFLM: int8 (bit-exact) with several input scales, beta 1.0 / 0.5, outer size > 1,
rows of length 1, 12 and 100, int16 output; float32."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, random_inputs
from tflite_builder import ModelBuilder


def softmax_model(shape, dtype, beta, scale=0.1, zero_point=0, out_dtype=None):
    mb = ModelBuilder()
    out_dtype = out_dtype or dtype
    if dtype == "int8":
        x = mb.input(shape, "int8", scale=scale, zero_point=zero_point)
        if out_dtype == "int8":
            y = mb.tensor(shape, "int8", scale=1.0 / 256, zero_point=-128)
        else:
            y = mb.tensor(shape, "int16", scale=1.0 / 65536, zero_point=-32768)
    else:
        x = mb.input(shape, "float32")
        y = mb.tensor(shape, "float32")
    mb.op("SOFTMAX", [x], [y], "SoftmaxOptions", beta=beta)
    mb.output(y)
    return mb.build()


@pytest.mark.parametrize("beta", [1.0, 0.5])
@pytest.mark.parametrize("scale,zero_point", [(0.1, 0), (0.0390625, -12), (0.25, 7), (0.9, -128)])
def test_softmax_int8_scales(tmp_path, scale, zero_point, beta):
    shape = [3, 12]
    model = softmax_model(shape, "int8", beta, scale, zero_point)
    assert_matches_tflm(model, [random_inputs(shape, "int8", 6, seed=int(scale * 1000))], tmp_path)


@pytest.mark.parametrize("shape", [[1, 1], [4, 1], [1, 12], [2, 3, 12], [2, 100], [1, 1, 1, 100]])
def test_softmax_int8_shapes(tmp_path, shape):
    model = softmax_model(shape, "int8", 1.0, 0.0625, 3)
    assert_matches_tflm(model, [random_inputs(shape, "int8", 5, seed=len(shape))], tmp_path)


def test_softmax_int8_peaked_and_flat_rows(tmp_path):
    """Rows where one value dominates (most diffs below diff_min) and rows that are constant."""
    shape = [4, 100]
    rng = np.random.default_rng(3)
    xs = rng.integers(-128, -100, size=(4, *shape)).astype(np.int8)
    xs[:, :, 7] = 127                       # a clear winner per row
    xs[1] = 5                               # an all-equal sample
    xs[2, 0] = -128
    model = softmax_model(shape, "int8", 1.0, 0.5, 0)
    assert_matches_tflm(model, [xs], tmp_path)


def test_softmax_int8_small_scale(tmp_path):
    """A small input scale: every diff is inside diff_min and the exps are all close to 1."""
    shape = [2, 100]
    model = softmax_model(shape, "int8", 0.5, 0.004, -3)
    assert_matches_tflm(model, [random_inputs(shape, "int8", 5, seed=9)], tmp_path)


def test_softmax_int8_to_int16(tmp_path):
    shape = [3, 12]
    model = softmax_model(shape, "int8", 1.0, 0.1, 0, out_dtype="int16")
    assert_matches_tflm(model, [random_inputs(shape, "int8", 5, seed=4)], tmp_path)


@pytest.mark.parametrize("beta", [1.0, 0.5])
@pytest.mark.parametrize("shape", [[1, 1], [3, 12], [2, 100], [2, 2, 5]])
def test_softmax_float(tmp_path, shape, beta):
    model = softmax_model(shape, "float32", beta)
    assert_matches_tflm(model, [random_inputs(shape, "float32", 5, seed=1, scale=4.0)], tmp_path)
