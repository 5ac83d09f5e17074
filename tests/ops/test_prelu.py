"""PRELU vs TFLM: int8 (all 256 input values against every alpha value, constant per-channel
alpha, activation alpha), float32 with broadcasting."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, random_inputs
from tflite_builder import ModelBuilder


def prelu_model(x_shape, a_shape, dtype, alpha=None, q=((0.05, -3), (0.01, 4), (0.04, 7))):
    mb = ModelBuilder()
    qs = [dict(scale=s, zero_point=z) for s, z in q] if dtype == "int8" else [{}, {}, {}]
    x = mb.input(x_shape, dtype, **qs[0])
    a = mb.const(alpha, dtype, **qs[1]) if alpha is not None else mb.input(a_shape, dtype, **qs[1])
    y = mb.tensor(x_shape, dtype, **qs[2])
    mb.op("PRELU", [x, a], [y])
    mb.output(y)
    return mb.build()


@pytest.mark.parametrize("q", [((0.05, -3), (0.01, 4), (0.04, 7)), ((0.1, 0), (0.003, -128), (0.2, -20)),
                               ((0.02, 100), (0.05, 0), (0.01, -100))])
def test_prelu_int8_all_pairs(tmp_path, q):
    x = np.repeat(np.arange(-128, 128, dtype=np.int8), 256).reshape(1, 256, 256)
    a = np.tile(np.arange(-128, 128, dtype=np.int8), 256).reshape(1, 256, 256)
    assert_matches_tflm(prelu_model([256, 256], [256, 256], "int8", q=q), [x, a], tmp_path)


def test_prelu_int8_const_channel_alpha(tmp_path):
    alpha = np.random.default_rng(0).integers(-128, 128, (1, 1, 6))
    model = prelu_model([2, 4, 5, 6], None, "int8", alpha=alpha)
    assert_matches_tflm(model, [random_inputs([2, 4, 5, 6], "int8", 3, seed=1)], tmp_path)


def test_prelu_float(tmp_path):
    alpha = np.random.default_rng(0).uniform(-0.5, 0.5, (1, 1, 6)).astype(np.float32)
    model = prelu_model([2, 4, 5, 6], None, "float32", alpha=alpha)
    assert_matches_tflm(model, [random_inputs([2, 4, 5, 6], "float32", 3, seed=1)], tmp_path)
    model = prelu_model([3, 7], [7], "float32")
    assert_matches_tflm(model, [random_inputs([3, 7], "float32", 3, seed=2),
                                random_inputs([7], "float32", 3, seed=3)], tmp_path)
