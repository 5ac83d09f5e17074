"""STRIDED_SLICE / SLICE (int8, float32: negative indices, masks, strides > 1 and < 0, shrink;
SLICE also bool, int16, int32) vs TFLM, both in int64 / uint8 vs numpy (TFLM refuses those),
and GELU float32 (exact and tanh approximation) vs the formula in float64 (TFLM has no GELU
kernel)."""
import math

import numpy as np
import pytest

from conftest import assert_matches_tflm, eerie_run, random_inputs, tflm_run
from tflite_builder import ModelBuilder

Q = dict(scale=0.05, zero_point=-4)


def ss_model(dtype, shape, begin, end, strides, out_shape, **masks):
    mb = ModelBuilder()
    q = Q if dtype in ("int8", "int16") else {}
    x = mb.input(list(shape), dtype, **q)
    ins = [x] + [mb.const(np.array(v, np.int32), "int32") for v in (begin, end, strides)]
    y = mb.tensor(list(out_shape), dtype, **q)
    mb.op("STRIDED_SLICE", ins, [y], "StridedSliceOptions", **masks)
    mb.output(y)
    return mb.build()


SS = [
    ((4, 6), (1, 0), (3, 6), (1, 1), (2, 6), {}),
    ((4, 6), (0, 1), (4, 6), (2, 2), (2, 3), {}),
    ((4, 6), (-3, -1), (4, -6), (1, -2), (3, 3), {}),
    ((2, 3, 4, 5), (0, 1, 0, 2), (2, 3, 4, 5), (1, 1, 3, 1), (2, 2, 2, 3), {}),
    ((2, 3, 4), (1, 0, 1), (0, 0, 3), (1, 1, 1), (2, 3, 2), dict(beginMask=1, endMask=3)),
    ((2, 3, 4), (1, 2, 0), (2, 3, 4), (1, 1, 1), (4,), dict(shrinkAxisMask=3)),
]


@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("case", SS)
def test_strided_slice(tmp_path, dtype, case):
    shape, b, e, s, out, masks = case
    assert_matches_tflm(ss_model(dtype, shape, b, e, s, out, **masks),
                        [random_inputs(shape, dtype, 2)], tmp_path)


def slice_model(dtype):
    """[3, 4, 5] -> SLICE begin [1, 0, 2] size [2, -1, 2] (-1: to the end)."""
    mb = ModelBuilder()
    q = Q if dtype in ("int8", "int16") else {}
    x = mb.input([3, 4, 5], dtype, **q)
    ins = [x, mb.const(np.array([1, 0, 2], np.int32), "int32"), mb.const(np.array([2, -1, 2], np.int32), "int32")]
    y = mb.tensor([2, 4, 2], dtype, **q)
    mb.op("SLICE", ins, [y], "SliceOptions")
    mb.output(y)
    return mb.build()


def values(shape, dtype, n=2, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, (n, *shape)).astype(np.bool_)
    if dtype in ("int32", "int64", "uint8"):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, (n, *shape), endpoint=True).astype(dtype)
    return random_inputs(shape, dtype, n, seed)


@pytest.mark.parametrize("dtype", ["int8", "float32", "bool", "int16", "int32"])
def test_slice(tmp_path, dtype):
    assert_matches_tflm(slice_model(dtype), [values([3, 4, 5], dtype)], tmp_path)


# TFLM's SLICE and STRIDED_SLICE refuse int64 and uint8 ("Input tensor type INT64 (4) not
# supported."); eerie-c's copy moves elements of any size, so numpy slicing is the reference
# for those two (test_tflm_slice_dtypes checks TFLM still refuses them).
NUMPY_ONLY = ["int64", "uint8"]


@pytest.mark.parametrize("dtype", NUMPY_ONLY)
def test_slice_vs_numpy(tmp_path, dtype):
    xs = values([3, 4, 5], dtype)
    got, _ = eerie_run(slice_model(dtype), [xs], tmp_path)
    assert got[0].dtype == xs.dtype
    np.testing.assert_array_equal(got[0], xs[:, 1:3, :, 2:4])
    # STRIDED_SLICE: negative begin, stride 2 and -1, a shrunk dim, begin / end masks
    model = ss_model(dtype, (3, 4, 5), (-1, 0, 4), (0, 4, 0), (1, 2, -1), (2, 4),
                     beginMask=2, endMask=2, shrinkAxisMask=1)
    got, _ = eerie_run(model, [xs], tmp_path, name="ss")
    np.testing.assert_array_equal(got[0], xs[:, -1, ::2, 4:0:-1])


@pytest.mark.parametrize("dtype", NUMPY_ONLY)
def test_tflm_slice_dtypes(capfd, dtype):
    """Why test_slice_vs_numpy does not use TFLM."""
    for model, shape in ((slice_model(dtype), [3, 4, 5]),
                         (ss_model(dtype, (3, 4), (0, 0), (2, 2), (1, 1), (2, 2)), [3, 4])):
        with pytest.raises(RuntimeError):
            tflm_run(model, [values(shape, dtype)])
        assert "not supported" in capfd.readouterr().err


@pytest.mark.parametrize("approximate", [False, True])
def test_gelu(tmp_path, approximate):
    mb = ModelBuilder()
    x = mb.input([3, 17], "float32")
    y = mb.tensor([3, 17], "float32")
    mb.op("GELU", [x], [y], "GeluOptions", approximate=approximate)
    mb.output(y)
    # TFLM has no GELU kernel: the reference is the formula in float64.
    xs = random_inputs([3, 17], "float32", 2, scale=3.0)
    got, _ = eerie_run(mb.build(), [xs], tmp_path)
    v = xs.astype(np.float64)
    if approximate:
        ref = 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3)))
    else:
        ref = 0.5 * v * (1 + np.vectorize(math.erf)(v / np.sqrt(2)))
    np.testing.assert_allclose(got[0], ref, rtol=0, atol=1e-5 * np.abs(ref).max())
