"""CONV_2D vs TFLM: int8 (bit-exact) and float32; strides, SAME/VALID incl. asymmetric
padding, dilation, per-channel/per-tensor weights, fused activations, batches, no bias."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, random_inputs
from eerie_c.errors import EerieError
from tflite_builder import ACT, PAD, ModelBuilder


def out_size(padding, size, k, stride, dil):
    eff = (k - 1) * dil + 1
    return (size + stride - 1) // stride if padding == "SAME" else (size + stride - eff) // stride


def conv_model(dtype, in_shape, out_c, k, stride=(1, 1), padding="SAME", dil=(1, 1),
               act="NONE", per_channel=True, bias=True, in_zp=-5, seed=0, w_in_c=None, out_scale=0.3,
               out_zp=4):
    rng = np.random.default_rng(seed)
    n, h, w_, c = in_shape
    kh, kw = k
    oh = out_size(padding, h, kh, stride[0], dil[0])
    ow = out_size(padding, w_, kw, stride[1], dil[1])
    wshape = (out_c, kh, kw, w_in_c or c)
    mb = ModelBuilder()
    if dtype == "int8":
        x = mb.input(list(in_shape), "int8", scale=0.05, zero_point=in_zp)
        wscale = rng.uniform(0.002, 0.02, out_c) if per_channel else [0.01]
        w = mb.const(rng.integers(-127, 128, wshape), "int8", scale=wscale,
                     zero_point=[0] * len(wscale), axis=0)
        ins = [x, w]
        if bias:
            bscale = 0.05 * np.asarray(wscale, np.float32)
            ins.append(mb.const(rng.integers(-4000, 4000, out_c), "int32", scale=bscale,
                                zero_point=[0] * len(bscale), axis=0))
        y = mb.tensor([n, oh, ow, out_c], "int8", scale=out_scale, zero_point=out_zp)
    else:
        x = mb.input(list(in_shape), "float32")
        w = mb.const(rng.standard_normal(wshape) * 0.3, "float32")
        ins = [x, w]
        if bias:
            ins.append(mb.const(rng.standard_normal(out_c), "float32"))
        y = mb.tensor([n, oh, ow, out_c], "float32")
    if not bias:
        ins.append(-1)
    mb.op("CONV_2D", ins, [y], "Conv2DOptions", padding=PAD[padding], strideH=stride[0],
          strideW=stride[1], dilationHFactor=dil[0], dilationWFactor=dil[1],
          fusedActivationFunction=ACT[act])
    mb.output(y)
    return mb.build()


def check(tmp_path, dtype, in_shape, *args, **kw):
    model = conv_model(dtype, in_shape, *args, **kw)
    assert_matches_tflm(model, [random_inputs(list(in_shape), dtype, 3, seed=1)], tmp_path)


GEOMETRIES = [
    # in_shape, out_c, kernel, stride, padding, dilation
    ((1, 7, 9, 3), 5, (3, 3), (1, 1), "SAME", (1, 1)),
    ((1, 7, 9, 3), 5, (3, 3), (2, 2), "SAME", (1, 1)),
    ((1, 7, 9, 3), 5, (3, 3), (1, 2), "VALID", (1, 1)),
    ((1, 8, 9, 4), 6, (3, 3), (2, 2), "VALID", (1, 1)),
    ((1, 7, 9, 2), 4, (2, 4), (1, 1), "SAME", (1, 1)),    # even kernel: asymmetric padding
    ((1, 9, 7, 2), 4, (4, 2), (2, 2), "SAME", (1, 1)),    # odd total padding with stride 2
    ((1, 10, 11, 3), 4, (3, 3), (1, 1), "SAME", (2, 2)),  # dilation 2
    ((1, 10, 11, 3), 4, (3, 2), (2, 1), "VALID", (2, 2)),
    ((1, 6, 5, 8), 7, (1, 1), (1, 1), "SAME", (1, 1)),    # pointwise
    ((1, 6, 5, 8), 7, (1, 1), (2, 2), "SAME", (1, 1)),
    ((1, 3, 3, 4), 3, (5, 5), (1, 1), "SAME", (1, 1)),    # kernel larger than image: no interior
    ((1, 12, 5, 1), 8, (10, 4), (2, 2), "SAME", (1, 1)),  # kws-like first layer
]


@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("geom", GEOMETRIES, ids=lambda g: f"{g[0]}-k{g[2]}-s{g[3]}-{g[4]}-d{g[5]}")
def test_conv_geometry(tmp_path, dtype, geom):
    in_shape, out_c, k, stride, padding, dil = geom
    check(tmp_path, dtype, in_shape, out_c, k, stride, padding, dil, act="RELU6")


def unsaturated_scale(terms: int) -> float:
    """An output scale that leaves nearly every int8 output unsaturated. With inputs uniform
    over int8 at scale 0.05 (std ~3.7) and weights of std ~0.8, a sum of `terms` products has
    a std of about 3 * sqrt(terms); four of those span the int8 half-range."""
    return 4 * 3.0 * float(np.sqrt(terms)) / 128


def assert_mostly_unsaturated(ref: np.ndarray):
    """The oracle stays strong only if outputs are real values, not clamped ends."""
    saturated = float(np.mean((ref == -128) | (ref == 127)))
    assert saturated < 0.10, f"{saturated:.0%} of the reference outputs saturate"
    assert len(np.unique(ref)) >= min(20, ref.size // 4), np.unique(ref)


# The RELU6 geometry runs above saturate most int8 outputs at scale 0.3; the same geometries
# with no activation and a scale fitted to the accumulator range compare real values.
@pytest.mark.parametrize("geom", GEOMETRIES, ids=lambda g: f"{g[0]}-k{g[2]}-s{g[3]}-{g[4]}-d{g[5]}")
def test_conv_geometry_int8_unsaturated(tmp_path, geom):
    in_shape, out_c, k, stride, padding, dil = geom
    model = conv_model("int8", in_shape, out_c, k, stride, padding, dil, act="NONE",
                       out_scale=unsaturated_scale(k[0] * k[1] * in_shape[3]))
    _, ref = assert_matches_tflm(model, [random_inputs(list(in_shape), "int8", 3, seed=1)], tmp_path)
    assert_mostly_unsaturated(ref[0])


@pytest.mark.parametrize("act", ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"])
@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_conv_activations(tmp_path, dtype, act):
    check(tmp_path, dtype, (1, 6, 7, 3), 4, (3, 3), (1, 1), "SAME", act=act)


@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_conv_batch2_no_bias(tmp_path, dtype):
    check(tmp_path, dtype, (2, 6, 5, 3), 4, (3, 3), (2, 1), "SAME", bias=False)


@pytest.mark.parametrize("in_zp", [-128, 0, 37])
def test_conv_int8_per_tensor(tmp_path, in_zp):
    check(tmp_path, "int8", (2, 7, 6, 3), 5, (3, 3), (1, 1), "SAME", per_channel=False,
          in_zp=in_zp, act="RELU")


def test_conv_rejects_ungroupable(tmp_path):
    """4 input channels, weights of 2: two groups, but 3 filters do not split into them
    (grouped convolutions themselves: tests/ops/test_conv_grouped.py)."""
    from eerie_c.api import run_model
    model = conv_model("int8", (1, 5, 5, 4), 3, (3, 3), w_in_c=2)
    p = tmp_path / "g.tflite"
    p.write_bytes(model)
    with pytest.raises(EerieError, match="CONV_2D.*no grouped convolution"):
        run_model(p, [random_inputs([1, 5, 5, 4], "int8", 1)])
