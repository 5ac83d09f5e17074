"""TRANSPOSE_CONV vs TFLM: int8 (per-channel and per-tensor weights, int32 bias), float32 and
16x8 (int64 bias, and the int16 bias TFLM widens); strides 1 and 2 (and unequal), SAME and
VALID with output sizes that make TFLite's padding odd or clipped, fused activations, with
and without bias, batches."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, eerie_run, random_inputs
from tflite_builder import ACT, PAD, ModelBuilder

from eerie_c.errors import EerieError


def tconv_model(dtype, in_shape, out_hw, out_c, k, stride=(2, 2), pad="SAME", act="NONE",
                bias=True, per_channel=True, bias_dtype=None, seed=0):
    rng = np.random.default_rng(seed)
    n, h, w_, c = in_shape
    kh, kw = k
    mb = ModelBuilder()
    out_shape = [n, out_hw[0], out_hw[1], out_c]
    shape = mb.const(out_shape, "int32")
    if dtype == "float32":
        x = mb.input(in_shape, "float32")
        w = mb.const(rng.standard_normal((out_c, kh, kw, c)) * 0.4, "float32")
        b = [mb.const(rng.standard_normal(out_c), "float32")] if bias else []
        y = mb.tensor(out_shape, "float32")
    else:
        x_scale, x_zp = (0.03, -7) if dtype == "int8" else (0.002, 0)
        x = mb.input(in_shape, dtype, scale=x_scale, zero_point=x_zp)
        wscale = rng.uniform(0.003, 0.02, out_c) if per_channel else [0.01]
        w = mb.const(rng.integers(-127, 128, (out_c, kh, kw, c)), "int8", scale=wscale,
                     zero_point=[0] * len(wscale), axis=0)
        b = []
        if bias:
            bdt = bias_dtype or ("int32" if dtype == "int8" else "int64")
            hi = {"int32": 3000, "int64": 2 ** 22, "int16": 30000}[bdt]
            bscale = x_scale * np.asarray(wscale, np.float32)
            b = [mb.const(rng.integers(-hi, hi, out_c), bdt, scale=bscale,
                          zero_point=[0] * len(bscale), axis=0)]
        taps = kh * kw * c / (stride[0] * stride[1])
        if dtype == "int8":
            y = mb.tensor(out_shape, "int8", scale=x_scale * 0.01 * 40 * np.sqrt(taps), zero_point=4)
        else:
            y = mb.tensor(out_shape, "int16", scale=x_scale * 2 * np.sqrt(taps), zero_point=0)
    mb.op("TRANSPOSE_CONV", [shape, w, x] + b, [y], "TransposeConvOptions", padding=PAD[pad],
          strideH=stride[0], strideW=stride[1], fusedActivationFunction=ACT[act])
    mb.output(y)
    return mb.build()


GEOMETRY = [
    # in_shape, out_hw, k, stride, pad
    ([1, 3, 4, 2], (6, 8), (3, 3), (2, 2), "SAME"),
    ([1, 3, 4, 2], (7, 9), (3, 3), (2, 2), "VALID"),
    ([1, 4, 4, 3], (4, 4), (3, 3), (1, 1), "SAME"),
    ([1, 4, 3, 3], (6, 5), (3, 3), (1, 1), "VALID"),
    ([2, 3, 3, 2], (5, 5), (2, 3), (2, 1), "SAME"),       # odd output: padding offset
    ([1, 2, 3, 1], (8, 9), (4, 5), (3, 2), "SAME"),       # kernel wider than the stride
    ([1, 3, 3, 2], (6, 6), (2, 2), (2, 2), "VALID"),      # taps do not overlap
    ([1, 3, 3, 2], (5, 5), (3, 3), (2, 2), "VALID"),      # output cropped at the end
    ([1, 3, 3, 2], (5, 6), (3, 4), (2, 2), "SAME"),       # padding 1 before, stride 2
]


@pytest.mark.parametrize("dtype", ["int8", "float32", "int16"])
@pytest.mark.parametrize("in_shape,out_hw,k,stride,pad", GEOMETRY)
def test_transpose_conv_geometry(tmp_path, dtype, in_shape, out_hw, k, stride, pad):
    model = tconv_model(dtype, in_shape, out_hw, 3, k, stride, pad)
    assert_matches_tflm(model, [random_inputs(in_shape, dtype, 2, seed=1)], tmp_path)


@pytest.mark.parametrize("dtype", ["int8", "float32", "int16"])
@pytest.mark.parametrize("act", ["RELU", "RELU6"])
def test_transpose_conv_activations(tmp_path, dtype, act):
    model = tconv_model(dtype, [1, 3, 3, 2], (6, 6), 4, (3, 3), act=act)
    assert_matches_tflm(model, [random_inputs([1, 3, 3, 2], dtype, 3, seed=2)], tmp_path)


@pytest.mark.parametrize("dtype", ["int8", "float32", "int16"])
def test_transpose_conv_no_bias(tmp_path, dtype):
    model = tconv_model(dtype, [1, 3, 4, 3], (6, 8), 5, (3, 3), bias=False)
    assert_matches_tflm(model, [random_inputs([1, 3, 4, 3], dtype, 2, seed=3)], tmp_path)


@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_transpose_conv_per_tensor_weights(tmp_path, dtype):
    model = tconv_model(dtype, [1, 3, 3, 2], (6, 6), 3, (3, 3), per_channel=False)
    assert_matches_tflm(model, [random_inputs([1, 3, 3, 2], dtype, 2, seed=4)], tmp_path)


def test_transpose_conv_16x8_int16_bias(tmp_path):
    """TFLM widens an int16 bias of a 16x8 TRANSPOSE_CONV to int64 at run time."""
    model = tconv_model("int16", [1, 3, 3, 2], (6, 6), 3, (3, 3), bias_dtype="int16")
    assert_matches_tflm(model, [random_inputs([1, 3, 3, 2], "int16", 2, seed=5)], tmp_path)


def test_transpose_conv_16x8_int32_bias_is_rejected(tmp_path):
    """TFLM reads a 16x8 TRANSPOSE_CONV bias as int64 unless it is int16: an int32 bias gives
    garbage there, so eerie-c refuses it with a one-line error."""
    model = tconv_model("int16", [1, 3, 3, 2], (6, 6), 3, (3, 3), bias_dtype="int32")
    with pytest.raises(EerieError, match=r"TRANSPOSE_CONV .*int64 \(or int16\) bias, got int32"):
        eerie_run(model, [random_inputs([1, 3, 3, 2], "int16", 1)], tmp_path)


def test_transpose_conv_output_shape_mismatch_is_rejected(tmp_path):
    mb = ModelBuilder()
    shape = mb.const([1, 7, 7, 2], "int32")
    x = mb.input([1, 3, 3, 2], "float32")
    w = mb.const(np.ones((2, 3, 3, 2)), "float32")
    y = mb.tensor([1, 6, 6, 2], "float32")
    mb.op("TRANSPOSE_CONV", [shape, w, x], [y], "TransposeConvOptions", padding=PAD["SAME"],
          strideH=2, strideW=2)
    mb.output(y)
    with pytest.raises(EerieError, match="output_shape"):
        eerie_run(mb.build(), [random_inputs([1, 3, 3, 2], "float32", 1)], tmp_path)
