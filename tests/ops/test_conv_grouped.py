"""Grouped CONV_2D (Keras Conv2D(groups=G): weights [O, kh, kw, C / G]) vs TFLM: int8 per-channel
and per-tensor, int16x8, float32; split into one conv per group by passes/split_grouped_conv.py.
One int8 model also runs on mps2-an386 (Cortex-M4: the DSP conv kernels, per group)."""
import numpy as np
import pytest

from conftest import assert_board_matches_tflm, assert_matches_tflm, random_inputs, require_board_tools
from test_conv import conv_model
from tflite_builder import ACT, PAD, ModelBuilder

GROUPED = [
    # in_shape, out_c, groups, kernel, stride, padding, dilation
    ((1, 7, 8, 4), 6, 2, (3, 3), (1, 1), "SAME", (1, 1)),
    ((2, 9, 7, 8), 8, 4, (3, 2), (2, 1), "VALID", (1, 1)),
    ((1, 10, 9, 6), 9, 3, (3, 3), (1, 2), "SAME", (2, 1)),
    ((1, 5, 6, 16), 8, 2, (1, 1), (1, 1), "SAME", (1, 1)),     # pointwise, 8 taps per group
    ((1, 6, 6, 32), 16, 2, (3, 3), (1, 1), "SAME", (1, 1)),    # 144 taps per group
]


def _ids(g):
    return f"{g[0]}-o{g[1]}-g{g[2]}-k{g[3]}-s{g[4]}-{g[5]}-d{g[6]}"


@pytest.mark.parametrize("dtype,per_channel", [("int8", True), ("int8", False), ("float32", True)])
@pytest.mark.parametrize("geom", GROUPED, ids=_ids)
def test_grouped_conv(tmp_path, dtype, per_channel, geom):
    in_shape, out_c, groups, k, stride, padding, dil = geom
    model = conv_model(dtype, in_shape, out_c, k, stride, padding, dil, act="RELU",
                       per_channel=per_channel, w_in_c=in_shape[3] // groups,
                       out_scale=0.05 * np.sqrt(k[0] * k[1] * in_shape[3] // groups))
    _, ref = assert_matches_tflm(model, [random_inputs(list(in_shape), dtype, 3, seed=1)], tmp_path)
    assert len(np.unique(ref[0])) > 20   # real values, not a saturated output


def test_grouped_conv_no_bias(tmp_path):
    model = conv_model("int8", (1, 6, 5, 6), 4, (3, 3), w_in_c=3, bias=False, in_zp=-128)
    assert_matches_tflm(model, [random_inputs([1, 6, 5, 6], "int8", 2, seed=2)], tmp_path)


def conv16x8_grouped(in_shape, out_c, groups, k, seed=0):
    """int16 activations, int8 per-channel weights, int64 bias (TFLite's 16x8 scheme)."""
    rng = np.random.default_rng(seed)
    n, h, w_, c = in_shape
    mb = ModelBuilder()
    x = mb.input(list(in_shape), "int16", scale=0.001, zero_point=0)
    wscale = rng.uniform(0.002, 0.02, out_c)
    w = mb.const(rng.integers(-127, 128, (out_c, k, k, c // groups)), "int8", scale=wscale,
                 zero_point=[0] * out_c, axis=0)
    b = mb.const(rng.integers(-2 ** 20, 2 ** 20, out_c), "int64", scale=0.001 * wscale,
                 zero_point=[0] * out_c, axis=0)
    y = mb.tensor([n, h, w_, out_c], "int16", scale=0.002 * np.sqrt(k * k * c // groups), zero_point=0)
    mb.op("CONV_2D", [x, w, b], [y], "Conv2DOptions", padding=PAD["SAME"], strideH=1, strideW=1,
          dilationHFactor=1, dilationWFactor=1, fusedActivationFunction=ACT["NONE"])
    mb.output(y)
    return mb.build()


def test_grouped_conv_16x8(tmp_path):
    shape = [1, 6, 7, 6]
    assert_matches_tflm(conv16x8_grouped(shape, 6, 3, 3), [random_inputs(shape, "int16", 2, seed=3)],
                        tmp_path)


def test_grouped_conv_board_m4(tmp_path):
    """Cortex-M4 (DSP): each group of 144 taps takes the shared SMLAD kernel
    (eerie_conv_pair_s8), against TFLM on the board."""
    require_board_tools("mps2-an386")
    shape = [1, 6, 6, 32]
    model = conv_model("int8", shape, 16, (3, 3), act="RELU", w_in_c=16, out_scale=0.6)
    rep = assert_board_matches_tflm(model, [random_inputs(shape, "int8", 2, seed=4)], tmp_path,
                                    "mps2-an386", "cortex-m4")
    convs = [o for o in rep["ops"] if o["kind"] == "CONV_2D"]
    assert len(convs) == 2 and all("eerie_conv_pair_s8" in o["choice"] for o in convs), convs
