"""CONCATENATION vs TFLM: every axis (negative too), 2..5 inputs, constant inputs, a repeated
input, int8 (copied as is; inputs quantized unlike the output are rejected, as in TFLM),
float32, int32, bool, int16, int64; a fused activation is rejected like TFLM rejects it."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, random_inputs
from tflite_builder import ACT, ModelBuilder

from eerie_c.api import compile_model
from eerie_c.errors import EerieError

Q = dict(scale=0.05, zero_point=-4)


def concat_model(dtype, shapes, axis, consts=(), quants=None, act="NONE", repeat=False):
    """shapes: one per input; inputs whose index is in `consts` are constant tensors."""
    rng = np.random.default_rng(1)
    mb = ModelBuilder()
    rank = len(shapes[0])
    ax = axis % rank
    oshape = list(shapes[0])
    oshape[ax] = sum(s[ax] for s in shapes) + (shapes[0][ax] if repeat else 0)
    ins = []
    for k, shape in enumerate(shapes):
        q = (quants[k] if quants else Q) if dtype == "int8" else {}
        if k in consts:
            data = rng.integers(-128, 128, shape) if dtype == "int8" else rng.standard_normal(shape)
            ins.append(mb.const(data, dtype, **q))
        else:
            ins.append(mb.input(shape, dtype, **q))
    if repeat:
        ins.append(ins[0])
    y = mb.tensor(oshape, dtype, **(Q if dtype == "int8" else {}))
    mb.op("CONCATENATION", ins, [y], "ConcatenationOptions", axis=axis,
          fusedActivationFunction=ACT[act])
    mb.output(y)
    return mb.build()


def run(tmp_path, model, shapes, dtype, consts=()):
    xs = [random_inputs(s, dtype, 3, seed=k) for k, s in enumerate(shapes) if k not in consts]
    return assert_matches_tflm(model, xs, tmp_path)


AXES = [0, 1, 2, 3, -1, -2, -4]


@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("axis", AXES)
def test_concat_axes(tmp_path, dtype, axis):
    ax = axis % 4
    base = [2, 3, 4, 5]
    shapes = []
    for size in (1, 3, 2):
        s = list(base)
        s[ax] = size
        shapes.append(s)
    run(tmp_path, concat_model(dtype, shapes, axis), shapes, dtype)


@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_concat_two_inputs_2d(tmp_path, dtype):
    shapes = [[3, 7], [3, 2]]
    run(tmp_path, concat_model(dtype, shapes, -1), shapes, dtype)


def test_concat_five_inputs_1d(tmp_path):
    shapes = [[3], [1], [4], [2], [5]]
    run(tmp_path, concat_model("float32", shapes, 0), shapes, "float32")


@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_concat_constant_inputs(tmp_path, dtype):
    shapes = [[1, 2, 2, 3], [1, 2, 2, 4], [1, 2, 2, 1]]
    model = concat_model(dtype, shapes, 3, consts=(0, 2))
    run(tmp_path, model, shapes, dtype, consts=(0, 2))


def test_concat_repeated_input(tmp_path):
    shapes = [[2, 3, 2], [2, 1, 2]]
    run(tmp_path, concat_model("int8", shapes, 1, repeat=True), shapes, "int8")


@pytest.mark.parametrize("q", [dict(scale=0.2, zero_point=-4), dict(scale=0.05, zero_point=10)])
def test_concat_int8_needs_output_quantization(tmp_path, q):
    """TFLM does not requantize: it rejects inputs quantized differently from the output."""
    p = tmp_path / "m.tflite"
    p.write_bytes(concat_model("int8", [[1, 4, 3], [1, 4, 2]], 2, quants=[Q, q]))
    with pytest.raises(EerieError, match="output's quantization"):
        compile_model(p)


def test_concat_int32(tmp_path):
    shapes = [[2, 3], [2, 4]]
    xs = [np.random.default_rng(k).integers(-10**9, 10**9, (2, *s)).astype(np.int32)
          for k, s in enumerate(shapes)]
    assert_matches_tflm(concat_model("int32", shapes, 1), xs, tmp_path)


def values(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, (2, *shape)).astype(np.bool_)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, (2, *shape), endpoint=True).astype(dtype)


@pytest.mark.parametrize("dtype", ["bool", "int16", "int64"])
def test_concat_other_dtypes(tmp_path, dtype):
    """Three inputs on axis 1 and, in the same model, two of them on axis -1."""
    q = dict(scale=0.001, zero_point=0) if dtype == "int16" else {}
    shapes = [[2, 1, 3], [2, 4, 3], [2, 2, 3]]
    mb = ModelBuilder()
    xs = [mb.input(s, dtype, **q) for s in shapes]
    y1, y2 = mb.tensor([2, 7, 3], dtype, **q), mb.tensor([2, 4, 6], dtype, **q)
    mb.op("CONCATENATION", xs, [y1], "ConcatenationOptions", axis=1)
    mb.op("CONCATENATION", [xs[1], xs[1]], [y2], "ConcatenationOptions", axis=-1)
    mb.output(y1)
    mb.output(y2)
    assert_matches_tflm(mb.build(), [values(s, dtype, k) for k, s in enumerate(shapes)], tmp_path)


def test_concat_fused_activation_rejected(tmp_path):
    p = tmp_path / "m.tflite"
    p.write_bytes(concat_model("float32", [[2, 3], [2, 3]], 0, act="RELU"))
    with pytest.raises(EerieError, match="fused activation"):
        compile_model(p)
