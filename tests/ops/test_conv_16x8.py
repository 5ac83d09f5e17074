"""16x8 quantization (int16 activations, int8 weights) for CONV_2D, DEPTHWISE_CONV_2D and
FULLY_CONNECTED vs TFLM: int64 / int32 / no bias (an int32 bias selects TFLM's int32
accumulator and 32-bit requantization, the others int64 and the 64-bit one), per-channel and per-tensor weights, strides, SAME/VALID, dilation,
depth multiplier, fused activations, inputs across the whole int16 range."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, eerie_run, random_inputs
from tflite_builder import ACT, PAD, ModelBuilder

from eerie_c.errors import EerieError

X_SCALE = 0.002


def _out(size, k, s, d, pad):
    eff = (k - 1) * d + 1
    return (size + s - 1) // s if pad == "SAME" else (size + s - eff) // s


def _bias(mb, rng, n, wscale, dtype, hi=2 ** 22):
    """`hi` about the size of the sums, so neither swamps the other."""
    if dtype is None:
        return []
    bscale = X_SCALE * np.asarray(wscale, np.float32)
    return [mb.const(rng.integers(-hi, hi, n), dtype, scale=bscale, zero_point=[0] * len(bscale),
                     axis=0)]


def conv_model(kind, in_shape, out_c, k, stride=1, dilation=1, pad="SAME", act="NONE",
               bias="int64", per_channel=True, out_scale=None, bias_hi=2 ** 22, seed=0):
    """CONV_2D (out_c filters) or DEPTHWISE_CONV_2D (out_c = in_c * depth multiplier)."""
    rng = np.random.default_rng(seed)
    n, h, w_, c = in_shape
    kh, kw = k
    mb = ModelBuilder()
    x = mb.input(in_shape, "int16", scale=X_SCALE, zero_point=0)
    wscale = rng.uniform(0.002, 0.02, out_c) if per_channel else [0.01]
    if kind == "CONV_2D":
        w = mb.const(rng.integers(-127, 128, (out_c, kh, kw, c)), "int8", scale=wscale,
                     zero_point=[0] * len(wscale), axis=0)
    else:
        w = mb.const(rng.integers(-127, 128, (1, kh, kw, out_c)), "int8", scale=wscale,
                     zero_point=[0] * len(wscale), axis=3)
    ins = [x, w] + _bias(mb, rng, out_c, wscale, bias, bias_hi)
    oh, ow = _out(h, kh, stride, dilation, pad), _out(w_, kw, stride, dilation, pad)
    # by default an output scale that keeps most results of full-range inputs inside int16
    taps = kh * kw * (c if kind == "CONV_2D" else 1)
    y = mb.tensor([n, oh, ow, out_c], "int16",
                  scale=out_scale or X_SCALE * 2 * np.sqrt(taps), zero_point=0)
    common = dict(padding=PAD[pad], strideW=stride, strideH=stride, dilationWFactor=dilation,
                  dilationHFactor=dilation, fusedActivationFunction=ACT[act])
    if kind == "CONV_2D":
        mb.op(kind, ins, [y], "Conv2DOptions", **common)
    else:
        mb.op(kind, ins, [y], "DepthwiseConv2DOptions", depthMultiplier=out_c // c, **common)
    mb.output(y)
    return mb.build()


def fc_model(batches, depth, units, act="NONE", bias="int64", per_channel=False, out_scale=None,
             bias_hi=2 ** 22, seed=0):
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    x = mb.input([batches, depth], "int16", scale=X_SCALE, zero_point=0)
    wscale = rng.uniform(0.002, 0.02, units) if per_channel else [0.01]
    w = mb.const(rng.integers(-127, 128, (units, depth)), "int8", scale=wscale,
                 zero_point=[0] * len(wscale), axis=0)
    ins = [x, w] + (_bias(mb, rng, units, wscale, bias, bias_hi) or [-1])
    y = mb.tensor([batches, units], "int16", scale=out_scale or X_SCALE * 2 * np.sqrt(depth),
                  zero_point=0)
    mb.op("FULLY_CONNECTED", ins, [y], "FullyConnectedOptions", fusedActivationFunction=ACT[act])
    mb.output(y)
    return mb.build()


def _check(model, shape, tmp_path, n=3, seed=1, shrink=1):
    """Random int16 inputs over the whole range (divided by `shrink`)."""
    x = (random_inputs(shape, "int16", n, seed=seed) // shrink).astype(np.int16)
    assert_matches_tflm(model, [x], tmp_path)


# --- CONV_2D ---------------------------------------------------------------------------

@pytest.mark.parametrize("bias", ["int64", "int32", None])
@pytest.mark.parametrize("per_channel", [True, False])
def test_conv_bias_types(tmp_path, bias, per_channel):
    model = conv_model("CONV_2D", [1, 6, 5, 3], 4, (3, 3), bias=bias, per_channel=per_channel)
    _check(model, [1, 6, 5, 3], tmp_path)


@pytest.mark.parametrize("stride,pad,dilation,k", [
    (2, "SAME", 1, (3, 3)), (2, "VALID", 1, (3, 2)), (1, "VALID", 2, (3, 3)),
    (2, "SAME", 2, (2, 3)), (1, "SAME", 1, (1, 1))])
@pytest.mark.parametrize("bias", ["int64", "int32"])
def test_conv_geometry(tmp_path, stride, pad, dilation, k, bias):
    model = conv_model("CONV_2D", [2, 7, 6, 3], 5, k, stride=stride, dilation=dilation, pad=pad,
                       bias=bias)
    _check(model, [2, 7, 6, 3], tmp_path, n=2)


@pytest.mark.parametrize("act", ["RELU", "RELU6", "RELU_N1_TO_1"])
@pytest.mark.parametrize("bias", ["int64", None])
def test_conv_activations(tmp_path, act, bias):
    # smaller inputs and an output scale that puts 6.0 and -1..1 well inside int16, so the
    # clamps of RELU6 / RELU_N1_TO_1 cut some results and pass others
    model = conv_model("CONV_2D", [1, 5, 5, 2], 3, (3, 3), act=act, bias=bias, out_scale=4e-4,
                       bias_hi=2 ** 16)
    _check(model, [1, 5, 5, 2], tmp_path, shrink=16)


def test_conv_int32_accumulator_wraps(tmp_path):
    """int32 bias: TFLM sums in int32. 4 x 4 x 128 taps of 32767 x +-127 overflow it (by
    about 4x), so this checks the wrap-around, not just the rounding."""
    mb = ModelBuilder()
    x = mb.input([1, 4, 4, 128], "int16", scale=X_SCALE, zero_point=0)
    wdata = np.stack([np.full((4, 4, 128), 127), np.full((4, 4, 128), -127),
                      np.where(np.arange(4 * 4 * 128).reshape(4, 4, 128) % 3 == 0, 127, -90)])
    w = mb.const(wdata, "int8", scale=[0.01, 0.02, 0.005], zero_point=[0, 0, 0], axis=0)
    b = mb.const([1000, -7, 123456], "int32", scale=X_SCALE * np.array([0.01, 0.02, 0.005]),
                 zero_point=[0, 0, 0])
    y = mb.tensor([1, 1, 1, 3], "int16", scale=0.5, zero_point=0)
    mb.op("CONV_2D", [x, w, b], [y], "Conv2DOptions", padding=PAD["VALID"], strideW=1, strideH=1)
    mb.output(y)
    xs = np.stack([np.full((1, 4, 4, 128), v, np.int16) for v in (32767, -32768, 30000, 1)])
    assert_matches_tflm(mb.build(), [xs], tmp_path)


# --- DEPTHWISE_CONV_2D ---------------------------------------------------------------------

@pytest.mark.parametrize("mult", [1, 3])
@pytest.mark.parametrize("bias", ["int64", None])
@pytest.mark.parametrize("per_channel", [True, False])
def test_depthwise_bias_and_multiplier(tmp_path, mult, bias, per_channel):
    model = conv_model("DEPTHWISE_CONV_2D", [1, 6, 7, 3], 3 * mult, (3, 3), bias=bias,
                       per_channel=per_channel)
    _check(model, [1, 6, 7, 3], tmp_path)


@pytest.mark.parametrize("stride,pad,dilation,k", [
    (2, "SAME", 1, (3, 3)), (2, "VALID", 1, (2, 3)), (1, "SAME", 2, (3, 3)),
    (1, "VALID", 3, (2, 2))])
def test_depthwise_geometry(tmp_path, stride, pad, dilation, k):
    model = conv_model("DEPTHWISE_CONV_2D", [2, 8, 7, 2], 4, k, stride=stride,
                       dilation=dilation, pad=pad)
    _check(model, [2, 8, 7, 2], tmp_path, n=2)


@pytest.mark.parametrize("act", ["RELU", "RELU6"])
def test_depthwise_activations(tmp_path, act):
    model = conv_model("DEPTHWISE_CONV_2D", [1, 5, 4, 3], 6, (3, 3), act=act, out_scale=4e-4,
                       bias_hi=2 ** 16)
    _check(model, [1, 5, 4, 3], tmp_path, shrink=16)


def test_depthwise_int32_bias_is_rejected(tmp_path):
    """TFLM reads a 16x8 depthwise bias as int64 whatever its type (an int32 bias gives
    garbage there), so eerie-c refuses it with a one-line error."""
    model = conv_model("DEPTHWISE_CONV_2D", [1, 4, 4, 2], 2, (3, 3), bias="int32")
    with pytest.raises(EerieError, match="DEPTHWISE_CONV_2D .*int64 bias, got int32"):
        eerie_run(model, [random_inputs([1, 4, 4, 2], "int16", 1)], tmp_path)


# --- FULLY_CONNECTED -------------------------------------------------------------------------

@pytest.mark.parametrize("bias", ["int64", "int32", None])
@pytest.mark.parametrize("per_channel", [False, True])
def test_fc_bias_types(tmp_path, bias, per_channel):
    model = fc_model(3, 37, 11, bias=bias, per_channel=per_channel)
    _check(model, [3, 37], tmp_path)


@pytest.mark.parametrize("act", ["RELU", "RELU6", "RELU_N1_TO_1"])
def test_fc_activations(tmp_path, act):
    model = fc_model(2, 16, 9, act=act, out_scale=4e-4, bias_hi=2 ** 16)
    _check(model, [2, 16], tmp_path, shrink=16)


# --- rejected variants -----------------------------------------------------------------------

def test_nonzero_zero_point_is_rejected(tmp_path):
    mb = ModelBuilder()
    x = mb.input([1, 4], "int16", scale=0.01, zero_point=5)
    w = mb.const(np.ones((3, 4)), "int8", scale=[0.01], zero_point=[0])
    y = mb.tensor([1, 3], "int16", scale=0.02, zero_point=0)
    mb.op("FULLY_CONNECTED", [x, w, -1], [y], "FullyConnectedOptions")
    mb.output(y)
    with pytest.raises(EerieError, match="zero point 0"):
        eerie_run(mb.build(), [random_inputs([1, 4], "int16", 1)], tmp_path)
