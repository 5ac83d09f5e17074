"""LOGISTIC / TANH vs TFLM: int8 over all 256 input values for several input scales and zero
points (bit-exact), other shapes, TFLM's output quantization rules; float32."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, eerie_run, random_inputs
from eerie_c.errors import EerieError
from tflite_builder import ModelBuilder

OUT_QUANT = {"LOGISTIC": (1.0 / 256, -128), "TANH": (1.0 / 128, 0)}


def act_model(kind, shape, dtype, scale=0.1, zero_point=0, out_quant=None):
    mb = ModelBuilder()
    if dtype == "int8":
        x = mb.input(shape, "int8", scale=scale, zero_point=zero_point)
        oscale, ozp = out_quant or OUT_QUANT[kind]
        y = mb.tensor(shape, "int8", scale=oscale, zero_point=ozp)
    else:
        x = mb.input(shape, "float32")
        y = mb.tensor(shape, "float32")
    mb.op(kind, [x], [y])
    mb.output(y)
    return mb.build()


def all_int8_values(n=1):
    return np.tile(np.arange(-128, 128, dtype=np.int8).reshape(1, 1, 256), (n, 1, 1))


@pytest.mark.parametrize("kind", ["LOGISTIC", "TANH"])
@pytest.mark.parametrize("scale,zero_point", [
    (0.1, 0), (0.0625, 0), (0.05, -20), (0.5, 10), (0.0123, -128), (0.37, 127),
    (0.002, 5), (1.7, 0), (0.125, 3), (0.0078125, -1),
])
def test_int8_all_inputs(tmp_path, kind, scale, zero_point):
    model = act_model(kind, [1, 256], "int8", scale, zero_point)
    assert_matches_tflm(model, [all_int8_values()], tmp_path)


@pytest.mark.parametrize("kind", ["LOGISTIC", "TANH"])
def test_int8_4d(tmp_path, kind):
    shape = [2, 3, 5, 7]
    model = act_model(kind, shape, "int8", 0.08, -9)
    assert_matches_tflm(model, [random_inputs(shape, "int8", 4, seed=2)], tmp_path)


def test_tanh_int8_ignores_output_quant(tmp_path):
    """TFLM's int8 TANH writes 1/128 units with zero point 0 whatever the output tensor says."""
    model = act_model("TANH", [1, 256], "int8", 0.1, 0, out_quant=(0.01, 5))
    assert_matches_tflm(model, [all_int8_values()], tmp_path)


def test_logistic_int8_other_output_scale(tmp_path):
    """Only the output zero point is checked by TFLM; the values are 1/256 units regardless."""
    model = act_model("LOGISTIC", [1, 256], "int8", 0.1, 0, out_quant=(0.01, -128))
    assert_matches_tflm(model, [all_int8_values()], tmp_path)


def test_logistic_int8_bad_output_zero_point(tmp_path):
    model = act_model("LOGISTIC", [1, 256], "int8", 0.1, 0, out_quant=(1.0 / 256, 0))
    with pytest.raises(EerieError, match="zero point -128"):
        eerie_run(model, [all_int8_values()], tmp_path)


@pytest.mark.parametrize("kind", ["LOGISTIC", "TANH"])
@pytest.mark.parametrize("shape", [[1, 256], [2, 3, 4, 5]])
def test_float(tmp_path, kind, shape):
    # scale 8 reaches the logistic cut-offs (-9, 16.6) and tanh saturation
    xs = random_inputs(shape, "float32", 4, seed=5, scale=8.0)
    xs[0].reshape(-1)[:4] = [0.0, -20.0, 20.0, -9.5]
    assert_matches_tflm(act_model(kind, shape, "float32"), [xs], tmp_path)
