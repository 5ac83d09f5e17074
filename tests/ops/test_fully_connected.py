"""FULLY_CONNECTED vs TFLM: int8 per-tensor and per-channel, float, fused activations, batches."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, random_inputs
from tflite_builder import ACT, ModelBuilder


def fc_model(dtype, batches, depth, units, act, per_channel=False, bias=True, seed=0):
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    if dtype == "int8":
        x = mb.input([batches, depth], "int8", scale=0.07, zero_point=-5)
        wscale = (rng.uniform(0.002, 0.02, units) if per_channel else [0.01])
        w = mb.const(rng.integers(-127, 128, (units, depth)), "int8", scale=wscale,
                     zero_point=[0] * len(wscale), axis=0)
        ins = [x, w]
        if bias:
            bscale = 0.07 * np.asarray(wscale, np.float32)
            ins.append(mb.const(rng.integers(-3000, 3000, units), "int32", scale=bscale,
                                zero_point=[0] * len(bscale), axis=0))
        y = mb.tensor([batches, units], "int8", scale=0.25, zero_point=3)
    else:
        x = mb.input([batches, depth], "float32")
        w = mb.const(rng.standard_normal((units, depth)) * 0.3, "float32")
        ins = [x, w]
        if bias:
            ins.append(mb.const(rng.standard_normal(units), "float32"))
        y = mb.tensor([batches, units], "float32")
    if not bias:
        ins.append(-1)
    mb.op("FULLY_CONNECTED", ins, [y], "FullyConnectedOptions", fusedActivationFunction=ACT[act])
    mb.output(y)
    return mb.build()


@pytest.mark.parametrize("act", ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"])
@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_fc_activations(tmp_path, dtype, act):
    model = fc_model(dtype, 2, 37, 11, act)
    assert_matches_tflm(model, [random_inputs([2, 37], dtype, 5)], tmp_path)


def test_fc_int8_per_channel_no_bias(tmp_path):
    model = fc_model("int8", 3, 16, 9, "NONE", per_channel=True, bias=False)
    assert_matches_tflm(model, [random_inputs([3, 16], "int8", 5)], tmp_path)
