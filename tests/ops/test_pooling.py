"""AVERAGE_POOL_2D / MAX_POOL_2D vs TFLM: strides, SAME/VALID, clipped border windows, fused
activations, int8 (bit-exact) and float32; and the int8 quantization check TFLM makes."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, random_inputs
from tflite_builder import ACT, PAD, ModelBuilder

from eerie_c.api import compile_model
from eerie_c.errors import EerieError


def out_size(padding, size, f, s):
    return (size + s - 1) // s if padding == "SAME" else (size - f + s) // s


def pool_model(kind, dtype, shape, filt, stride, padding, act="NONE", qin=(0.05, -7), qout=None):
    n, h, w, c = shape
    oshape = [n, out_size(padding, h, filt[0], stride[0]), out_size(padding, w, filt[1], stride[1]), c]
    mb = ModelBuilder()
    if dtype in ("int8", "int16"):
        qout = qout or qin
        x = mb.input(shape, dtype, scale=qin[0], zero_point=qin[1])
        y = mb.tensor(oshape, dtype, scale=qout[0], zero_point=qout[1])
    else:
        x = mb.input(shape, "float32")
        y = mb.tensor(oshape, "float32")
    mb.op(kind, [x], [y], "Pool2DOptions", padding=PAD[padding], strideH=stride[0], strideW=stride[1],
          filterHeight=filt[0], filterWidth=filt[1], fusedActivationFunction=ACT[act])
    mb.output(y)
    return mb.build()


GEOMETRIES = [
    # shape, filter, stride, padding
    ([1, 8, 8, 3], (2, 2), (2, 2), "VALID"),
    ([1, 7, 9, 4], (3, 3), (2, 2), "SAME"),      # odd sizes: clipped windows on both borders
    ([2, 5, 6, 2], (3, 2), (1, 2), "SAME"),      # batch 2, rectangular filter and stride
    ([1, 9, 7, 5], (4, 3), (3, 1), "VALID"),
    ([1, 6, 6, 8], (6, 6), (1, 1), "VALID"),     # global pooling
    ([1, 4, 5, 3], (5, 5), (2, 3), "SAME"),      # filter larger than the input: all windows clipped
]


@pytest.mark.parametrize("kind", ["AVERAGE_POOL_2D", "MAX_POOL_2D"])
@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("geo", range(len(GEOMETRIES)))
def test_pool_geometry(tmp_path, kind, dtype, geo):
    shape, filt, stride, padding = GEOMETRIES[geo]
    model = pool_model(kind, dtype, shape, filt, stride, padding)
    assert_matches_tflm(model, [random_inputs(shape, dtype, 4, seed=geo)], tmp_path)


@pytest.mark.parametrize("act", ["RELU", "RELU6", "RELU_N1_TO_1"])
@pytest.mark.parametrize("kind", ["AVERAGE_POOL_2D", "MAX_POOL_2D"])
@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_pool_activations(tmp_path, kind, dtype, act):
    # scale 0.03 zp -100: 0 -> -100, 6 -> 100, 1 -> -67, so the clamps bite inside the int8 range
    model = pool_model(kind, dtype, [1, 6, 7, 3], (3, 3), (2, 2), "SAME", act, qin=(0.03, -100))
    x = random_inputs([1, 6, 7, 3], dtype, 4, seed=1, scale=4.0)
    assert_matches_tflm(model, [x], tmp_path)


def test_avg_pool_int8_rounding_ties(tmp_path):
    """Sums that land exactly on .5 (positive and negative) check the rounding direction."""
    model = pool_model("AVERAGE_POOL_2D", "int8", [1, 2, 4, 1], (1, 2), (1, 2), "VALID")
    x = np.array([[[[1], [2], [-1], [-2]], [[-128], [127], [3], [4]]],
                  [[[-3], [-4], [5], [6]], [[-127], [-128], [127], [126]]]], np.int8).reshape(2, 1, 2, 4, 1)
    got, _ = assert_matches_tflm(model, [x], tmp_path)
    assert got[0][0].reshape(-1).tolist() == [2, -2, -1, 4]   # 1.5, -1.5, -0.5, 3.5: halves away from zero


def test_pool_int8_requires_same_quantization(tmp_path):
    model = pool_model("AVERAGE_POOL_2D", "int8", [1, 4, 4, 1], (2, 2), (2, 2), "VALID",
                       qin=(0.05, 0), qout=(0.1, 0))
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    with pytest.raises(EerieError, match="same quantization"):
        compile_model(p)


@pytest.mark.parametrize("geo,act", [(1, "NONE"), (2, "RELU6"), (5, "NONE"), (3, "RELU_N1_TO_1")])
def test_l2_pool_float(tmp_path, geo, act):
    """L2_POOL_2D (float32 only in TFLM): sqrt of the mean square over the clipped window."""
    shape, filt, stride, padding = GEOMETRIES[geo]
    model = pool_model("L2_POOL_2D", "float32", shape, filt, stride, padding, act)
    assert_matches_tflm(model, [random_inputs(shape, "float32", 3, seed=geo, scale=3.0)], tmp_path)


@pytest.mark.parametrize("kind", ["AVERAGE_POOL_2D", "MAX_POOL_2D"])
@pytest.mark.parametrize("geo,act", [(1, "NONE"), (2, "RELU"), (5, "RELU6")])
def test_pool_int16(tmp_path, kind, geo, act):
    """int16 (TFLM's 16x8 models): the int8 arithmetic on int16 values, full-range inputs."""
    shape, filt, stride, padding = GEOMETRIES[geo]
    model = pool_model(kind, "int16", shape, filt, stride, padding, act, qin=(0.0005, 0))
    assert_matches_tflm(model, [random_inputs(shape, "int16", 3, seed=geo)], tmp_path)
