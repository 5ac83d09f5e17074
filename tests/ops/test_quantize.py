"""QUANTIZE (float -> int8/int16, int -> int requantization: every (in, out) pair TFLM takes)
and DEQUANTIZE (int8 / int16 / uint8 -> float32) vs TFLM, including
exact .5 rounding ties, saturation, every int8 value, and bit-exact float results."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, random_inputs
from tflite_builder import ModelBuilder


def conv_model(kind, shape, in_dtype, out_dtype, in_q=None, out_q=None):
    mb = ModelBuilder()
    kw = (lambda q: dict(scale=q[0], zero_point=q[1]) if q else {})
    x = mb.input(shape, in_dtype, **kw(in_q))
    y = mb.tensor(shape, out_dtype, **kw(out_q))
    mb.op(kind, [x], [y])
    mb.output(y)
    return mb.build()


def half_away(v):
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


@pytest.mark.parametrize("zp", [0, -7, 100])
def test_quantize_float_int8_ties_and_saturation(tmp_path, zp):
    scale = 0.25                     # power of two: x / scale is exactly k + 0.5
    ties = (np.arange(-60, 60) + 0.5) * scale
    sat = np.array([-1000.0, -40.0, -32.5, 31.75, 32.5, 40.0, 1000.0, 0.0, -0.0, 1e6, -1e6])
    x = np.concatenate([ties, sat]).astype(np.float32).reshape(1, 1, -1)
    model = conv_model("QUANTIZE", list(x.shape[1:]), "float32", "int8", out_q=(scale, zp))
    got, _ = assert_matches_tflm(model, [x], tmp_path)
    expect = np.clip(half_away(x.astype(np.float64) / scale) + zp, -128, 127)
    np.testing.assert_array_equal(got[0], expect.astype(np.int8))


def test_quantize_float_int8_random(tmp_path):
    # a scale that is not a power of two: float (not double) division decides some roundings
    x = random_inputs([4, 250], "float32", 3, seed=5, scale=4.0)
    model = conv_model("QUANTIZE", [4, 250], "float32", "int8", out_q=(0.0371, 9))
    assert_matches_tflm(model, [x], tmp_path)


def test_quantize_float_int8_float_division(tmp_path):
    # inputs where float32 and float64 x / scale round differently: TFLM uses float32
    scale = np.float32(0.1)
    rng = np.random.default_rng(1)
    cand = (rng.standard_normal(200000) * 5).astype(np.float32)
    f = half_away((cand / scale).astype(np.float32))
    d = half_away(cand.astype(np.float64) / np.float64(scale))
    x = cand[f != d][:64]
    assert x.size > 0
    model = conv_model("QUANTIZE", [x.size], "float32", "int8", out_q=(float(scale), 3))
    got, _ = assert_matches_tflm(model, [x.reshape(1, -1)], tmp_path)
    np.testing.assert_array_equal(got[0][0], np.clip(f[f != d][:64] + 3, -128, 127))


def test_quantize_float_int16(tmp_path):
    x = np.concatenate([random_inputs([200], "float32", 1, seed=2, scale=3.0)[0],
                        np.array([0.5, -0.5, 1.5, -2.5], np.float32) / 4096,   # ties
                        np.array([10.0, -10.0, 7.9999, -8.0], np.float32)])     # saturation
    model = conv_model("QUANTIZE", [x.size], "float32", "int16", out_q=(1 / 4096, 0))
    got, _ = assert_matches_tflm(model, [x.reshape(1, -1)], tmp_path)
    assert list(got[0][0, 200:]) == [1, -1, 2, -3, 32767, -32768, 32767, -32768]


ALL_INT8 = np.arange(-128, 128, dtype=np.int8).reshape(1, 256)


@pytest.mark.parametrize("in_q,out_q", [
    ((0.05, -10), (0.03, 5)),        # rescale up, saturates
    ((0.05, -10), (0.2, 3)),         # rescale down
    ((0.05, -10), (0.05, 20)),       # equal scales: zero point shift only, saturates
    ((0.1, 0), (0.1, 0)),            # identity
    ((0.0123, 127), (0.0077, -128)),
])
def test_requantize_int8_int8(tmp_path, in_q, out_q):
    model = conv_model("QUANTIZE", [256], "int8", "int8", in_q, out_q)
    assert_matches_tflm(model, [ALL_INT8], tmp_path)


def test_requantize_int8_int16(tmp_path):
    model = conv_model("QUANTIZE", [256], "int8", "int16", (0.05, -10), (0.0007, 0))
    assert_matches_tflm(model, [ALL_INT8], tmp_path)


def test_requantize_int16_int8(tmp_path):
    x = np.concatenate([random_inputs([300], "int16", 1, seed=3)[0],
                        np.array([-32768, 32767, 0, 1, -1], np.int16)]).reshape(1, -1)
    model = conv_model("QUANTIZE", [x.shape[1]], "int16", "int8", (0.001, 0), (0.05, -4))
    assert_matches_tflm(model, [x], tmp_path)


def test_requantize_int8_uint8(tmp_path):
    model = conv_model("QUANTIZE", [256], "int8", "uint8", (0.05, -10), (0.05, 118))
    assert_matches_tflm(model, [ALL_INT8], tmp_path)


ALL_UINT8 = np.arange(256, dtype=np.uint8).reshape(1, 256)


def fan_out(kind, n, in_dtype, in_qs, outs):
    """One input of n values per in_q; one `kind` op per (input index, out dtype, out_q), each
    a model output: several requantizations checked with one compile."""
    mb = ModelBuilder()
    xs = [mb.input([n], in_dtype, scale=q[0], zero_point=q[1]) for q in in_qs]
    for k, out_dtype, out_q in outs:
        y = mb.tensor([n], out_dtype, **(dict(scale=out_q[0], zero_point=out_q[1]) if out_q else {}))
        mb.op(kind, [xs[k]], [y])
        mb.output(y)
    return mb.build()


def test_requantize_int16_int16_int32(tmp_path):
    x = np.concatenate([random_inputs([300], "int16", 1, seed=5)[0],
                        np.array([-32768, 32767, 0, 1, -1], np.int16)]).reshape(1, -1)
    model = fan_out("QUANTIZE", x.shape[1], "int16", [(0.001, 0)], [
        (0, "int16", (0.0013, 0)),    # rescale down
        (0, "int16", (0.0004, 0)),    # rescale up, saturates
        (0, "int16", (0.001, 0)),     # identity
        (0, "int32", (0.00003, 0)),
        (0, "int32", (0.001, 0))])
    assert_matches_tflm(model, [x], tmp_path)


def test_requantize_int8_int32(tmp_path):
    model = fan_out("QUANTIZE", 256, "int8", [(0.05, -10)], [
        (0, "int32", (0.0007, 0)), (0, "int32", (0.05, 0)), (0, "int32", (0.0001, 12345))])
    assert_matches_tflm(model, [ALL_INT8], tmp_path)


def test_requantize_int32_int8_int16(tmp_path):
    """int32 -> int16 / int8 (TFLM's seanet integration test quantizes an int32 tensor to int16):
    the full int32 range, where x - zero point and the equal-scale path wrap as TFLM's int32
    arithmetic does."""
    x = np.concatenate([np.random.default_rng(3).integers(-2 ** 31, 2 ** 31, 300),
                        [-2 ** 31, 2 ** 31 - 1, 2 ** 30, -2 ** 30 - 1, 0, 1, -1, 40000, -40000]])
    x = x.astype(np.int32).reshape(1, -1)
    model = fan_out("QUANTIZE", x.shape[1], "int32", [(1.49e-7, 0), (0.001, -9)], [
        (0, "int16", (0.00092197, 0)),   # the seanet model's parameters
        (0, "int8", (0.02, 5)),
        (1, "int16", (0.001, 3)),        # equal scales
        (1, "int8", (0.0003, -100))])    # rescale up, saturates
    assert_matches_tflm(model, [x, x[:, ::-1].copy()], tmp_path)


def test_requantize_uint8_int8(tmp_path):
    model = fan_out("QUANTIZE", 256, "uint8", [(0.05, 128), (0.02, 0)], [
        (0, "int8", (0.05, 0)),       # the usual uint8 -> int8 conversion: zero point - 128
        (0, "int8", (0.03, -7)),
        (1, "int8", (0.07, -128))])
    assert_matches_tflm(model, [ALL_UINT8, ALL_UINT8[:, ::-1].copy()], tmp_path)


def test_dequantize_uint8_bit_exact(tmp_path):
    qs = [(0.05, 128), (0.0123, 0), (1.0, 255)]
    model = fan_out("DEQUANTIZE", 256, "uint8", qs, [(k, "float32", None) for k in range(3)])
    got, ref = assert_matches_tflm(model, [ALL_UINT8] * 3, tmp_path)
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(g, r)


@pytest.mark.parametrize("q", [(0.05, -10), (0.0123, 127), (1.0, -128)])
def test_dequantize_int8_bit_exact(tmp_path, q):
    model = conv_model("DEQUANTIZE", [256], "int8", "float32", in_q=q)
    got, ref = assert_matches_tflm(model, [ALL_INT8], tmp_path)
    np.testing.assert_array_equal(got[0], ref[0])


def test_dequantize_int16_bit_exact(tmp_path):
    x = np.concatenate([random_inputs([300], "int16", 1, seed=4)[0],
                        np.array([-32768, 32767, 0], np.int16)]).reshape(1, -1)
    model = conv_model("DEQUANTIZE", [x.shape[1]], "int16", "float32", in_q=(0.000123, 0))
    got, ref = assert_matches_tflm(model, [x], tmp_path)
    np.testing.assert_array_equal(got[0], ref[0])


def test_quantize_dequantize_roundtrip(tmp_path):
    # QUANTIZE then DEQUANTIZE in one model: the two kernels chained through the arena
    mb = ModelBuilder()
    x = mb.input([3, 17], "float32")
    q = mb.tensor([3, 17], "int8", scale=0.02, zero_point=-1)
    y = mb.tensor([3, 17], "float32")
    mb.op("QUANTIZE", [x], [q])
    mb.op("DEQUANTIZE", [q], [y])
    mb.output(y)
    model = mb.build()
    xs = random_inputs([3, 17], "float32", 3, seed=7)
    got, ref = assert_matches_tflm(model, [xs], tmp_path)
    np.testing.assert_array_equal(got[0], ref[0])


def test_requantize_int32_int8_int16(tmp_path):
    """int32 -> int8 / int16 (TFLM's requantization of an accumulator): rescale down and up,
    equal scales, non-zero zero points, saturation and the int32 extremes (x - zp and the
    multiplier's left shift wrap as TFLM's int32 arithmetic does)."""
    rng = np.random.default_rng(11)
    x = np.concatenate([rng.integers(-3000, 3000, 200), rng.integers(-2 ** 31, 2 ** 31, 40),
                        [-2 ** 31, 2 ** 31 - 1, 0, 1, -1, 2 ** 30, -2 ** 30, 2 ** 30 - 1]])
    x = x.astype(np.int32).reshape(1, -1)
    model = fan_out("QUANTIZE", x.shape[1], "int32", [(0.001, 0), (0.0002, 37)], [
        (0, "int8", (0.05, -4)), (0, "int8", (0.001, 3)), (1, "int8", (0.0001, 0)),
        (0, "int16", (0.0013, 0)), (1, "int16", (0.0002, 0)), (1, "int16", (0.00005, -9))])
    assert_matches_tflm(model, [x, x[:, ::-1].copy()], tmp_path)
