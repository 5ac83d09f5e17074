"""PAD / PADV2 vs TFLM: image-style and arbitrary paddings, 1D..5D, int8 (pad = output zero
point), float32 (pad = 0), PADV2 constant values, int32 (PAD and PADV2)."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, random_inputs
from tflite_builder import ModelBuilder

from eerie_c.api import compile_model
from eerie_c.errors import EerieError


def pad_model(dtype, shape, pads, value=None, value_quant=None):
    mb = ModelBuilder()
    oshape = [d + lo + hi for d, (lo, hi) in zip(shape, pads)]
    q = dict(scale=0.05, zero_point=-9) if dtype == "int8" else {}
    x = mb.input(shape, dtype, **q)
    y = mb.tensor(oshape, dtype, **q)
    p = mb.const(np.array(pads, np.int32).reshape(len(shape), 2), "int32")
    if value is None:
        mb.op("PAD", [x, p], [y], "PadOptions")
    else:
        vq = value_quant if value_quant is not None else q
        c = mb.const(np.array(value).reshape(()), dtype, **vq)
        mb.op("PADV2", [x, p, c], [y], "PadV2Options")
    mb.output(y)
    return mb.build()


CASES = [
    ([1, 5, 6, 3], [[0, 0], [1, 2], [2, 1], [0, 0]]),    # image style (NHWC, H and W only)
    ([2, 3, 4, 5], [[1, 0], [0, 1], [2, 0], [1, 3]]),    # every dimension, batch and channels too
    ([2, 3, 4, 5], [[0, 0], [0, 0], [0, 0], [2, 1]]),    # channels only
    ([1, 4, 4, 2], [[0, 0], [0, 0], [0, 0], [0, 0]]),    # nothing to pad
    ([7], [[3, 2]]),
    ([3, 4], [[0, 2], [1, 0]]),
    ([2, 3, 4], [[1, 1], [0, 0], [2, 2]]),
    ([2, 1, 3, 2, 2], [[0, 1], [1, 0], [0, 0], [1, 1], [0, 2]]),   # 5D
]


@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_pad(tmp_path, dtype, case):
    shape, pads = CASES[case]
    assert_matches_tflm(pad_model(dtype, shape, pads), [random_inputs(shape, dtype, 3, seed=case)], tmp_path)


def test_pad_int8_uses_output_zero_point(tmp_path):
    got, _ = assert_matches_tflm(pad_model("int8", [1, 2, 2, 1], [[0, 0], [1, 0], [0, 0], [0, 0]]),
                                 [np.full((1, 1, 2, 2, 1), 5, np.int8)], tmp_path)
    assert got[0].reshape(-1).tolist() == [-9, -9, 5, 5, 5, 5]


@pytest.mark.parametrize("dtype,value", [("int8", -100), ("float32", 2.5)])
def test_padv2_constant(tmp_path, dtype, value):
    shape, pads = CASES[1]
    got, _ = assert_matches_tflm(pad_model(dtype, shape, pads, value),
                                 [random_inputs(shape, dtype, 2)], tmp_path)
    assert got[0][0, 0, 0, 0, 0] == value


@pytest.mark.parametrize("value", [None, -123456789], ids=["PAD", "PADV2"])
def test_pad_int32(tmp_path, value):
    shape, pads = CASES[1]
    x = np.random.default_rng(0).integers(-10**6, 10**6, (2, *shape)).astype(np.int32)
    got, _ = assert_matches_tflm(pad_model("int32", shape, pads, value), [x], tmp_path)
    assert got[0][0, 0, 0, 0, 0] == (value or 0)


def test_padv2_int8_value_needs_output_quantization(tmp_path):
    p = tmp_path / "m.tflite"
    p.write_bytes(pad_model("int8", [1, 3, 3, 1], [[0, 0], [1, 1], [1, 1], [0, 0]], 4,
                            value_quant=dict(scale=0.1, zero_point=0)))
    with pytest.raises(EerieError, match="output's quantization"):
        compile_model(p)
