"""DIV and SQUARED_DIFFERENCE vs TFLM: int8 over every pair of int8 values (bit-exact),
int16 / int32, float32, broadcasting (up to 6-D), constant operands and DIV's fused activations."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, random_inputs
from tflite_builder import ACT, HIGH_RANK_PAIRS, ModelBuilder, op_fan


def model(kind, shapes, dtype, q=None, act=None, const=None):
    mb = ModelBuilder()
    q = q or [None, None, None]
    qs = [dict(scale=s[0], zero_point=s[1]) if s else {} for s in q]
    ids = []
    for k, shape in enumerate(shapes):
        if const and const[0] == k:
            ids.append(mb.const(const[1], dtype, **qs[k]))
        else:
            ids.append(mb.input(shape, dtype, **qs[k]))
    out = list(np.broadcast_shapes(*[tuple(s) for s in shapes]))
    y = mb.tensor(out, dtype, **qs[2])
    if act is not None:
        mb.op(kind, ids, [y], "DivOptions", fusedActivationFunction=ACT[act])
    else:
        mb.op(kind, ids, [y])
    mb.output(y)
    return mb.build()


def all_pairs():
    a = np.repeat(np.arange(-128, 128, dtype=np.int8), 256).reshape(1, 256, 256)
    b = np.tile(np.arange(-128, 128, dtype=np.int8), 256).reshape(1, 256, 256)
    return a, b


# (quantization, smallest |dividend - zero point| tested): TFLM's final right shift exceeds 31
# bits (undefined behaviour in its C++, platform-dependent results) only for dividends near
# their zero point when in1 / (in2 * out) is below 64; those rows are left out.
DIV_Q = [([(0.05, -3), (0.02, 4), (0.1, 7)], 8), ([(0.1, 0), (0.1, 0), (0.05, 0)], 8),
         ([(0.02, 30), (0.3, -100), (0.01, -5)], 16), ([(0.5, 3), (0.01, -7), (0.3, 2)], 0),
         ([(0.9, -128), (0.003, 127), (0.7, 0)], 0)]


@pytest.mark.parametrize("q,min_dividend", DIV_Q)
def test_div_int8_all_pairs(tmp_path, q, min_dividend):
    a, b = all_pairs()
    keep_b = b[0, 0] != q[1][1]               # a zero divisor is undefined in TFLM
    keep_a = np.abs(a[0, :, 0].astype(int) - q[0][1]) >= min_dividend
    a, b = a[:, keep_a][:, :, keep_b], b[:, keep_a][:, :, keep_b]
    shape = list(a.shape[1:])
    assert_matches_tflm(model("DIV", [shape, shape], "int8", q), [a, b], tmp_path)


@pytest.mark.parametrize("act", ["RELU", "RELU6", "RELU_N1_TO_1"])
def test_div_int8_activation_broadcast(tmp_path, act):
    q = [(0.05, -3), (0.02, 4), (0.03, 7)]
    divisor = np.array([[5, -9, 33, 120, -128]], np.int8)
    m = model("DIV", [[3, 4, 5], [1, 5]], "int8", q, act=act, const=(1, divisor))
    assert_matches_tflm(m, [random_inputs([3, 4, 5], "int8", 3, seed=1)], tmp_path)


@pytest.mark.parametrize("act", ["NONE", "RELU6"])
def test_div_float_and_int32(tmp_path, act):
    xs = random_inputs([2, 3, 4], "float32", 3, seed=1)
    ds = random_inputs([4], "float32", 3, seed=2) + np.float32(3)
    assert_matches_tflm(model("DIV", [[2, 3, 4], [4]], "float32", act=act), [xs, ds], tmp_path)
    rng = np.random.default_rng(0)
    xi = rng.integers(-1000, 1000, (3, 2, 3, 4)).astype(np.int32)
    di = rng.choice([-7, -3, -1, 1, 2, 5, 13], (3, 4)).astype(np.int32)
    assert_matches_tflm(model("DIV", [[2, 3, 4], [4]], "int32", act=act), [xi, di], tmp_path)


SQ_Q = [[(0.05, -3), (0.02, 4), (0.1, 7)], [(0.1, 0), (0.1, 0), (0.5, -128)],
        [(0.02, 30), (0.3, -100), (0.9, -5)]]


@pytest.mark.parametrize("q", SQ_Q)
def test_sqdiff_int8_all_pairs(tmp_path, q):
    a, b = all_pairs()
    assert_matches_tflm(model("SQUARED_DIFFERENCE", [[256, 256], [256, 256]], "int8", q), [a, b], tmp_path)


def test_sqdiff_broadcast_and_types(tmp_path):
    shapes = [[2, 3, 4], [3, 1]]
    q8 = [(0.05, -3), (0.02, 4), (0.1, 7)]
    assert_matches_tflm(model("SQUARED_DIFFERENCE", shapes, "int8", q8),
                        [random_inputs(s, "int8", 3, seed=k) for k, s in enumerate(shapes)], tmp_path)
    q16 = [(0.001, 0), (0.0007, 0), (0.01, 0)]
    assert_matches_tflm(model("SQUARED_DIFFERENCE", shapes, "int16", q16),
                        [random_inputs(s, "int16", 3, seed=k) for k, s in enumerate(shapes)], tmp_path)
    assert_matches_tflm(model("SQUARED_DIFFERENCE", shapes, "float32"),
                        [random_inputs(s, "float32", 3, seed=k) for k, s in enumerate(shapes)], tmp_path)
    rng = np.random.default_rng(0)
    ints = [rng.integers(-2 ** 31, 2 ** 31, (3, *s)).astype(np.int32) for s in shapes]
    assert_matches_tflm(model("SQUARED_DIFFERENCE", shapes, "int32"), ints, tmp_path)


HIGH_Q = {"int8": {"DIV": DIV_Q[3][0], "SQUARED_DIFFERENCE": SQ_Q[0]},
          "int16": {"SQUARED_DIFFERENCE": [(0.001, 0), (0.0007, 0), (0.01, 0)]}}


@pytest.mark.parametrize("dtype", ["float32", "int8", "int16", "int32"])
def test_high_rank_broadcast(tmp_path, dtype):
    """4-D, 5-D and 6-D broadcasting (TFLM's limit is 6-D): DIV (no int16 in TFLM) and
    SQUARED_DIFFERENCE in one model; divisors are never zero."""
    kinds = ["SQUARED_DIFFERENCE"] + (["DIV"] if dtype != "int16" else [])
    specs = [(k, [dtype, dtype], dtype, HIGH_Q.get(dtype, {}).get(k), None, None) for k in kinds]
    model, inputs, labels = op_fan([(specs, HIGH_RANK_PAIRS)])
    rng = np.random.default_rng(3)
    xs = []
    for k, (shape, dt, kind, operand) in enumerate(inputs):
        n = (3, *shape)
        if kind == "DIV" and operand == 1:       # the divisor
            if dt == "float32":
                x = (rng.uniform(0.5, 3, n) * rng.choice([-1, 1], n)).astype(np.float32)
            elif dt == "int32":
                x = rng.choice([-7, -3, -1, 1, 2, 5, 13], n).astype(np.int32)
            else:                                # int8: never the zero point -7
                x = rng.choice([v for v in range(-128, 128) if v != -7], n).astype(np.int8)
        elif dt == "int32":
            x = rng.integers(-2 ** 31 if kind != "DIV" else -1000, 2 ** 31 if kind != "DIV" else 1000,
                             n).astype(np.int32)
        else:
            x = random_inputs(shape, dt, 3, seed=k)
        xs.append(x)
    assert_matches_tflm(model, xs, tmp_path, labels=labels)
