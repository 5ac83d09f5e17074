"""FLOOR_DIV and FLOOR_MOD (float32, the dtype TFLM runs) vs TFLM: signs of both operands,
exact multiples, broadcasting (constant and activation operands) and batch > 1."""
import numpy as np
import pytest

from conftest import assert_matches_tflm
from tflite_builder import ModelBuilder

SHAPES = [([2, 3, 5], [2, 3, 5]), ([2, 1, 3, 4], [4]), ([3, 1], [1, 7]), ([1, 5], [2, 1])]


def model(kind, shapes, const_rhs=None):
    mb = ModelBuilder()
    a = mb.input(shapes[0], "float32")
    for k, sb in enumerate(shapes[1:]):
        b = mb.const(const_rhs, "float32") if const_rhs is not None else mb.input(sb, "float32")
        y = mb.tensor(list(np.broadcast_shapes(tuple(shapes[0]), tuple(sb))), "float32")
        mb.op(kind, [a, b], [y])
        mb.output(y)
    return mb.build()


def operands(shape, rng, n=3):
    v = rng.uniform(-9, 9, (n, *shape)).astype(np.float32)
    v.reshape(-1)[:6] = [6.0, -6.0, 7.5, -7.5, 0.0, 3.0]        # exact multiples, zero, ties
    return v


def divisors(shape, rng, n=3):
    d = (rng.uniform(0.3, 4, (n, *shape)) * rng.choice([-1, 1], (n, *shape))).astype(np.float32)
    d.reshape(-1)[:6] = [3.0, 3.0, -2.5, 2.5, -1.0, -3.0]
    return d


@pytest.mark.parametrize("kind", ["FLOOR_DIV", "FLOOR_MOD"])
@pytest.mark.parametrize("case", range(len(SHAPES)))
def test_floor_div_mod(tmp_path, kind, case):
    rng = np.random.default_rng(case)
    sa, sb = SHAPES[case]
    assert_matches_tflm(model(kind, [sa, sb]), [operands(sa, rng), divisors(sb, rng)], tmp_path)


@pytest.mark.parametrize("kind", ["FLOOR_DIV", "FLOOR_MOD"])
def test_constant_divisor(tmp_path, kind):
    rng = np.random.default_rng(5)
    d = np.array([2.0, -3.0, 0.75, -0.5], np.float32)
    assert_matches_tflm(model(kind, [[2, 3, 4], [4]], const_rhs=d), [operands([2, 3, 4], rng)],
                        tmp_path)
