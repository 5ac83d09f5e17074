"""ADD_N vs TFLM: float32 and int8 (shared input quantization, TFLM's rule; zero points 0
and not), 2 to 5 inputs, a constant input, odd shapes and batch > 1."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, random_inputs
from tflite_builder import ModelBuilder

CASES = [([2, 3, 5], 2), ([1, 7], 3), ([3, 2, 2, 3], 5)]


def add_n_model(dtype, qin=None, qout=None, const=False):
    mb = ModelBuilder()
    kw = (lambda q: dict(scale=q[0], zero_point=q[1]) if q else {})
    feeds = []
    for shape, k in CASES:
        ids = []
        for j in range(k):
            if const and j == 1:
                ids.append(mb.const(random_inputs(shape, dtype, 1, seed=99)[0], dtype, **kw(qin)))
            else:
                ids.append(mb.input(shape, dtype, **kw(qin)))
                feeds.append(shape)
        y = mb.tensor(shape, dtype, **kw(qout))
        mb.op("ADD_N", ids, [y], "AddNOptions")
        mb.output(y)
    return mb.build(), feeds


@pytest.mark.parametrize("const", [False, True])
def test_add_n_float(tmp_path, const):
    model, feeds = add_n_model("float32", const=const)
    assert_matches_tflm(model, [random_inputs(s, "float32", 3, seed=k) for k, s in enumerate(feeds)],
                        tmp_path)


@pytest.mark.parametrize("qin,qout", [((0.05, 0), (0.1, 0)), ((0.05, -7), (0.12, 5)),
                                      ((0.02, 20), (0.03, -128)), ((0.1, -128), (0.5, 0))])
def test_add_n_int8(tmp_path, qin, qout):
    model, feeds = add_n_model("int8", qin, qout, const=qin[1] == -7)
    assert_matches_tflm(model, [random_inputs(s, "int8", 3, seed=k) for k, s in enumerate(feeds)],
                        tmp_path)
