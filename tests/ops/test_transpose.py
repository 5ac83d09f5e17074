"""TRANSPOSE vs TFLM: ranks 1..5, int8 / int16 / float32 (int32, bool, int64, uint8 and 6-D vs
numpy: TFLM has none of them), NCHW<->NHWC, size-1 dims, permutations that only move size-1 dims (a copy), and
all 24 permutations of a 4-D tensor."""
import itertools

import numpy as np
import pytest

from conftest import assert_matches_tflm, eerie_run, random_inputs, tflm_run
from tflite_builder import ModelBuilder

Q = dict(scale=0.05, zero_point=-4)


def transpose_model(dtype, shape, perm):
    mb = ModelBuilder()
    q = Q if dtype == "int8" else {}
    x = mb.input(list(shape), dtype, **q)
    p = mb.const(np.array(perm, np.int32), "int32")
    y = mb.tensor([shape[k] for k in perm], dtype, **q)
    mb.op("TRANSPOSE", [x, p], [y], "TransposeOptions")
    mb.output(y)
    return mb.build()


def int_inputs(shape, n):
    return np.random.default_rng(3).integers(-1000, 1000, size=(n, *shape)).astype(np.int32)


CASES = [
    ((7,), (0,)),
    ((3, 5), (1, 0)),
    ((1, 3, 4, 5), (0, 2, 3, 1)),      # NCHW -> NHWC
    ((1, 4, 5, 3), (0, 3, 1, 2)),      # NHWC -> NCHW
    ((2, 3, 4, 5), (3, 1, 0, 2)),
    ((2, 1, 3, 1), (1, 0, 3, 2)),      # size-1 dims
    ((1, 1, 6, 1), (3, 2, 0, 1)),      # only size-1 dims move: a copy
    ((2, 3, 2, 2, 3), (4, 2, 0, 3, 1)),
    ((3, 1, 2, 1, 3), (4, 0, 3, 1, 2)),
]
RANK6 = ((2, 2, 3, 1, 2, 3), (5, 0, 4, 1, 3, 2))   # TFLM stops at 5-D


@pytest.mark.parametrize("dtype", ["int8", "int16", "float32"])
@pytest.mark.parametrize("shape,perm", CASES)
def test_transpose(tmp_path, dtype, shape, perm):
    model = transpose_model(dtype, shape, perm)
    assert_matches_tflm(model, [random_inputs(shape, dtype, 2)], tmp_path)


@pytest.mark.parametrize("dtype", ["int32", "float32", "int8"])
@pytest.mark.parametrize("shape,perm", [CASES[4], CASES[7], RANK6])
def test_transpose_vs_numpy(tmp_path, dtype, shape, perm):
    # TFLM's TRANSPOSE has no int32 kernel and no 6-D support: numpy is the reference here.
    xs = int_inputs(shape, 2).astype(dtype) if dtype != "float32" else random_inputs(shape, dtype, 2)
    got, _ = eerie_run(transpose_model(dtype, shape, perm), [xs], tmp_path)
    np.testing.assert_array_equal(got[0], np.transpose(xs, (0, *[p + 1 for p in perm])))


MOVE_ONLY = ["bool", "int64", "uint8"]


def test_transpose_other_dtypes_vs_numpy(tmp_path):
    """bool, int64, uint8: TFLM's TRANSPOSE refuses them (test_tflm_transpose_dtypes), numpy is
    the reference. One model: every dtype through the three cases above, each op on its own
    input."""
    mb = ModelBuilder()
    xs, perms = [], []
    rng = np.random.default_rng(5)
    for dtype in MOVE_ONLY:
        for shape, perm in (CASES[4], CASES[7], RANK6):
            x = mb.input(list(shape), dtype)
            y = mb.tensor([shape[k] for k in perm], dtype)
            mb.op("TRANSPOSE", [x, mb.const(np.array(perm, np.int32), "int32")], [y], "TransposeOptions")
            mb.output(y)
            info = np.iinfo(dtype) if dtype != "bool" else None
            xs.append(rng.integers(0, 2, (2, *shape)).astype(np.bool_) if info is None else
                      rng.integers(info.min, info.max, (2, *shape), endpoint=True).astype(dtype))
            perms.append(perm)
    got, _ = eerie_run(mb.build(), xs, tmp_path)
    assert len(got) == len(xs)
    for g, x, perm in zip(got, xs, perms):
        assert g.dtype == x.dtype
        np.testing.assert_array_equal(g, np.transpose(x, (0, *[p + 1 for p in perm])))


@pytest.mark.parametrize("dtype", MOVE_ONLY)
def test_tflm_transpose_dtypes(capfd, dtype):
    """Why the test above does not use TFLM."""
    shape, perm = CASES[4]
    x = np.zeros((1, *shape), dtype)
    with pytest.raises(RuntimeError):
        tflm_run(transpose_model(dtype, shape, perm), [x])
    assert "not supported by Transpose" in capfd.readouterr().err


def test_transpose_every_4d_permutation(tmp_path):
    for perm in itertools.permutations(range(4)):
        shape = (2, 3, 4, 5)
        model = transpose_model("float32", shape, perm)
        d = tmp_path / "".join(map(str, perm))
        d.mkdir()
        assert_matches_tflm(model, [random_inputs(shape, "float32", 1)], d)
