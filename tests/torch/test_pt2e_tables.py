"""PT2E element-wise regions of one int8 value run as one table (frontend/torch/lut_regions.py):
equal to the converted module element for element, whatever the function, and an op eerie-c
has no kernel for (erf) inside such a region needs none."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

pytest.importorskip("torchao", reason="PT2E needs torchao (bash .ci/setup)")

from pt2e import eager, quantize  # noqa: E402
from eerie_c.api import compile_model, run_model  # noqa: E402


class Alone(nn.Module):
    """Just `fn` of the input: the region's source is the quantized input, the same ints in the
    converted module and in eerie-c, so every output must be equal, not only within a step."""
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


FUNCTIONS = {
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "tanhshrink": nn.Tanhshrink(),
    "softsign": nn.Softsign(),
    "x_times_sigmoid_plus_1": lambda x: x * torch.sigmoid(x) + 1.0,
    "erf": torch.erf,
}
# CortexMQuantizer quantizes each of these on its own. XNNPACK's leaves tanh, sigmoid,
# tanhshrink and erf in float, and where it does quantize softsign or x * sigmoid(x) + 1 the
# float input itself reaches a float op (sigmoid(x), |x|): a function of a float value, which no
# table of 256 int8 values can give exactly, so there is no region (lut_regions needs one int8
# source).
CASES = [("cortex_m", f) for f in sorted(FUNCTIONS)]


def _converted(fn, quantizer, tmp_path, shape=(1, 3, 6, 5)):
    torch.manual_seed(3)
    x = torch.randn(shape) * 2
    cm, ex = quantize(Alone(fn).eval(), x, quantizer, seed=5)
    path = tmp_path / "p.pt2"
    torch.export.save(torch.export.export(cm, (ex,)), str(path))
    xs = np.stack([(torch.randn(shape) * 2).numpy() for _ in range(3)])
    return path, xs, eager(cm, xs)


@pytest.mark.parametrize("quantizer,name", CASES)
def test_regions_equal_the_converted_module(tmp_path, quantizer, name):
    path, xs, ref = _converted(FUNCTIONS[name], quantizer, tmp_path)
    kinds = [o["kind"] for o in compile_model(path, target="host", name="m").report["ops"]]
    assert kinds.count("TABLE_LOOKUP") == 1, kinds
    assert not [k for k in kinds if k in ("TANH", "LOGISTIC", "SUB", "DIV", "MUL", "ADD")], kinds
    got, _ = run_model(path, [xs])
    np.testing.assert_array_equal(got[0].reshape(ref.shape), ref)


def test_pt2e_mean_rounds_once(tmp_path):
    """Means of two int8 values at the same scale land on x.5 steps: the converted module
    rounds those to even, once (TFLM's double rounding would not)."""
    class Mean(nn.Module):
        def forward(self, x):
            return x.mean(dim=1)
    torch.manual_seed(0)
    x = torch.randn(1, 2, 64)
    cm, ex = quantize(Mean().eval(), x, "cortex_m", seed=1)
    path = tmp_path / "mean.pt2"
    torch.export.save(torch.export.export(cm, (ex,)), str(path))
    xs = np.stack([torch.randn(1, 2, 64).numpy() for _ in range(4)])
    got, _ = run_model(path, [xs])
    np.testing.assert_array_equal(got[0].reshape(-1), eager(cm, xs).reshape(-1))
