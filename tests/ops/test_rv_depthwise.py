"""The int8 DEPTHWISE_CONV_2D kernel generated for RISC-V targets (kernels/_rv_dw.py,
templates/kernels/depthwise_s8_rv.c.j2) vs TFLM, built on the host with UBSan.

Covers every block the generator unrolls: border rows and columns with taps left out (SAME,
even kernels with asymmetric padding, a kernel larger than the image), the interior pairs
and an odd last column, strides, dilation, depth multipliers > 1, batches > 1, per-tensor
and per-channel weights, input zero points (the zp * left-out-weights correction), fused
activations, and both requantization paths. tests/boards/test_riscv_depthwise.py runs a few
of them in QEMU on riscv-virt and sifive_e."""
from __future__ import annotations

import re

import numpy as np
import pytest

from eerie_c.api import compile_model
from eerie_c.kernels._rv_dw import axis_groups

from test_conv import unsaturated_scale
from test_depthwise import GEOMETRIES, dw_model
from test_rv_kernels import TARGET, rv_target_run

DW_MARK = ("/* output rows ",)   # the RISC-V depthwise kernel's row-group comment


def check_dw(tmp_path, model, shape, n=3, seed=2, unsaturated=False):
    from conftest import random_inputs, tflm_run
    from test_conv import assert_mostly_unsaturated
    xs = [random_inputs(list(shape), "int8", n, seed=seed)]
    ref = tflm_run(model, xs)[0]
    if unsaturated:
        assert_mostly_unsaturated(ref)
    np.testing.assert_array_equal(rv_target_run(model, xs, tmp_path, markers=DW_MARK), ref)


RV_DW_GEOMETRIES = [g for g in GEOMETRIES if g[2][0] * g[2][1] <= 9] + [
    ((2, 5, 6, 7), 1, (3, 3), (1, 1), "SAME", (1, 1)),    # batches, odd channels
    ((1, 4, 8, 3), 1, (1, 1), (1, 1), "VALID", (1, 1)),   # 1x1, all interior, even columns
    ((1, 2, 2, 3), 1, (3, 3), (1, 1), "SAME", (1, 1)),    # no interior at all
    ((1, 6, 5, 4), 3, (3, 3), (2, 2), "SAME", (1, 1)),    # multiplier 3, stride 2
]


@pytest.mark.parametrize("geom", RV_DW_GEOMETRIES,
                         ids=lambda g: f"{g[0]}-m{g[1]}-k{g[2]}-s{g[3]}-{g[4]}-d{g[5]}")
def test_depthwise_rv_target(tmp_path, geom):
    in_shape, mult, k, stride, padding, dil = geom
    model = dw_model("int8", in_shape, mult, k, stride, padding, dil, act="NONE",
                     out_scale=unsaturated_scale(k[0] * k[1]))
    check_dw(tmp_path, model, in_shape, unsaturated=k[0] * k[1] >= 4)


@pytest.mark.parametrize("act", ["RELU", "RELU6", "RELU_N1_TO_1"])
@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("in_zp", [-128, 0, 37])
def test_depthwise_rv_target_quant(tmp_path, act, per_channel, in_zp):
    model = dw_model("int8", (2, 5, 6, 3), 2, (3, 3), (1, 1), "SAME", act=act,
                     per_channel=per_channel, in_zp=in_zp)
    check_dw(tmp_path, model, (2, 5, 6, 3))


def test_depthwise_rv_no_bias(tmp_path):
    model = dw_model("int8", (2, 6, 5, 3), 2, (3, 3), (2, 1), "SAME", bias=False)
    check_dw(tmp_path, model, (2, 6, 5, 3))


@pytest.mark.parametrize("out_scale,fast", [(0.0001, False), (2.0, True)], ids=["general", "fast"])
def test_depthwise_rv_requant_paths(tmp_path, out_scale, fast):
    """Both requantization formulas, bit-exact: a multiplier >= 0.5 keeps TFLite's general one,
    right shifts the proven mul + mulh one."""
    model = dw_model("int8", (1, 6, 7, 4), 1, (3, 3), (1, 1), "SAME", out_scale=out_scale)
    src = tmp_path / "f.tflite"
    src.write_bytes(model)
    text = compile_model(src, target=TARGET, name="f").files["f.c"]
    assert (re.search(r"\w_radd\b", text) is not None) == fast
    check_dw(tmp_path, model, (1, 6, 7, 4))


def test_depthwise_rv_large_kernel_falls_back(tmp_path):
    """More taps than registers: the portable kernel (still bit-exact)."""
    model = dw_model("int8", (1, 6, 6, 4), 1, (5, 5), (1, 1), "SAME", out_scale=unsaturated_scale(25))
    src = tmp_path / "f.tflite"
    src.write_bytes(model)
    assert DW_MARK[0] not in compile_model(src, target=TARGET, name="f").files["f.c"]


def test_axis_groups():
    """SAME 3x3 over 5 columns: a left border without tap 0, the interior, a right border
    without tap 2; each output index in exactly one group."""
    g = axis_groups(5, 5, 3, 1, 1, 1)
    assert [(x["lo"], x["hi"], x["taps"], x["out"]) for x in g] == [
        (0, 1, (1, 2), (0,)), (1, 4, (0, 1, 2), ()), (4, 5, (0, 1), (2,))]
    g = axis_groups(2, 2, 5, 1, 1, 2)     # kernel larger than the image
    assert [(x["lo"], x["hi"], x["taps"]) for x in g] == [(0, 1, (2, 3)), (1, 2, (1, 2))]


def test_depthwise_rv_dead_and_constant_channels(tmp_path):
    """Channels with multiplier 0 or a shift past every accumulator, and all-zero weights with
    a bias near 2^30 (as in vww_96_int8): zeroed at compile time (the zero-point correction of
    the border taps then adds nothing for them), so the layer keeps the fast requantization,
    and their outputs come from its constants. The input zero point is 3."""
    from test_dsp_kernels import conv_with
    rng = np.random.default_rng(5)
    scales = [0.004, 0.002, 1e-30, 0.004, 0.001, 1e-9, 0.003, 0.004]
    wts = rng.integers(-127, 128, (1, 3, 3, 8))
    wts[..., [1, 4]] = 0
    bias = rng.integers(-3000, 3000, 8)
    bias[1], bias[4], bias[5] = 2 ** 30, -2 ** 30 + 128, 2 ** 29
    model = conv_with(wts, bias, scales, op="DEPTHWISE_CONV_2D")
    src = tmp_path / "f.tflite"
    src.write_bytes(model)
    assert re.search(r"\w_radd\b", compile_model(src, target=TARGET, name="f").files["f.c"])
    check_dw(tmp_path, model, (1, 5, 5, 8))
