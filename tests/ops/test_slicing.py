"""SPLIT, SPLIT_V, PACK, UNPACK vs TFLM: every axis (negative too), uneven SPLIT_V with -1,
several dtypes (bytes are copied as they are, so int8 outputs keep whatever quantization the
model declares), a PACK of one tensor with itself and with a constant."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, eerie_run, random_inputs
from tflite_builder import ModelBuilder

Q = {"int8": dict(scale=0.05, zero_point=-4), "int16": dict(scale=0.01, zero_point=0)}


def rin(shape, dtype, n=2, seed=0):
    if dtype == "int32":
        return np.random.default_rng(seed).integers(-2**31, 2**31 - 1, size=(n, *shape)).astype(np.int32)
    if dtype == "int64":
        return np.random.default_rng(seed).integers(-2**62, 2**62, size=(n, *shape)).astype(np.int64)
    return random_inputs(shape, dtype, n, seed)


def split_model(dtype, shape, axis, n):
    mb = ModelBuilder()
    q = Q.get(dtype, {})
    x = mb.input(list(shape), dtype, **q)
    a = mb.const(np.array([axis], np.int32), "int32")
    out = list(shape)
    out[axis] //= n
    ys = [mb.tensor(out, dtype, **q) for _ in range(n)]
    mb.op("SPLIT", [a, x], ys, "SplitOptions", numSplits=n)
    for y in ys:
        mb.output(y)
    return mb.build()


def cycle(dtypes, cases):
    """Every case with int8 and float32, the wider integer dtypes on the first case only."""
    return [(d, c) for c in cases for d in ("int8", "float32")] + \
        [(d, cases[0]) for d in dtypes if d not in ("int8", "float32")]


@pytest.mark.parametrize("dtype,case", cycle(["int16", "int32"], [
    ((4, 6), 1, 2), ((2, 6, 5, 3), 1, 3), ((2, 6, 5, 8), -1, 4), ((6, 2, 2), 0, 6)]))
def test_split(tmp_path, dtype, case):
    shape, axis, n = case
    assert_matches_tflm(split_model(dtype, shape, axis, n), [rin(shape, dtype)], tmp_path)


@pytest.mark.parametrize("dtype,case", cycle(["int16", "int32"], [
    ((4, 9), 1, (2, -1, 3)), ((3, 7, 4), 1, (1, 5, 1)), ((5, 2, 3), -3, (1, -1, 1)),
    ((2, 3, 10), 2, (10,))]))
def test_split_v(tmp_path, dtype, case):
    shape, axis, sizes = case
    mb = ModelBuilder()
    q = Q.get(dtype, {})
    x = mb.input(list(shape), dtype, **q)
    ss = mb.const(np.array(sizes, np.int32), "int32")
    a = mb.const(np.array([axis], np.int32), "int32")
    real = list(sizes)
    if -1 in real:
        real[real.index(-1)] = shape[axis] - (sum(real) + 1)
    ys = []
    for s in real:
        out = list(shape)
        out[axis] = s
        ys.append(mb.tensor(out, dtype, **q))
    mb.op("SPLIT_V", [x, ss, a], ys, "SplitVOptions", numSplits=len(sizes))
    for y in ys:
        mb.output(y)
    assert_matches_tflm(mb.build(), [rin(shape, dtype)], tmp_path)


@pytest.mark.parametrize("dtype,case", cycle(["int16", "int32", "int64"], [
    ((4, 6), 1, 2), ((4, 6), 0, 3), ((2, 3, 5), -1, 2), ((2, 3, 5), 3, 2), ((7,), 1, 3)]))
def test_pack(tmp_path, dtype, case):
    shape, axis, n = case
    mb = ModelBuilder()
    q = Q.get(dtype, {})
    xs = [mb.input(list(shape), dtype, **q) for _ in range(n)]
    rank = len(shape) + 1
    a = axis + rank if axis < 0 else axis
    y = mb.tensor(list(shape[:a]) + [n] + list(shape[a:]), dtype, **q)
    mb.op("PACK", xs, [y], "PackOptions", valuesCount=n, axis=axis)
    mb.output(y)
    assert_matches_tflm(mb.build(), [rin(shape, dtype, seed=k) for k in range(n)], tmp_path)


def test_pack_same_input_and_constant(tmp_path):
    mb = ModelBuilder()
    x = mb.input([3, 5], "float32")
    c = mb.const(np.arange(15, dtype=np.float32).reshape(3, 5), "float32")
    y = mb.tensor([3, 3, 5], "float32")
    mb.op("PACK", [x, c, x], [y], "PackOptions", valuesCount=3, axis=1)
    mb.output(y)
    assert_matches_tflm(mb.build(), [rin([3, 5], "float32")], tmp_path)


@pytest.mark.parametrize("dtype,case", cycle(["int16", "int32"], [
    ((4, 2, 6), 1), ((3, 5), 0), ((3, 5), -1), ((2, 3, 4, 2), 3), ((4,), 0)]))
def test_unpack(tmp_path, dtype, case):
    shape, axis = case
    mb = ModelBuilder()
    q = Q.get(dtype, {})
    x = mb.input(list(shape), dtype, **q)
    a = axis % len(shape)
    ys = [mb.tensor([d for i, d in enumerate(shape) if i != a], dtype, **q) for _ in range(shape[a])]
    mb.op("UNPACK", [x], ys, "UnpackOptions", num=shape[a], axis=axis)
    for y in ys:
        mb.output(y)
    assert_matches_tflm(mb.build(), [rin(shape, dtype)], tmp_path)


def test_split_generated_c_uses_memcpy(tmp_path):
    """Contiguous pieces become memcpy runs of whole rows, not element loops."""
    from eerie_c.api import compile_model
    p = tmp_path / "m.tflite"
    p.write_bytes(split_model("int8", (2, 6, 5, 8), 1, 3))
    c = compile_model(p).files["m.c"]
    assert c.count("memcpy(out") == 3 and "80 * sizeof" in c and "[o++]" not in c
