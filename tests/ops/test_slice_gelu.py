"""STRIDED_SLICE / SLICE (int8, float32: negative indices, masks, strides > 1 and < 0, shrink)
vs TFLM, and GELU float32 (exact and tanh approximation) vs
the formula in float64 (TFLM has no GELU kernel)."""
import math

import numpy as np
import pytest

from conftest import assert_matches_tflm, eerie_run, random_inputs
from tflite_builder import ModelBuilder

Q = dict(scale=0.05, zero_point=-4)


def ss_model(dtype, shape, begin, end, strides, out_shape, **masks):
    mb = ModelBuilder()
    q = Q if dtype == "int8" else {}
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


@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_slice(tmp_path, dtype):
    mb = ModelBuilder()
    q = Q if dtype == "int8" else {}
    x = mb.input([3, 4, 5], dtype, **q)
    ins = [x, mb.const(np.array([1, 0, 2], np.int32), "int32"), mb.const(np.array([2, -1, 2], np.int32), "int32")]
    y = mb.tensor([2, 4, 2], dtype, **q)
    mb.op("SLICE", ins, [y], "SliceOptions")
    mb.output(y)
    assert_matches_tflm(mb.build(), [random_inputs([3, 4, 5], dtype, 2)], tmp_path)


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
