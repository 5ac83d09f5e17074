"""EXPAND_DIMS and SQUEEZE vs TFLM: every axis of a 3-D input (negative too; a rank-0 or 1-element
axis tensor), SQUEEZE with squeeze_dims empty (every size-1 dim), given, negative and several,
and an EXPAND_DIMS -> SQUEEZE chain whose middle tensor is aliased away. Each model feeds one
input to all the ops, one output per op.

TFLM's EXPAND_DIMS takes float32, int8 and int16 only ("Expand_Dims only currently supports
int8, int16 and float32"); eerie-c's EXPAND_DIMS moves no bytes whatever the dtype (an alias,
or a memcpy between two caller buffers), so for bool / int32 / int64 / uint8 the reference is
numpy's expand_dims, and test_tflm_expand_dims_dtypes checks TFLM still refuses them (switch
them to TFLM when it stops). SQUEEZE runs on TFLM in every dtype eerie-c claims."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, eerie_run, tflm_run
from tflite_builder import ModelBuilder

Q = {"int8": dict(scale=0.05, zero_point=-4), "int16": dict(scale=0.001, zero_point=0),
     "uint8": dict(scale=0.05, zero_point=128)}
X = [2, 1, 3]                                   # EXPAND_DIMS input
EXPAND = [0, 1, 3, -1, -2, -4]                  # every axis of a rank-3 input, negative too
S = [1, 2, 1, 3, 1]                             # SQUEEZE input
SQUEEZE = [[], [0], [-1], [2, -5], [4, 0, -3]]  # [] squeezes every size-1 dim


def expanded(shape, axis):
    a = axis + len(shape) + 1 if axis < 0 else axis
    return list(shape[:a]) + [1] + list(shape[a:])


def squeezed(shape, dims):
    drop = {d % len(shape) for d in dims} if dims else {k for k, n in enumerate(shape) if n == 1}
    return [n for k, n in enumerate(shape) if k not in drop]


def model(dtypes, expand=True, squeeze=True):
    """Per dtype: EXPAND_DIMS of one X input on every axis, then the chain X -> EXPAND_DIMS(-2)
    -> SQUEEZE([1, -2]); SQUEEZE of one S input by every squeeze_dims list."""
    mb = ModelBuilder()
    for dt in dtypes:
        q = Q.get(dt, {})
        if expand:
            x = mb.input(X, dt, **q)
            for axis in EXPAND:   # TFLM refuses an int64 axis tensor: int32 only
                y = mb.tensor(expanded(X, axis), dt, **q)
                mb.op("EXPAND_DIMS", [x, mb.const(np.array([axis]), "int32")], [y])
                mb.output(y)
            mid, y = mb.tensor(expanded(X, -2), dt, **q), mb.tensor([2, 3], dt, **q)
            mb.op("EXPAND_DIMS", [x, mb.const(np.array(-2), "int32")], [mid])
            mb.op("SQUEEZE", [mid], [y], "SqueezeOptions", squeezeDims=[1, -2])
            mb.output(y)
        if squeeze:
            s = mb.input(S, dt, **q)
            for dims in SQUEEZE:
                y = mb.tensor(squeezed(S, dims), dt, **q)
                mb.op("SQUEEZE", [s], [y], "SqueezeOptions", squeezeDims=dims)
                mb.output(y)
    return mb.build()


def values(shape, dtype, n=3, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, (n, *shape)).astype(np.bool_)
    if dtype == "float32":
        return rng.standard_normal((n, *shape)).astype(np.float32)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, (n, *shape), endpoint=True).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "int8", "int16"])
def test_expand_dims_and_squeeze(tmp_path, dtype):
    got, _ = assert_matches_tflm(model([dtype]), [values(X, dtype, seed=1), values(S, dtype, seed=2)],
                                 tmp_path)
    assert [g.shape[1:] for g in got] == [tuple(expanded(X, a)) for a in EXPAND] + [(2, 3)] + \
        [tuple(squeezed(S, d)) for d in SQUEEZE]


@pytest.mark.parametrize("dtype", ["int32", "int64", "bool", "uint8"])
def test_squeeze(tmp_path, dtype):
    assert_matches_tflm(model([dtype], expand=False), [values(S, dtype, seed=3)], tmp_path)


NUMPY_ONLY = ["bool", "int32", "int64", "uint8"]


def test_expand_dims_vs_numpy(tmp_path):
    """The dtypes TFLM's EXPAND_DIMS refuses, all in one model: numpy is the reference."""
    xs = [values(X, dt, seed=k) for k, dt in enumerate(NUMPY_ONLY)]
    got, _ = eerie_run(model(NUMPY_ONLY, squeeze=False), xs, tmp_path)
    per = len(EXPAND) + 1
    assert len(got) == per * len(NUMPY_ONLY)
    for k, x in enumerate(xs):
        want = [np.expand_dims(x, a + 1 if a >= 0 else a) for a in EXPAND] + [x.reshape(-1, 2, 3)]
        for g, w in zip(got[k * per:(k + 1) * per], want):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", NUMPY_ONLY)
def test_tflm_expand_dims_dtypes(capfd, dtype):
    """Why test_expand_dims_vs_numpy does not use TFLM: its EXPAND_DIMS refuses these dtypes."""
    with pytest.raises(RuntimeError):
        tflm_run(model([dtype], squeeze=False), [values(X, dtype)])
    assert "Expand_Dims only currently supports int8, int16 and float32" in capfd.readouterr().err
