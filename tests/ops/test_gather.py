"""GATHER (axis, negative axis, batch_dims; indices as activation or constant; params as
activation or constant table) and GATHER_ND vs TFLM, float32 and int8. Out-of-range run-time
indices (TFLM fails the invoke) give real 0 for the selected slice: checked with numpy."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, eerie_run, random_inputs
from tflite_builder import ModelBuilder

Q = dict(scale=0.05, zero_point=-4)


def gather_model(dtype, pshape, ishape, axis, bd, const_idx=None, const_params=None):
    mb = ModelBuilder()
    q = Q if dtype == "int8" else {}
    x = mb.const(const_params, dtype, **q) if const_params is not None else mb.input(list(pshape), dtype, **q)
    i = mb.const(const_idx, "int32") if const_idx is not None else mb.input(list(ishape), "int32")
    a = axis % len(pshape)
    out = list(pshape[:a]) + list(ishape[bd:]) + list(pshape[a + 1:])
    y = mb.tensor(out, dtype, **q)
    mb.op("GATHER", [x, i], [y], "GatherOptions", axis=axis, batchDims=bd)
    mb.output(y)
    return mb.build()


def idx(shape, hi, n=2, seed=1):
    return np.random.default_rng(seed).integers(0, hi, size=(n, *shape)).astype(np.int32)


CASES = [  # params shape, indices shape, axis, batch_dims
    ((5, 3), (4,), 0, 0), ((2, 6, 4), (3, 2), 1, 0), ((2, 3, 7), (5,), -1, 0),
    ((3, 5, 4), (3, 2), 1, 1), ((2, 3, 4, 2), (2, 3, 2), 2, 2), ((6,), (2, 2), 0, 0)]


@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("case", CASES)
def test_gather(tmp_path, dtype, case):
    pshape, ishape, axis, bd = case
    n = pshape[axis % len(pshape)]
    assert_matches_tflm(gather_model(dtype, pshape, ishape, axis, bd),
                        [random_inputs(pshape, dtype, 2), idx(ishape, n)], tmp_path)


@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_gather_constant_table(tmp_path, dtype):
    """Embedding lookup: a constant table in flash, run-time indices."""
    table = random_inputs((10, 6), dtype, 1)[0]
    data = gather_model(dtype, (10, 6), (3,), 0, 0, const_params=table)
    mb_in = idx((3,), 10, n=3)
    assert_matches_tflm(data, [mb_in], tmp_path)


@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_gather_constant_indices(tmp_path, dtype):
    ci = np.array([[3, 0, 3], [1, 1, 2]], np.int32)
    data = gather_model(dtype, (2, 4, 5), (2, 3), 1, 0, const_idx=ci)
    assert_matches_tflm(data, [random_inputs((2, 4, 5), dtype, 2)], tmp_path)


@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_gather_out_of_range_gives_zero(tmp_path, dtype):
    data = gather_model(dtype, (5, 3), (4,), 0, 0)
    xs = random_inputs((5, 3), dtype, 1)
    ii = np.array([[4, -1, 5, 0]], np.int32)
    got = eerie_run(data, [xs, ii], tmp_path)[0][0][0]
    zero = Q["zero_point"] if dtype == "int8" else 0
    np.testing.assert_array_equal(got[0], xs[0, 4])
    np.testing.assert_array_equal(got[3], xs[0, 0])
    assert (got[1] == zero).all() and (got[2] == zero).all()


def gnd_model(dtype, pshape, ishape, const_idx=None):
    mb = ModelBuilder()
    q = Q if dtype == "int8" else {}
    x = mb.input(list(pshape), dtype, **q)
    i = mb.const(const_idx, "int32") if const_idx is not None else mb.input(list(ishape), "int32")
    k = ishape[-1]
    y = mb.tensor(list(ishape[:-1]) + list(pshape[k:]), dtype, **q)
    mb.op("GATHER_ND", [x, i], [y])
    mb.output(y)
    return mb.build()


@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("pshape,ishape", [((4, 3), (2, 1)), ((4, 3, 5), (3, 2)), ((2, 3, 4), (2, 2, 3)),
                                           ((5, 2), (1,))])
def test_gather_nd(tmp_path, dtype, pshape, ishape):
    k = ishape[-1]
    rng = np.random.default_rng(2)
    ii = np.stack([rng.integers(0, pshape[j], size=(2, *ishape[:-1])) for j in range(k)], axis=-1)
    assert_matches_tflm(gnd_model(dtype, pshape, ishape), [random_inputs(pshape, dtype, 2),
                                                           ii.astype(np.int32)], tmp_path)


def test_gather_nd_constant_indices_and_out_of_range(tmp_path):
    ci = np.array([[1, 2], [0, 0], [3, 1]], np.int32)
    assert_matches_tflm(gnd_model("int8", (4, 3, 5), (3, 2), ci), [random_inputs((4, 3, 5), "int8", 2)],
                        tmp_path)
    data = gnd_model("int8", (4, 3, 5), (3, 2))
    xs = random_inputs((4, 3, 5), "int8", 1)
    got = eerie_run(data, [xs, np.array([[[1, 2], [4, 0], [0, -1]]], np.int32)], tmp_path)[0][0][0]
    np.testing.assert_array_equal(got[0], xs[0, 1, 2])
    assert (got[1:] == Q["zero_point"]).all()
