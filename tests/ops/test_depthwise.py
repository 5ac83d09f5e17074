"""DEPTHWISE_CONV_2D vs TFLM: int8 (bit-exact) and float32; depth multipliers 1/2/8, strides,
SAME/VALID incl. asymmetric padding, dilation, per-channel/per-tensor weights, fused
activations, batches, no bias."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, random_inputs
from eerie_c.errors import EerieError
from tflite_builder import ACT, PAD, ModelBuilder

from test_conv import assert_mostly_unsaturated, unsaturated_scale


def out_size(padding, size, k, stride, dil):
    eff = (k - 1) * dil + 1
    return (size + stride - 1) // stride if padding == "SAME" else (size + stride - eff) // stride


def dw_model(dtype, in_shape, mult, k, stride=(1, 1), padding="SAME", dil=(1, 1), act="NONE",
             per_channel=True, bias=True, in_zp=-5, seed=0, w_channels=None, attr_mult=None,
             out_scale=0.12, out_zp=-2):
    rng = np.random.default_rng(seed)
    n, h, w_, c = in_shape
    kh, kw = k
    oc = w_channels or c * mult
    oh = out_size(padding, h, kh, stride[0], dil[0])
    ow = out_size(padding, w_, kw, stride[1], dil[1])
    wshape = (1, kh, kw, oc)
    mb = ModelBuilder()
    if dtype == "int8":
        x = mb.input(list(in_shape), "int8", scale=0.05, zero_point=in_zp)
        wscale = rng.uniform(0.002, 0.02, oc) if per_channel else [0.01]
        w = mb.const(rng.integers(-127, 128, wshape), "int8", scale=wscale,
                     zero_point=[0] * len(wscale), axis=3)
        ins = [x, w]
        if bias:
            bscale = 0.05 * np.asarray(wscale, np.float32)
            ins.append(mb.const(rng.integers(-2000, 2000, oc), "int32", scale=bscale,
                                zero_point=[0] * len(bscale), axis=0))
        y = mb.tensor([n, oh, ow, oc], "int8", scale=out_scale, zero_point=out_zp)
    else:
        x = mb.input(list(in_shape), "float32")
        w = mb.const(rng.standard_normal(wshape) * 0.3, "float32")
        ins = [x, w]
        if bias:
            ins.append(mb.const(rng.standard_normal(oc), "float32"))
        y = mb.tensor([n, oh, ow, oc], "float32")
    # no bias: a 2-input op (TFLM's depthwise kernel crashes on an omitted (-1) bias input)
    mb.op("DEPTHWISE_CONV_2D", ins, [y], "DepthwiseConv2DOptions", padding=PAD[padding],
          strideH=stride[0], strideW=stride[1], dilationHFactor=dil[0], dilationWFactor=dil[1],
          depthMultiplier=attr_mult if attr_mult is not None else mult,
          fusedActivationFunction=ACT[act])
    mb.output(y)
    return mb.build()


def check(tmp_path, dtype, in_shape, *args, **kw):
    model = dw_model(dtype, in_shape, *args, **kw)
    assert_matches_tflm(model, [random_inputs(list(in_shape), dtype, 3, seed=2)], tmp_path)


GEOMETRIES = [
    # in_shape, depth multiplier, kernel, stride, padding, dilation
    ((1, 7, 9, 5), 1, (3, 3), (1, 1), "SAME", (1, 1)),
    ((1, 7, 9, 5), 1, (3, 3), (2, 2), "SAME", (1, 1)),
    ((1, 8, 9, 4), 1, (3, 3), (2, 1), "VALID", (1, 1)),
    ((1, 7, 9, 3), 2, (3, 3), (1, 1), "SAME", (1, 1)),
    ((1, 7, 9, 3), 2, (3, 3), (2, 2), "VALID", (1, 1)),
    ((1, 6, 7, 2), 8, (3, 3), (1, 1), "SAME", (1, 1)),    # multiplier 8 (in_c 1 runs as a CONV_2D: test_depthwise_as_conv.py)
    ((1, 7, 9, 3), 1, (2, 4), (1, 1), "SAME", (1, 1)),    # even kernel: asymmetric padding
    ((1, 9, 7, 2), 2, (4, 2), (2, 2), "SAME", (1, 1)),    # odd total padding with stride 2
    ((1, 10, 11, 4), 1, (3, 3), (1, 1), "SAME", (2, 2)),  # dilation 2
    ((1, 10, 11, 2), 2, (3, 2), (2, 1), "VALID", (2, 2)),
    ((1, 3, 3, 4), 1, (5, 5), (1, 1), "SAME", (1, 1)),    # kernel larger than image: no interior
]


@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("geom", GEOMETRIES, ids=lambda g: f"{g[0]}-m{g[1]}-k{g[2]}-s{g[3]}-{g[4]}-d{g[5]}")
def test_depthwise_geometry(tmp_path, dtype, geom):
    in_shape, mult, k, stride, padding, dil = geom
    check(tmp_path, dtype, in_shape, mult, k, stride, padding, dil, act="RELU6")


# The RELU6 geometry runs above saturate many int8 outputs; the same geometries with no
# activation and a scale fitted to the accumulator range (a depthwise output sums kh*kw
# products) compare real values.
@pytest.mark.parametrize("geom", GEOMETRIES, ids=lambda g: f"{g[0]}-m{g[1]}-k{g[2]}-s{g[3]}-{g[4]}-d{g[5]}")
def test_depthwise_geometry_int8_unsaturated(tmp_path, geom):
    in_shape, mult, k, stride, padding, dil = geom
    model = dw_model("int8", in_shape, mult, k, stride, padding, dil, act="NONE",
                     out_scale=unsaturated_scale(k[0] * k[1]))
    _, ref = assert_matches_tflm(model, [random_inputs(list(in_shape), "int8", 3, seed=2)], tmp_path)
    assert_mostly_unsaturated(ref[0])


@pytest.mark.parametrize("act", ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"])
@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_depthwise_activations(tmp_path, dtype, act):
    check(tmp_path, dtype, (1, 6, 7, 4), 1, (3, 3), (1, 1), "SAME", act=act)


@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_depthwise_batch2_no_bias(tmp_path, dtype):
    check(tmp_path, dtype, (2, 6, 5, 3), 2, (3, 3), (2, 1), "SAME", bias=False)


@pytest.mark.parametrize("in_zp", [-128, 0, 37])
def test_depthwise_int8_per_tensor(tmp_path, in_zp):
    check(tmp_path, "int8", (2, 7, 6, 3), 2, (3, 3), (1, 1), "SAME", per_channel=False,
          in_zp=in_zp, act="RELU")


def test_depthwise_rejects_bad_channels(tmp_path):
    from eerie_c.api import run_model
    model = dw_model("int8", (1, 5, 5, 4), 1, (3, 3), w_channels=6, attr_mult=1)
    p = tmp_path / "g.tflite"
    p.write_bytes(model)
    with pytest.raises(EerieError, match="DEPTHWISE_CONV_2D"):
        run_model(p, [random_inputs([1, 5, 5, 4], "int8", 1)])
