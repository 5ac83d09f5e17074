"""BATCH_MATMUL vs TFLM: float32, int8 (per-tensor, non-zero zero points) and int16 (64-bit
sums), adj_x / adj_y,
broadcast batch dims (rank 2..5), and a constant right-hand side."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, random_inputs
from tflite_builder import ModelBuilder

Q = {"lhs": (0.05, -3), "rhs": (0.04, 7), "out": (0.11, 2)}
Q16 = {"lhs": (0.0005, 0), "rhs": (0.0004, 0), "out": (0.02, 0)}   # int16: zero points 0


def bmm_model(dtype, lhs, rhs, out, adj_x=False, adj_y=False, const_rhs=False, seed=0):
    mb = ModelBuilder()

    def q(role):
        qq = {"int8": Q, "int16": Q16}.get(dtype)
        return dict(scale=qq[role][0], zero_point=qq[role][1]) if qq else {}

    a = mb.input(lhs, dtype, **q("lhs"))
    if const_rhs:
        rng = np.random.default_rng(seed)
        data = {"int8": lambda: rng.integers(-128, 128, rhs), "int16": lambda: rng.integers(-32768, 32768, rhs),
                "float32": lambda: rng.standard_normal(rhs)}[dtype]()
        b = mb.const(data, dtype, **q("rhs"))
    else:
        b = mb.input(rhs, dtype, **q("rhs"))
    y = mb.tensor(out, dtype, **q("out"))
    mb.op("BATCH_MATMUL", [a, b], [y], "BatchMatMulOptions", adjX=adj_x, adjY=adj_y)
    mb.output(y)
    return mb.build()


CASES = [
    # lhs, rhs, out, adj_x, adj_y
    ([3, 5], [5, 4], [3, 4], False, False),
    ([2, 3, 5], [2, 5, 4], [2, 3, 4], False, False),
    ([2, 5, 3], [2, 5, 4], [2, 3, 4], True, False),
    ([2, 3, 5], [2, 4, 5], [2, 3, 4], False, True),
    ([2, 5, 3], [2, 4, 5], [2, 3, 4], True, True),
    ([2, 1, 3, 6], [1, 3, 6, 2], [2, 3, 3, 2], False, False),      # both broadcast
    ([4, 3, 6], [6, 2], [4, 3, 2], False, False),                  # rank-2 rhs broadcast
    ([2, 1, 2, 3, 4], [3, 2, 4, 5], [2, 3, 2, 3, 5], False, False),  # rank 5
]


@pytest.mark.parametrize("dtype", ["float32", "int8"])
@pytest.mark.parametrize("lhs,rhs,out,adj_x,adj_y", CASES)
def test_batch_matmul(tmp_path, dtype, lhs, rhs, out, adj_x, adj_y):
    model = bmm_model(dtype, lhs, rhs, out, adj_x, adj_y)
    assert_matches_tflm(model, [random_inputs(lhs, dtype, 3, seed=1),
                                random_inputs(rhs, dtype, 3, seed=2)], tmp_path)


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_batch_matmul_const_rhs(tmp_path, dtype):
    model = bmm_model(dtype, [2, 3, 8], [2, 5, 8], [2, 3, 5], adj_y=True, const_rhs=True)
    assert_matches_tflm(model, [random_inputs([2, 3, 8], dtype, 3, seed=3)], tmp_path)


def test_batch_matmul_int8_saturates(tmp_path):
    """A long contraction with a small output scale: outputs clamp at both int8 ends."""
    global Q
    old, Q = Q, dict(Q, out=(0.01, -1))
    try:
        model = bmm_model("int8", [2, 4, 64], [2, 64, 3], [2, 4, 3])
    finally:
        Q = old
    got, _ = assert_matches_tflm(model, [random_inputs([2, 4, 64], "int8", 2, seed=4),
                                         random_inputs([2, 64, 3], "int8", 2, seed=5)], tmp_path)
    assert (got[0] == 127).any() and (got[0] == -128).any()


@pytest.mark.parametrize("case", [1, 4, 5, 7])
def test_batch_matmul_int16(tmp_path, case):
    lhs, rhs, out, adj_x, adj_y = CASES[case]
    model = bmm_model("int16", lhs, rhs, out, adj_x, adj_y)
    assert_matches_tflm(model, [random_inputs(lhs, "int16", 3, seed=1),
                                random_inputs(rhs, "int16", 3, seed=2)], tmp_path)


def test_batch_matmul_int16_const_rhs(tmp_path):
    model = bmm_model("int16", [2, 3, 8], [2, 5, 8], [2, 3, 5], adj_y=True, const_rhs=True)
    assert_matches_tflm(model, [random_inputs([2, 3, 8], "int16", 3, seed=3)], tmp_path)
