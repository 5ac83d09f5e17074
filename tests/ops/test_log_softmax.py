"""int8 LOG_SOFTMAX vs TFLM, bit-exact: several input scales (small / large left shifts and
diff_min), row lengths, flat rows, rows where most elements fall below the threshold, all
256 input values; the required output quantization (16/256, 127) is enforced."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, eerie_run, random_inputs
from eerie_c.errors import EerieError
from tflite_builder import ModelBuilder


def log_softmax8(shape, in_scale, in_zp=0, out_scale=16 / 256, out_zp=127):
    mb = ModelBuilder()
    x = mb.input(shape, "int8", scale=in_scale, zero_point=in_zp)
    y = mb.tensor(shape, "int8", scale=out_scale, zero_point=out_zp)
    mb.op("LOG_SOFTMAX", [x], [y], "LogSoftmaxOptions")
    mb.output(y)
    return mb.build()


@pytest.mark.parametrize("in_scale", [0.1, 1 / 16, 0.02, 0.5, 3e-4, 2.0])
def test_log_softmax_int8_scales(tmp_path, in_scale):
    model = log_softmax8([3, 12], in_scale, in_zp=-5)
    x = random_inputs([3, 12], "int8", 4, seed=int(in_scale * 1000))
    x[0, 1, :] = 17                      # flat row
    x[1, 2, :] = -128
    x[1, 2, 5] = 127                     # one dominant element, the rest far below
    assert_matches_tflm(model, [x], tmp_path)


@pytest.mark.parametrize("shape", [[1, 1], [2, 5], [1, 3, 7], [1, 256], [2, 1000]])
def test_log_softmax_int8_shapes(tmp_path, shape):
    model = log_softmax8(shape, 0.08, in_zp=3)
    assert_matches_tflm(model, [random_inputs(shape, "int8", 3, seed=len(shape))], tmp_path)


def test_log_softmax_int8_every_difference(tmp_path):
    """Rows containing every int8 value, so every diff 0 .. -255 is rescaled, at a scale where
    the threshold cuts the row."""
    row = np.arange(-128, 128, dtype=np.int8)
    x = np.stack([row, row[::-1], np.roll(row, 100)]).reshape(3, 1, 256)
    for scale in (0.05, 0.25):
        assert_matches_tflm(log_softmax8([1, 256], scale), [x], tmp_path)


def test_log_softmax_int8_rejects_output_quantization(tmp_path):
    model = log_softmax8([1, 4], 0.1, out_scale=1 / 256, out_zp=-128)
    with pytest.raises(EerieError, match="16/256"):
        eerie_run(model, [random_inputs([1, 4], "int8", 1)], tmp_path)
