"""SHAPE and BROADCAST_ARGS vs TFLM. Shape arithmetic on static shapes is folded at compile
time (passes/fold_shapes.py): the `tf.shape(x)` -> STRIDED_SLICE -> PACK -> RESHAPE chain and
BROADCAST_ARGS -> RESHAPE leave no code; a SHAPE that is a model output and a
BROADCAST_ARGS on run-time shapes have kernels."""
import re

import numpy as np
import pytest

from conftest import assert_matches_tflm, random_inputs
from tflite_builder import ModelBuilder

from eerie_c.api import compile_model


@pytest.mark.parametrize("dtype", ["float32", "int8", "int32", "bool"])
def test_shape_as_output(tmp_path, dtype):
    mb = ModelBuilder()
    q = dict(scale=0.1, zero_point=3) if dtype == "int8" else {}
    x = mb.input([2, 3, 5, 1], dtype, **q)
    y = mb.tensor([4], "int32")
    mb.op("SHAPE", [x], [y], "ShapeOptions", outType=2)   # TensorType.INT32
    mb.output(y)
    xs = random_inputs([2, 3, 5, 1], "int8", 2).astype({"bool": np.bool_}.get(dtype, dtype))
    got, _ = assert_matches_tflm(mb.build(), [xs], tmp_path)
    assert got[0][0].tolist() == [2, 3, 5, 1]


def shape_chain_model():
    """y = reshape(x, [shape(x)[0], -1]); z = reshape(x, broadcast_args(shape(x), [2, 1, 1]))
    (TFLM's BROADCAST_TO takes a constant shape only, RESHAPE a computed one)."""
    mb = ModelBuilder()
    x = mb.input([3, 2, 5, 1], "float32")
    s = mb.tensor([4], "int32")
    mb.op("SHAPE", [x], [s], "ShapeOptions", outType=2)
    n = mb.tensor([], "int32")
    c = [mb.const(np.array([v], np.int32), "int32") for v in (0, 1, 1)]
    mb.op("STRIDED_SLICE", [s, *c], [n], "StridedSliceOptions", shrinkAxisMask=1)
    shape = mb.tensor([2], "int32")
    mb.op("PACK", [n, mb.const(np.array(-1, np.int32).reshape(()), "int32")], [shape],
          "PackOptions", valuesCount=2, axis=0)
    y = mb.tensor([3, 10], "float32")
    mb.op("RESHAPE", [x, shape], [y])
    mb.output(y)
    b = mb.tensor([4], "int32")
    mb.op("BROADCAST_ARGS", [s, mb.const(np.array([2, 1, 1], np.int32), "int32")], [b])
    z = mb.tensor([3, 2, 5, 1], "float32")
    mb.op("RESHAPE", [x, b], [z])
    mb.output(z)
    return mb.build()


def test_shape_chain_costs_nothing(tmp_path):
    model = shape_chain_model()
    assert_matches_tflm(model, [random_inputs([3, 2, 5, 1], "float32", 2)], tmp_path)
    p = tmp_path / "chain.tflite"
    p.write_bytes(model)
    res = compile_model(p)
    kinds = [op.kind for op in res.graph.ops]
    assert kinds == ["RESHAPE", "RESHAPE"], kinds     # SHAPE, slice, pack, args: folded
    c = res.files["chain.c"]
    assert not re.search(r"\b(SHAPE|STRIDED_SLICE|PACK|BROADCAST_ARGS)\b", c)
    assert "static const" not in c      # the folded shapes are read by nothing at run time


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_broadcast_args_at_run_time(tmp_path, dtype):
    mb = ModelBuilder()
    outs = []
    for la, lb in ((4, 4), (2, 4), (3, 1)):
        a, b = mb.input([la], dtype), mb.input([lb], dtype)
        y = mb.tensor([max(la, lb)], dtype)
        mb.op("BROADCAST_ARGS", [a, b], [y])
        mb.output(y)
        outs.append((la, lb))
    xs = []
    cases = {4: [[2, 1, 5, 1], [1, 3, 1, 1], [1, 1, 1, 1]], 2: [[1, 7], [6, 1], [1, 1]],
             3: [[4, 1, 2], [1, 1, 1], [9, 3, 1]], 1: [[5], [1], [1]]}
    for la, lb in outs:
        xs.append(np.array(cases[la], dtype))
        xs.append(np.array(cases[lb][::-1], dtype))
    got, _ = assert_matches_tflm(mb.build(), xs, tmp_path)
    assert got[0][0].tolist() == [2, 1, 5, 1]
