"""BROADCAST_TO (every dtype TFLM takes, up to 5-D vs TFLM, 6-D vs numpy), FILL (constant and
run-time value), ZEROS_LIKE
(raw zeros, also for int8 with a non-zero zero point), MIRROR_PAD (REFLECT / SYMMETRIC)
vs TFLM."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, eerie_run, random_inputs, tflm_run
from tflite_builder import ModelBuilder

Q = dict(scale=0.05, zero_point=-4)


def rin(shape, dtype, n=2, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, size=(n, *shape)).astype(bool)
    if dtype in ("int32", "int64"):
        return rng.integers(-2**31, 2**31 - 1, size=(n, *shape)).astype(dtype)
    if dtype == "uint8":
        return rng.integers(0, 256, size=(n, *shape)).astype(np.uint8)
    return random_inputs(shape, dtype, n, seed)


def q(dtype):
    return Q if dtype == "int8" else {}


@pytest.mark.parametrize("dtype,shape,to", [
    ("float32", (1, 3), (2, 4, 3)), ("int8", (4, 1), (2, 4, 5)), ("int16", (3,), (2, 3)),
    ("int32", (2, 1, 3), (2, 4, 3)), ("int64", (1,), (5,)), ("uint8", (1, 1), (3, 2)),
    ("bool", (2, 1, 1), (2, 3, 4)), ("float32", (2, 3), (2, 3)), ("int8", (1, 2, 1, 3), (3, 2, 4, 3))])
def test_broadcast_to(tmp_path, dtype, shape, to):
    mb = ModelBuilder()
    x = mb.input(list(shape), dtype, **q(dtype))
    y = mb.tensor(list(to), dtype, **q(dtype))
    mb.op("BROADCAST_TO", [x, mb.const(np.array(to, np.int32), "int32")], [y])
    mb.output(y)
    assert_matches_tflm(mb.build(), [rin(shape, dtype)], tmp_path)


BT_DTYPES = ["float32", "int8", "int16", "int32", "int64", "uint8", "bool"]


def broadcast_to_fan(cases):
    """BROADCAST_TO of every dtype x case (input shape, target shape) in one model."""
    mb = ModelBuilder()
    xs = []
    for dtype in BT_DTYPES:
        for k, (shape, to) in enumerate(cases):
            x = mb.input(list(shape), dtype, **q(dtype))
            y = mb.tensor(list(to), dtype, **q(dtype))
            mb.op("BROADCAST_TO", [x, mb.const(np.array(to, np.int32), "int32")], [y])
            mb.output(y)
            xs.append(rin(shape, dtype, seed=k))
    return mb.build(), xs


def test_broadcast_to_5d(tmp_path):
    """5-D, TFLM's limit; every dtype in one model."""
    model, xs = broadcast_to_fan([((2, 1, 3, 1, 2), (2, 2, 3, 4, 2)), ((3, 1, 2), (2, 2, 3, 4, 2)),
                                  ((1, 1, 1, 1, 1), (1, 2, 1, 3, 2))])
    assert_matches_tflm(model, xs, tmp_path)


SIX_D = [((1, 3, 1, 2, 1, 1), (2, 3, 2, 2, 2, 2)), ((2, 1, 1), (2, 2, 3, 2, 2, 1))]


def test_broadcast_to_6d_vs_numpy(tmp_path, capfd):
    """6-D: TFLM refuses it ("BroadcastTo only supports 1-5D tensor", checked below), eerie-c's
    copy handles it; numpy's broadcast_to is the reference."""
    model, xs = broadcast_to_fan(SIX_D)
    got, _ = eerie_run(model, xs, tmp_path)
    want = [np.broadcast_to(x.reshape(len(x), *[1] * (len(to) - len(shape)), *shape), (len(x), *to))
            for x, (shape, to) in zip(xs, SIX_D * len(BT_DTYPES))]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
    capfd.readouterr()
    with pytest.raises(RuntimeError):
        tflm_run(model, xs)
    assert "BroadcastTo only supports 1-5D tensor" in capfd.readouterr().err


@pytest.mark.parametrize("dtype", ["float32", "int8", "int32"])
def test_fill(tmp_path, dtype):
    mb = ModelBuilder()
    v = mb.input([], dtype, **q(dtype))
    y = mb.tensor([2, 3, 4], dtype, **q(dtype))
    mb.op("FILL", [mb.const(np.array([2, 3, 4], np.int32), "int32"), v], [y])
    mb.output(y)
    # a constant value too, added to the run-time fill so the model has an input
    c = mb.const(np.array(rin([], dtype, 1, seed=9)[0]), dtype, **q(dtype))
    y2 = mb.tensor([5], dtype, **q(dtype))
    mb.op("FILL", [mb.const(np.array([5], np.int32), "int32"), c], [y2])
    mb.output(y2)
    assert_matches_tflm(mb.build(), [rin([], dtype, 3)], tmp_path)


@pytest.mark.parametrize("dtype", ["float32", "int8", "int32", "int64"])
def test_zeros_like(tmp_path, dtype):
    mb = ModelBuilder()
    x = mb.input([3, 5], dtype, **q(dtype))
    y = mb.tensor([3, 5], dtype, **q(dtype))
    mb.op("ZEROS_LIKE", [x], [y])
    mb.output(y)
    assert_matches_tflm(mb.build(), [rin([3, 5], dtype)], tmp_path)


MIRROR_CASES = [((3, 4), [[1, 1], [2, 1]]), ((1, 4, 5, 2), [[0, 0], [2, 2], [1, 3], [0, 0]]),
                ((6,), [[0, 2]]), ((2, 3, 3), [[1, 0], [0, 0], [1, 2]])]


# REFLECT (mode 0) needs every pad below its dimension's size, so cases that break that rule
# run in SYMMETRIC (mode 1) only: they are left out, not skipped.
@pytest.mark.parametrize("dtype", ["float32", "int8"])
@pytest.mark.parametrize("mode,shape,pads", [(m, s, p) for m in (0, 1) for s, p in MIRROR_CASES
                                             if m == 1 or all(max(pp) <= n - 1 for n, pp in zip(s, p))])
def test_mirror_pad(tmp_path, dtype, mode, shape, pads):
    mb = ModelBuilder()
    x = mb.input(list(shape), dtype, **q(dtype))
    out = [n + a + b for n, (a, b) in zip(shape, pads)]
    y = mb.tensor(out, dtype, **q(dtype))
    mb.op("MIRROR_PAD", [x, mb.const(np.array(pads, np.int32), "int32")], [y], "MirrorPadOptions", mode=mode)
    mb.output(y)
    assert_matches_tflm(mb.build(), [rin(shape, dtype)], tmp_path)


@pytest.mark.parametrize("dtype", ["float32", "int8"])
@pytest.mark.parametrize("shape", [(2, 5), (1, 3, 4, 16), (3, 1), (4, 200)])
def test_l2_normalization(tmp_path, dtype, shape):
    mb = ModelBuilder()
    x = mb.input(list(shape), dtype, **q(dtype))
    y = mb.tensor(list(shape), dtype, **(dict(scale=1 / 128, zero_point=0) if dtype == "int8" else {}))
    mb.op("L2_NORMALIZATION", [x], [y], "L2NormOptions")
    mb.output(y)
    xs = rin(shape, dtype, 4)
    if dtype == "int8":
        xs[1] = Q["zero_point"]                 # a zero row: sum 0
        xs[2] = Q["zero_point"]
        xs[2, ..., 0] = Q["zero_point"] + 1     # sum 1
        xs[3] = 127                             # the widest sums
    else:
        xs[1] = 0.0
    assert_matches_tflm(mb.build(), [xs], tmp_path)


@pytest.mark.parametrize("shape", [(2, 5), (1, 3, 4, 16), (3, 1)])
def test_log_softmax_float(tmp_path, shape):
    mb = ModelBuilder()
    x = mb.input(list(shape), "float32")
    y = mb.tensor(list(shape), "float32")
    mb.op("LOG_SOFTMAX", [x], [y], "LogSoftmaxOptions")
    mb.output(y)
    assert_matches_tflm(mb.build(), [rin(shape, "float32", 3) * 4], tmp_path)
