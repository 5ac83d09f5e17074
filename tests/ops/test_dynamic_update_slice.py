"""DYNAMIC_UPDATE_SLICE vs TFLM: float32, int8, int16, int32 operands; int32 and int64 start
indices read at run time (in range, negative and too large: clamped as TFLM does) or
constant; an update covering the whole operand; batch > 1 and odd shapes."""
import numpy as np
import pytest

from conftest import assert_matches_tflm
from tflite_builder import ModelBuilder

CASES = [([2, 5, 4], [1, 3, 4]), ([3, 7], [2, 2]), ([4, 3, 2, 5], [2, 1, 2, 3]), ([6], [6])]
STARTS = {3: [[1, 2, 0], [-4, 9, 1], [0, 1, 0]], 2: [[1, 3], [5, -1], [0, 0]],
          4: [[1, 1, 0, 2], [3, 9, -2, 1], [0, 0, 0, 0]], 1: [[0], [3], [-1]]}


def dus_model(dtype, idx_dtype, const_idx=None):
    mb = ModelBuilder()
    q = {"int8": dict(scale=0.1, zero_point=-2), "int16": dict(scale=0.01, zero_point=0)}.get(dtype, {})
    for shape, ushape in CASES:
        x, u = mb.input(shape, dtype, **q), mb.input(ushape, dtype, **q)
        if const_idx is not None:
            s = mb.const(np.array(STARTS[len(shape)][const_idx], idx_dtype), idx_dtype)
        else:
            s = mb.input([len(shape)], idx_dtype)
        y = mb.tensor(shape, dtype, **q)
        mb.op("DYNAMIC_UPDATE_SLICE", [x, u, s], [y])
        mb.output(y)
    return mb.build()


def values(shape, dtype, rng):
    if dtype == "float32":
        return rng.standard_normal((3, *shape)).astype(np.float32)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -10**6), min(info.max, 10**6), (3, *shape)).astype(dtype)


@pytest.mark.parametrize("dtype,idx_dtype", [("float32", "int32"), ("int8", "int64"),
                                             ("int16", "int32"), ("int32", "int64")])
def test_dynamic_update_slice(tmp_path, dtype, idx_dtype):
    rng = np.random.default_rng(0)
    feeds = []
    for shape, ushape in CASES:
        feeds += [values(shape, dtype, rng), values(ushape, dtype, rng),
                  np.array(STARTS[len(shape)], idx_dtype)]
    assert_matches_tflm(dus_model(dtype, idx_dtype), feeds, tmp_path)


@pytest.mark.parametrize("which", [0, 1])
def test_constant_starts(tmp_path, which):
    rng = np.random.default_rng(1)
    feeds = []
    for shape, ushape in CASES:
        feeds += [values(shape, "float32", rng), values(ushape, "float32", rng)]
    assert_matches_tflm(dus_model("float32", "int32", which), feeds, tmp_path)
