"""4-bit weights (TFLite INT4, kernels/_int4.py): FULLY_CONNECTED, CONV_2D and
DEPTHWISE_CONV_2D with random shapes, per-channel and per-tensor scales, bit-exact with
LiteRT's reference kernels on the host; the weights stay two per byte in the generated C."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import eerie_run, random_inputs
from int4_models import layer_model, litert_run

KINDS = ("FULLY_CONNECTED", "CONV_2D", "DEPTHWISE_CONV_2D")


@pytest.mark.parametrize("per_channel", [True, False], ids=["per-channel", "per-tensor"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_int4_layer_host(tmp_path, kind, per_channel, seed):
    model, in_shape = layer_model([kind], seed, per_channel)
    xs = random_inputs(in_shape, "int8", 4, seed=seed)
    ref = litert_run(model, xs)
    got, rep = eerie_run(model, [xs], tmp_path)
    np.testing.assert_array_equal(got[0], ref)
    code = (tmp_path / "m.tflite").parent
    assert rep["constant_bytes"] > 0
