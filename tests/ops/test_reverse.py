"""REVERSE_V2 vs TFLM: every dtype TFLM runs, one axis (first, middle, last, negative) and
contiguous runs of axes, odd shapes and batch > 1."""
import numpy as np
import pytest

from conftest import assert_matches_tflm
from tflite_builder import ModelBuilder

CASES = [([2, 3, 5], [0]), ([2, 3, 5], [1]), ([2, 3, 5], [-1]), ([3, 4, 2, 3], [1, 2]),
         ([3, 4, 2, 3], [2, 3]), ([2, 3, 4], [0, 1, 2]), ([7], [0]), ([2, 1, 3, 1, 2], [3, 1, 2])]


def reverse_model(dtype, cases):
    mb = ModelBuilder()
    q = {"int8": dict(scale=0.1, zero_point=-3), "uint8": dict(scale=0.1, zero_point=128),
         "int16": dict(scale=0.1, zero_point=0)}.get(dtype, {})
    for shape, axes in cases:
        x = mb.input(shape, dtype, **q)
        y = mb.tensor(shape, dtype, **q)
        mb.op("REVERSE_V2", [x, mb.const(np.array(axes, np.int32), "int32")], [y], "ReverseV2Options")
        mb.output(y)
    return mb.build()


def values(shape, dtype, rng):
    if dtype == "float32":
        return rng.standard_normal((2, *shape)).astype(np.float32)
    if dtype == "bool":
        return rng.integers(0, 2, (2, *shape)).astype(np.bool_)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -10**9), min(info.max, 10**9), (2, *shape)).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "int8", "uint8", "int16", "int32", "int64", "bool"])
def test_reverse(tmp_path, dtype):
    rng = np.random.default_rng(1)
    cases = CASES if dtype in ("float32", "int8") else CASES[2:5]
    got, _ = assert_matches_tflm(reverse_model(dtype, cases),
                                 [values(s, dtype, rng) for s, _ in cases], tmp_path)
