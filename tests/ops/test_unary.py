"""Unary elementwise ops vs TFLM: int8 over all 256 input values (bit-exact) for several
quantizations, int16 where TFLM has it, float32 on random and edge values, CAST pairs."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, eerie_run, random_inputs
from eerie_c.errors import EerieError
from tflite_builder import ModelBuilder

OPTIONS = {"LEAKY_RELU": "LeakyReluOptions"}


def unary_model(kind, shape, dtype, q_in=None, q_out=None, out_dtype=None, **opts):
    mb = ModelBuilder()
    out_dtype = out_dtype or dtype
    qi = dict(scale=q_in[0], zero_point=q_in[1]) if q_in else {}
    qo = dict(scale=q_out[0], zero_point=q_out[1]) if q_out else {}
    x = mb.input(shape, dtype, **qi)
    y = mb.tensor(shape, out_dtype, **qo)
    mb.op(kind, [x], [y], OPTIONS.get(kind) if opts else None, **opts)
    mb.output(y)
    return mb.build()


def all_int8(n=1):
    return np.tile(np.arange(-128, 128, dtype=np.int8).reshape(1, 1, 256), (n, 1, 1))


QUANTS = [((0.1, 0), (0.1, 0)), ((0.05, -20), (0.08, 10)), ((0.5, 10), (0.02, -128)),
          ((0.0123, -128), (0.0123, -128)), ((0.37, 127), (1.3, 3)), ((0.02, 5), (0.4, -7))]


# TFLM rejects HARD_SWISH when input scale / 128 exceeds the output scale: those pairs are
# left out of the parametrization (not skipped).
@pytest.mark.parametrize("kind,q_in,q_out", [(k, qi, qo) for k in ("ABS", "ELU", "HARD_SWISH") for qi, qo in QUANTS
                                             if not (k == "HARD_SWISH" and qi[0] / 128 > qo[0])])
def test_int8_all_inputs(tmp_path, kind, q_in, q_out):
    model = unary_model(kind, [1, 256], "int8", q_in, q_out)
    assert_matches_tflm(model, [all_int8()], tmp_path)


@pytest.mark.parametrize("alpha", [0.2, 0.01, 1.7, -0.5])
@pytest.mark.parametrize("q_in,q_out", QUANTS[:4])
def test_leaky_relu_int8_all_inputs(tmp_path, alpha, q_in, q_out):
    model = unary_model("LEAKY_RELU", [1, 256], "int8", q_in, q_out, alpha=alpha)
    assert_matches_tflm(model, [all_int8()], tmp_path)


@pytest.mark.parametrize("q_in,q_out", [((0.1, -128), (0.05, -100)), ((0.003, -128), (0.1, 0)),
                                        ((0.7, -50), (0.004, -128)), ((0.02, 0), (0.02, 0))])
def test_rsqrt_int8_valid_inputs(tmp_path, q_in, q_out):
    """TFLM refuses negative inputs, so feed every value from the zero point up."""
    vals = np.arange(q_in[1], 128, dtype=np.int8)
    model = unary_model("RSQRT", [1, vals.size], "int8", q_in, q_out)
    assert_matches_tflm(model, [vals.reshape(1, 1, -1)], tmp_path)


def test_hard_swish_int8_4d(tmp_path):
    shape = [2, 3, 5, 7]
    model = unary_model("HARD_SWISH", shape, "int8", (0.05, 3), (0.03, -20))
    assert_matches_tflm(model, [random_inputs(shape, "int8", 3, seed=1)], tmp_path)


def test_hard_swish_int8_rejects_coarse_input(tmp_path):
    model = unary_model("HARD_SWISH", [1, 8], "int8", (1.0, 0), (0.001, 0))
    with pytest.raises(EerieError, match="HARD_SWISH"):
        eerie_run(model, [random_inputs([1, 8], "int8", 1)], tmp_path)


def test_int16_abs_and_leaky_relu(tmp_path):
    xs = random_inputs([1, 300], "int16", 3, seed=4)
    xs[0, 0, :3] = [-32768, 32767, 0]
    for model in (unary_model("ABS", [1, 300], "int16", (0.001, 0), (0.0013, 0)),
                  unary_model("ABS", [1, 300], "int16", (0.001, 0), (0.001, 0)),
                  unary_model("ABS", [1, 300], "int16"),
                  unary_model("LEAKY_RELU", [1, 300], "int16", (0.001, 0), (0.0007, 0), alpha=0.3),
                  unary_model("LEAKY_RELU", [1, 300], "int16", (0.0013, 0), (0.0031, 0), alpha=-0.7),
                  unary_model("LEAKY_RELU", [1, 300], "int16", (0.0021, 0), (0.0017, 0), alpha=1.3)):
        assert_matches_tflm(model, [xs], tmp_path)


FLOAT_KINDS = ["ABS", "NEG", "SQUARE", "EXP", "LOG", "SQRT", "RSQRT", "ELU", "HARD_SWISH",
               "FLOOR", "CEIL", "ROUND", "SIN", "COS"]


@pytest.mark.parametrize("kind", FLOAT_KINDS)
def test_float(tmp_path, kind):
    shape = [2, 3, 4, 5]
    xs = random_inputs(shape, "float32", 3, seed=7, scale=4.0)
    if kind in ("LOG", "SQRT", "RSQRT"):
        xs = np.abs(xs) + np.float32(0.01)
    flat = xs.reshape(3, -1)
    flat[0, :10] = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.0, -3.0, 2.0, 0.0]
    if kind in ("LOG", "SQRT", "RSQRT"):
        flat[0, :10] = np.abs(flat[0, :10]) + 0.25
    assert_matches_tflm(unary_model(kind, shape, "float32"), [xs], tmp_path)


def test_round_half_to_even_exact(tmp_path):
    xs = np.array([[0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 4.5, 0.49999997, -7.5, 1e7 + 1, 0.0]],
                  np.float32)  # one inference of shape [12]
    got, ref = assert_matches_tflm(unary_model("ROUND", [12], "float32"), [xs], tmp_path)
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(got[0][0, :6], [0, 2, 2, -0, -2, -2])


def test_leaky_relu_float(tmp_path):
    xs = random_inputs([3, 17], "float32", 3, seed=2)
    assert_matches_tflm(unary_model("LEAKY_RELU", [3, 17], "float32", alpha=0.15), [xs], tmp_path)


def test_float_only_ops_reject_int8(tmp_path):
    model = unary_model("EXP", [4], "int8", (0.1, 0), (0.1, 0))
    with pytest.raises(EerieError, match="EXP with int8"):
        eerie_run(model, [random_inputs([4], "int8", 1)], tmp_path)


CAST_TYPES = ["int8", "int16", "int32", "uint32", "float32", "bool"]


def _cast_inputs(dtype, n=40):
    rng = np.random.default_rng(3)
    if dtype == "bool":
        return rng.integers(0, 2, (2, n)).astype(np.bool_)
    if dtype == "float32":
        v = rng.uniform(-120, 120, (2, n)).astype(np.float32)
        v[0, :6] = [0.0, -0.0, 0.9, -0.9, 127.0, -128.0]
        return v
    info = np.iinfo(dtype)
    v = rng.integers(info.min, info.max, (2, n), endpoint=True).astype(dtype)
    v[0, :3] = [0, info.min, info.max]
    return v


@pytest.mark.parametrize("src", CAST_TYPES)
def test_cast(tmp_path, src):
    for dst in CAST_TYPES:
        xs = _cast_inputs(src)
        if src == "float32" and dst in ("int8", "int16"):
            xs = np.clip(xs, -128, 127)      # out-of-range float -> int is undefined in C and C++
        if src == "float32" and dst == "uint32":
            xs = np.abs(xs)                  # so is a negative float -> uint32
        assert_matches_tflm(unary_model("CAST", [40], src, out_dtype=dst), [xs], tmp_path)


def test_cast_unsupported_output(tmp_path):
    model = unary_model("CAST", [4], "int8", out_dtype="int64")
    with pytest.raises(EerieError, match="CAST"):
        eerie_run(model, [random_inputs([4], "int8", 1)], tmp_path)
