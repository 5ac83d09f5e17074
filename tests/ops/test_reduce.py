"""REDUCE_MAX / REDUCE_MIN (float32, int8), REDUCE_ALL (bool), SUM (float32, int8 and int16 requantized),
ARG_MAX / ARG_MIN (float32, int8 -> int32, ties), CUMSUM (float32, int8; exclusive, reverse)
vs TFLM, over several axes sets, keep_dims on and off, negative axes."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, random_inputs
from tflite_builder import ModelBuilder

QIN = {"int8": dict(scale=0.05, zero_point=-4), "int16": dict(scale=0.01, zero_point=0)}
QOUT = {"int8": dict(scale=0.3, zero_point=7), "int16": dict(scale=0.04, zero_point=0)}


def reduce_model(kind, dtype, shape, axes, keep, qout=None):
    mb = ModelBuilder()
    qi = QIN.get(dtype, {})
    x = mb.input(list(shape), dtype, **qi)
    rank = len(shape)
    ax = sorted({a % rank for a in axes})
    out = [1 if i in ax else d for i, d in enumerate(shape)] if keep else \
        [d for i, d in enumerate(shape) if i not in ax]
    y = mb.tensor(out, dtype, **(qout if qout is not None else qi))
    mb.op(kind, [x, mb.const(np.array(axes, np.int32), "int32")], [y], "ReducerOptions", keepDims=keep)
    mb.output(y)
    return mb.build()


AXES = [((2, 3, 4), [1], False), ((2, 3, 4), [0, 2], True), ((2, 5, 3, 4), [-1, 1], False),
        ((2, 5, 3, 4), [1, 2], True), ((3, 7), [0, 1], False), ((4, 1, 6), [1], False)]


@pytest.mark.parametrize("kind", ["REDUCE_MAX", "REDUCE_MIN"])
@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("case", AXES[1:4])
def test_reduce_minmax(tmp_path, kind, dtype, case):
    shape, axes, keep = case
    assert_matches_tflm(reduce_model(kind, dtype, shape, axes, keep), [random_inputs(shape, dtype, 2)],
                        tmp_path)


def test_reduce_max_float_all_negative_infinity(tmp_path):
    """TFLM starts from -FLT_MAX, so an all -inf row gives -FLT_MAX, not -inf."""
    xs = np.full((1, 2, 3), -np.inf, np.float32)
    xs[0, 1, 1] = -5.0
    assert_matches_tflm(reduce_model("REDUCE_MAX", "float32", (2, 3), [1], False), [xs], tmp_path)


@pytest.mark.parametrize("dtype,case", [(d, c) for c in AXES for d in ("int8", "float32")] +
                         [("int16", c) for c in AXES[1:4]])
def test_sum(tmp_path, dtype, case):
    shape, axes, keep = case
    assert_matches_tflm(reduce_model("SUM", dtype, shape, axes, keep, QOUT.get(dtype)),
                        [random_inputs(shape, dtype, 2)], tmp_path)


@pytest.mark.parametrize("qout", [dict(scale=0.05, zero_point=-4), dict(scale=0.011, zero_point=100),
                                  dict(scale=1.7, zero_point=-128)])
def test_sum_int8_requantization(tmp_path, qout):
    shape = (4, 9, 5)
    xs = random_inputs(shape, "int8", 3, seed=3)
    xs[0] = 127
    xs[1] = -128
    assert_matches_tflm(reduce_model("SUM", "int8", shape, [1], False, qout), [xs], tmp_path)


def arg_model(kind, dtype, shape, axis):
    mb = ModelBuilder()
    x = mb.input(list(shape), dtype, **QIN.get(dtype, {}))
    a = axis % len(shape)
    y = mb.tensor([d for i, d in enumerate(shape) if i != a], "int32")
    opts = "ArgMaxOptions" if kind == "ARG_MAX" else "ArgMinOptions"
    mb.op(kind, [x, mb.const(np.array([axis], np.int32), "int32")], [y], opts, outputType=2)
    mb.output(y)
    return mb.build()


@pytest.mark.parametrize("kind", ["ARG_MAX", "ARG_MIN"])
@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("shape,axis", [((2, 3, 4), 1), ((5, 7), -2), ((3, 1, 2), 1)])
def test_arg(tmp_path, kind, dtype, shape, axis):
    xs = random_inputs(shape, dtype, 3)
    if dtype == "int8":
        xs[2] = xs[2] // 64      # many ties: the first index wins
    assert_matches_tflm(arg_model(kind, dtype, shape, axis), [xs], tmp_path)


def cumsum_model(dtype, shape, axis, exclusive, reverse, qout=None):
    mb = ModelBuilder()
    qi = QIN.get(dtype, {})
    x = mb.input(list(shape), dtype, **qi)
    y = mb.tensor(list(shape), dtype, **(qout or qi))
    mb.op("CUMSUM", [x, mb.const(np.array(axis, np.int32), "int32")], [y], "CumsumOptions",
          exclusive=exclusive, reverse=reverse)
    mb.output(y)
    return mb.build()


@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("shape,axis,exclusive,reverse", [
    ((2, 3, 4), 1, False, False), ((2, 3, 4), 2, True, False), ((2, 3, 4), 0, False, True),
    ((5, 6), -1, True, True), ((7,), 0, False, False)])
def test_cumsum(tmp_path, dtype, shape, axis, exclusive, reverse):
    assert_matches_tflm(cumsum_model(dtype, shape, axis, exclusive, reverse),
                        [random_inputs(shape, dtype, 2)], tmp_path)


@pytest.mark.parametrize("qout", [dict(scale=0.2, zero_point=3), dict(scale=0.01, zero_point=-100)])
def test_cumsum_int8_requantization(tmp_path, qout):
    shape = (3, 16)
    xs = random_inputs(shape, "int8", 3, seed=5)
    xs[1] = 127
    assert_matches_tflm(cumsum_model("int8", shape, 1, False, False, qout), [xs], tmp_path)


@pytest.mark.parametrize("case", [AXES[0], AXES[2], AXES[3], AXES[4]])
def test_reduce_all(tmp_path, case):
    """REDUCE_ALL (bool, TFLM's one type): mostly-true inputs so both results occur."""
    shape, axes, keep = case
    xs = np.random.default_rng(2).random((3, *shape)) > 0.08
    xs[0] = True
    assert_matches_tflm(reduce_model("REDUCE_ALL", "bool", shape, axes, keep), [xs], tmp_path)
