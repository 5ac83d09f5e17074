"""F.interpolate, group_norm and layer_norm in PT2E int8 programs, between quantized convs,
with both quantizers: upsampling runs on the int8 RESIZE kernels (nearest: a copy, then a
requantization where the quantizer chose other parameters; bilinear: one rounding to the
output's parameters), normalizations are float islands, reported with their line. Each keeps
the accuracy contract against the converted program's own eager run; one U-Net also on the
Cortex-M4 board in QEMU."""
import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import eerie_c
from pt2e import QUANTIZERS, assert_contract, eager, output_step, quantize, random_inputs

pytest.importorskip("torchao", reason="PT2E tests need torchao (pip install torchao==0.18.0)")


def assert_compounding(got, ref, step):
    """The contract where an op after an int8 conv amplifies its one-step differences (a norm
    divides by the spread, the U-Net stacks four convs; COMPOUNDING in test_pt2e_zoo.py): two
    steps, and at least 99% of the elements within one."""
    assert_contract(got, ref, step, max_steps=2)
    within = np.mean(np.abs(got.reshape(ref.shape) - ref) <= step * 1.001)
    assert within >= 0.99, f"only {within:.1%} within one step"
    return within


class Sandwich(nn.Module):
    """conv -> fn -> conv (fn may change the spatial size)."""

    def __init__(self, fn):
        super().__init__()
        self.a, self.b = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 4, 1)
        self.fn = fn

    def forward(self, x):
        return self.b(self.fn(self.a(x)))


RESIZES = {
    "nearest_x2": lambda x: F.interpolate(x, scale_factor=2, mode="nearest"),
    "nearest_size": lambda x: F.interpolate(x, size=(9, 11), mode="nearest"),
    "bilinear_x2": lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"),
    "bilinear_align": lambda x: F.interpolate(x, size=(9, 11), mode="bilinear", align_corners=True),
    "bilinear_x1_5": lambda x: F.interpolate(x, scale_factor=1.5, mode="bilinear"),   # torch's tables
}


@pytest.mark.parametrize("qname", QUANTIZERS)
@pytest.mark.parametrize("name", sorted(RESIZES))
def test_resize_in_int8(name, qname):
    torch.manual_seed(3)
    m, x = Sandwich(RESIZES[name]), torch.randn(1, 3, 6, 7)
    cm, ex = quantize(m, x, qname)
    g = eerie_c.compile(cm, (ex,)).graph
    resize = [op for op in g.ops if op.kind.startswith("RESIZE")]
    assert len(resize) == 1 and g.t(resize[0].outputs[0]).dtype == "int8", g.float_islands
    assert g.float_islands == []
    xs = random_inputs(x.shape, 4, 41)
    outs, _ = eerie_c.run(cm, [xs], example_args=(ex,))
    assert_contract(outs[0], eager(cm, xs), output_step(g))


class LayerNormC(nn.Module):
    """layer norm over the channels of an NCHW tensor (ConvNeXt style)."""

    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(8)

    def forward(self, x):
        return self.ln(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


@pytest.mark.parametrize("qname", QUANTIZERS)
@pytest.mark.parametrize("norm", ["group_norm", "layer_norm"])
def test_norm_is_reported_float_island(norm, qname):
    torch.manual_seed(4)
    m = Sandwich(nn.GroupNorm(2, 8) if norm == "group_norm" else LayerNormC())
    x = torch.randn(1, 3, 6, 7)
    cm, ex = quantize(m, x, qname)
    res = eerie_c.compile(cm, (ex,))
    islands = res.report["quantization"]["float_islands"]
    assert islands and all(isl["reason"] for isl in islands)
    assert any("test_pt2e_resize_norm.py" in s for isl in islands for s in isl["sources"])
    xs = random_inputs(x.shape, 4, 42)
    outs, _ = eerie_c.run(cm, [xs], example_args=(ex,))
    within = assert_compounding(outs[0], eager(cm, xs), output_step(res.graph))
    print(f"{norm} {qname}: {within:.2%} within one step")


@pytest.mark.usefixtures("board_tools")
def test_unet_bilinear_int8_on_board():
    from conftest import assert_invoke_stack_within_bound
    from zoo import build
    m, x = build("unet_bilinear")
    cm, ex = quantize(m, x, "cortex_m")
    xs = random_inputs(x.shape, 2, 43)
    outs, report = eerie_c.run(cm, [xs], example_args=(ex,), board="mps2-an386")
    assert report["board"] == "mps2-an386" and report["instructions"] > 0
    assert_invoke_stack_within_bound(report)
    q = report["quantization"]
    assert q["float_islands"] == [] and "RESIZE_BILINEAR" in {o["kind"] for o in report["ops"]}
    assert_compounding(outs[0], eager(cm, xs), q["output_steps"][0])
