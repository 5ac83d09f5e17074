"""RESHAPE vs TFLM. Between two ops it is aliased away: no code, no copy, no extra arena. A
reshape from a graph input straight to a graph output (two caller buffers) is a copy. int8 and
float32 throughout; bool, int16, int64 and uint8 too (test_reshape_other_dtypes)."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, random_inputs
from tflite_builder import PAD, ModelBuilder

from eerie_c.api import compile_model

Q = dict(scale=0.05, zero_point=-2)


def _q(dtype, **kw):
    return dict(Q, **kw) if dtype == "int8" else {}


def pool_fc_model(dtype, with_reshape, reshape_output=False, reshape_input=False):
    """[1,4,4,2] -> AVERAGE_POOL 2x2 -> [1,2,2,2] -> (RESHAPE [1,8]) -> FULLY_CONNECTED -> [1,3]."""
    rng = np.random.default_rng(0)
    mb = ModelBuilder()
    if reshape_input:
        x0 = mb.input([1, 32], dtype, **_q(dtype))
        x = mb.tensor([1, 4, 4, 2], dtype, **_q(dtype))
        mb.op("RESHAPE", [x0, mb.const(np.array([1, 4, 4, 2], np.int32), "int32")], [x],
              "ReshapeOptions", newShape=[1, 4, 4, 2])
    else:
        x = mb.input([1, 4, 4, 2], dtype, **_q(dtype))
    p = mb.tensor([1, 2, 2, 2], dtype, **_q(dtype))
    mb.op("AVERAGE_POOL_2D", [x], [p], "Pool2DOptions", padding=PAD["VALID"], strideH=2, strideW=2,
          filterHeight=2, filterWidth=2)
    if reshape_output:
        r = mb.tensor([2, 4], dtype, **_q(dtype))
        mb.op("RESHAPE", [p, mb.const(np.array([2, 4], np.int32), "int32")], [r],
              "ReshapeOptions", newShape=[2, 4])
        mb.output(r)
        return mb.build()
    if with_reshape:
        r = mb.tensor([1, 8], dtype, **_q(dtype))
        mb.op("RESHAPE", [p, mb.const(np.array([1, 8], np.int32), "int32")], [r],
              "ReshapeOptions", newShape=[1, 8])
        p = r
    if dtype == "int8":
        w = mb.const(rng.integers(-127, 128, (3, 8)), "int8", scale=0.01, zero_point=0)
        b = mb.const(rng.integers(-500, 500, 3), "int32", scale=0.05 * 0.01, zero_point=0)
        y = mb.tensor([1, 3], "int8", scale=0.03, zero_point=1)
    else:
        w = mb.const(rng.standard_normal((3, 8)), "float32")
        b = mb.const(rng.standard_normal(3), "float32")
        y = mb.tensor([1, 3], "float32")
    mb.op("FULLY_CONNECTED", [p, w, b], [y], "FullyConnectedOptions")
    mb.output(y)
    return mb.build()


def compiled(tmp_path, model, name):
    path = tmp_path / f"{name}.tflite"
    path.write_bytes(model)
    res = compile_model(path)
    return res.files[f"{name}.c"], res.report


@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_reshape_between_ops_is_free(tmp_path, dtype):
    model = pool_fc_model(dtype, with_reshape=True)
    assert_matches_tflm(model, [random_inputs([1, 4, 4, 2], dtype, 4)], tmp_path)
    c_src, report = compiled(tmp_path, model, "with_reshape")
    _, base = compiled(tmp_path, pool_fc_model(dtype, with_reshape=False), "without_reshape")
    assert "memcpy" not in c_src
    assert [op["kind"] for op in report["ops"]] == ["AVERAGE_POOL_2D", "FULLY_CONNECTED"]
    assert report["arena_bytes"] <= base["arena_bytes"]


@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_reshape_into_graph_output_is_free(tmp_path, dtype):
    model = pool_fc_model(dtype, True, reshape_output=True)
    assert_matches_tflm(model, [random_inputs([1, 4, 4, 2], dtype, 4)], tmp_path)
    c_src, report = compiled(tmp_path, model, "m")
    assert "memcpy" not in c_src
    assert [op["kind"] for op in report["ops"]] == ["AVERAGE_POOL_2D"]


@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_reshape_of_graph_input_is_free(tmp_path, dtype):
    model = pool_fc_model(dtype, True, reshape_input=True)
    assert_matches_tflm(model, [random_inputs([1, 32], dtype, 4)], tmp_path)
    c_src, report = compiled(tmp_path, model, "m")
    assert "memcpy" not in c_src
    assert "RESHAPE" not in [op["kind"] for op in report["ops"]]


@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_reshape_input_to_output_copies(tmp_path, dtype):
    mb = ModelBuilder()
    x = mb.input([2, 6], dtype, **_q(dtype))
    y = mb.tensor([3, 2, 2], dtype, **_q(dtype))
    mb.op("RESHAPE", [x, mb.const(np.array([3, 2, 2], np.int32), "int32")], [y],
          "ReshapeOptions", newShape=[3, 2, 2])
    mb.output(y)
    model = mb.build()
    got, _ = assert_matches_tflm(model, [random_inputs([2, 6], dtype, 3)], tmp_path)
    c_src, report = compiled(tmp_path, model, "m")
    assert "memcpy" in c_src
    assert [op["kind"] for op in report["ops"]] == ["RESHAPE"]
    assert report["arena_bytes"] == 0


@pytest.mark.parametrize("dtype", ["bool", "int16", "int64", "uint8"])
def test_reshape_other_dtypes(tmp_path, dtype):
    """Input to output (a copy) and input -> RESHAPE -> RESHAPE -> output (the middle aliased)."""
    q = dict(scale=0.001, zero_point=0) if dtype == "int16" else {}
    mb = ModelBuilder()
    x = mb.input([2, 6], dtype, **q)
    shape = lambda v: mb.const(np.array(v, np.int32), "int32")
    y, mid, y2 = mb.tensor([3, 2, 2], dtype, **q), mb.tensor([12], dtype, **q), mb.tensor([4, 3], dtype, **q)
    mb.op("RESHAPE", [x, shape([3, 2, 2])], [y], "ReshapeOptions", newShape=[3, 2, 2])
    mb.op("RESHAPE", [x, shape([-1])], [mid], "ReshapeOptions", newShape=[-1])
    mb.op("RESHAPE", [mid, shape([4, -1])], [y2], "ReshapeOptions", newShape=[4, -1])
    mb.output(y)
    mb.output(y2)
    rng = np.random.default_rng(0)
    if dtype == "bool":
        xs = rng.integers(0, 2, (3, 2, 6)).astype(np.bool_)
    else:
        info = np.iinfo(dtype)
        xs = rng.integers(info.min, info.max, (3, 2, 6), endpoint=True).astype(dtype)
    got, _ = assert_matches_tflm(mb.build(), [xs], tmp_path)
    np.testing.assert_array_equal(got[1], xs.reshape(3, 4, 3))
