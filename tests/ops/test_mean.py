"""MEAN vs TFLM: axes (negative, duplicated, 4D [1, 2] special case), keep_dims, int8 with the
same and with different input/output quantization (bit-exact), float32."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, random_inputs
from tflite_builder import ModelBuilder


def reduced_shape(shape, axes, keep):
    ax = {a % len(shape) for a in axes}
    if keep:
        return [1 if i in ax else d for i, d in enumerate(shape)]
    return [d for i, d in enumerate(shape) if i not in ax]


def mean_model(dtype, shape, axes, keep, qin=(0.05, -3), qout=None):
    mb = ModelBuilder()
    oshape = reduced_shape(shape, axes, keep)
    if dtype in ("int8", "int16"):
        qout = qout or qin
        x = mb.input(shape, dtype, scale=qin[0], zero_point=qin[1])
        y = mb.tensor(oshape, dtype, scale=qout[0], zero_point=qout[1])
    else:
        x = mb.input(shape, "float32")
        y = mb.tensor(oshape, "float32")
    ax = mb.const(np.array(axes, np.int32), "int32")
    mb.op("MEAN", [x, ax], [y], "ReducerOptions", keepDims=keep)
    mb.output(y)
    return mb.build()


CASES = [
    # shape, axes
    ([1, 6, 5, 4], [1, 2]),      # global average pool, TFLM's former special case
    ([2, 4, 3, 5], [2, 1]),
    ([2, 3, 4, 5], [-1]),
    ([2, 3, 4, 5], [0, 2]),
    ([3, 7], [0]),
    ([3, 7], [-1, 1]),           # duplicated axis
    ([4, 2, 6], [1]),
    ([5, 1, 8], [2, 1]),         # a size-1 reduced axis
    ([1, 4, 4, 6], [-3, -2]),    # H and W by negative axes: not the [1, 2] special case in TFLM
    ([2, 3, 5, 2], [1, 2, 2]),   # H and W with a repeat
    ([2, 3, 4, 5], [1, 2, 3]),   # three axes
    ([2, 3, 4], [0, 1, 2]),      # everything: one output
    ([2, 2, 3, 2, 3], [1, 3]),   # 5D, separated axes
]

QUANTS = {
    "same": ((0.05, -3), None),
    "scale": ((0.05, -3), (0.02, -3)),       # requantized, the multiplier > 1
    "zp": ((0.05, -3), (0.05, 7)),
    "both": ((0.1, 12), (0.7, -20)),
}


@pytest.mark.parametrize("keep", [True, False])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_mean_float(tmp_path, case, keep):
    shape, axes = CASES[case]
    assert_matches_tflm(mean_model("float32", shape, axes, keep),
                        [random_inputs(shape, "float32", 3, seed=case)], tmp_path)


@pytest.mark.parametrize("quant", sorted(QUANTS))
@pytest.mark.parametrize("keep", [True, False])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_mean_int8(tmp_path, case, keep, quant):
    shape, axes = CASES[case]
    qin, qout = QUANTS[quant]
    assert_matches_tflm(mean_model("int8", shape, axes, keep, qin, qout),
                        [random_inputs(shape, "int8", 3, seed=case)], tmp_path)


def test_mean_int8_same_quant_still_requantizes(tmp_path):
    """Even with identical quantization TFLM requantizes (no truncating division): with
    count 4 the multiplier becomes 2^30 * 2^-1, and the double rounding sends the exact mean
    -0.75 (in the zp-shifted domain 2.25) to 0."""
    model = mean_model("int8", [1, 2, 2, 1], [1, 2], True)
    x = np.array([[-1, -1, -1, 0], [1, 1, 1, 0], [-128, -128, -128, -127]], np.int8).reshape(3, 1, 2, 2, 1)
    got, _ = assert_matches_tflm(model, [x], tmp_path)
    assert got[0].reshape(-1).tolist() == [0, 1, -128]


@pytest.mark.parametrize("case,quant", [(0, ((0.001, 0), None)), (3, ((0.001, 0), (0.0004, 0))),
                                        (10, ((0.002, 0), (0.003, 0))), (12, ((0.001, 5), (0.002, -9)))])
def test_mean_int16(tmp_path, case, quant):
    """int16: TFLM's int8 path (QuantizedMeanOrSum) on int16 values, full-range inputs."""
    shape, axes = CASES[case]
    qin, qout = quant
    assert_matches_tflm(mean_model("int16", shape, axes, True, qin, qout),
                        [random_inputs(shape, "int16", 3, seed=case)], tmp_path)
