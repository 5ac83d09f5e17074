"""The register-blocked float32 CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED kernels
(kernels/_f32.py) vs TFLM, on the shapes that exercise their blocks: pixel groups of a conv
across rows and batches (no padding) or within each row's interior columns, pixels alone at
the border, output channels and units that do not fill a block, depthwise blocks of rows x
columns in loops over interior groups and at fixed border groups, odd channels, depth
multipliers, strides, dilation, batches. On the host (a multiply then an add) and in QEMU on
mps2-an386 (Cortex-M4F, FPv4) and mps2-an500 (Cortex-M7, FPv5), where the kernels use VFMA;
the disassembly check makes sure they do, and the board runs check the stack bound. The
float comparison is conftest.assert_float_close (per element, 1e-5 relative)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import assert_float_close, assert_invoke_stack_within_bound, assert_matches_tflm, \
    random_inputs, tflm_run
from eerie_c.api import compile_model, run_model
from test_conv import conv_model
from test_depthwise import dw_model
from test_fully_connected import fc_model

BOARDS = ["mps2-an386", "mps2-an500"]

CONV = [
    # in_shape, out_c, kernel, stride, padding, dilation
    ((1, 5, 5, 64), 64, (1, 1), (1, 1), "SAME", (1, 1)),   # DS-CNN pointwise: 25 pixels, 6 groups + 1
    ((2, 3, 5, 7), 6, (1, 1), (1, 1), "VALID", (1, 1)),    # groups across rows and batches, 2 channels over
    ((1, 4, 3, 96), 5, (1, 1), (2, 1), "SAME", (1, 1)),    # long rows (offsets past 1 KiB), stride
    ((3, 9, 8, 3), 7, (3, 3), (1, 1), "SAME", (1, 1)),     # border pixels alone, interior in 4s
    ((1, 11, 10, 2), 9, (3, 3), (2, 2), "SAME", (2, 2)),   # dilation with border
    ((1, 8, 9, 4), 4, (2, 3), (1, 2), "VALID", (3, 1)),    # vertical dilation, all interior
    ((1, 14, 6, 1), 8, (10, 4), (2, 2), "SAME", (1, 1)),   # KWS-like first layer: mostly border
    ((1, 2, 2, 3), 3, (5, 5), (1, 1), "SAME", (1, 1)),     # no interior at all
    ((2, 4, 12, 3), 5, (1, 3), (1, 1), "SAME", (1, 1)),    # padding left and right only: every row
    ((1, 3, 7, 2), 6, (1, 1), (1, 1), "VALID", (1, 1)),    # no padding, 21 pixels: 4 groups + 1
]

DEPTHWISE = [
    # in_shape, mult, kernel, stride, padding, dilation
    ((1, 6, 5, 64), 1, (3, 3), (1, 1), "SAME", (1, 1)),    # DS-CNN-like: fixed groups only
    ((2, 13, 17, 3), 1, (3, 3), (1, 1), "SAME", (1, 1)),   # loops over rows and columns, batch 2
    ((1, 19, 23, 4), 1, (3, 3), (2, 2), "SAME", (1, 1)),   # loops with stride 2
    ((1, 16, 20, 2), 1, (3, 3), (1, 1), "VALID", (2, 2)),  # dilation 2, everything inside
    ((1, 9, 21, 5), 1, (5, 3), (1, 3), "SAME", (2, 1)),    # tall kernel, row dilation, stride 3
    ((1, 12, 13, 3), 2, (3, 3), (1, 1), "SAME", (1, 1)),   # depth multiplier 2
    ((2, 4, 11, 2), 3, (2, 4), (2, 1), "SAME", (1, 1)),    # even kernel, asymmetric padding
    ((1, 3, 3, 3), 1, (5, 5), (1, 1), "SAME", (1, 1)),     # kernel larger than the image
    ((1, 14, 9, 3), 1, (3, 5), (2, 1), "SAME", (1, 2)),    # row loop, stride 2, column dilation
]

FC = [
    # batches, depth, units
    (1, 64, 12), (3, 37, 8), (2, 5, 3), (1, 250, 17), (4, 16, 1), (2, 1, 5),
]


def conv_case(g, act="RELU6", bias=True):
    in_shape, out_c, k, stride, padding, dil = g
    return conv_model("float32", in_shape, out_c, k, stride, padding, dil, act=act, bias=bias), in_shape


def dw_case(g, act="RELU", bias=True):
    in_shape, mult, k, stride, padding, dil = g
    return dw_model("float32", in_shape, mult, k, stride, padding, dil, act=act, bias=bias), in_shape


def fc_case(g, act="NONE", bias=True):
    batches, depth, units = g
    return fc_model("float32", batches, depth, units, act, bias=bias), (batches, depth)


def _ids(g):
    return "-".join(str(v).replace(" ", "") for v in g)


@pytest.mark.parametrize("g", CONV, ids=_ids)
@pytest.mark.parametrize("bias", [True, False])
def test_conv_f32_host(tmp_path, g, bias):
    model, shape = conv_case(g, act="NONE" if bias else "RELU6", bias=bias)
    assert_matches_tflm(model, [random_inputs(list(shape), "float32", 2, seed=3)], tmp_path)


@pytest.mark.parametrize("g", DEPTHWISE, ids=_ids)
@pytest.mark.parametrize("bias", [True, False])
def test_depthwise_f32_host(tmp_path, g, bias):
    model, shape = dw_case(g, act="NONE" if bias else "RELU6", bias=bias)
    assert_matches_tflm(model, [random_inputs(list(shape), "float32", 2, seed=4)], tmp_path)


@pytest.mark.parametrize("g", FC, ids=_ids)
@pytest.mark.parametrize("bias", [True, False])
def test_fc_f32_host(tmp_path, g, bias):
    model, shape = fc_case(g, act="NONE" if bias else "RELU", bias=bias)
    assert_matches_tflm(model, [random_inputs(list(shape), "float32", 2, seed=5)], tmp_path)


def test_f32_special_values(tmp_path):
    """Infinities clamp to +-FLT_MAX with no activation, as TFLM's do; NaN stays NaN."""
    model, shape = conv_case(CONV[3], act="NONE")
    x = random_inputs(list(shape), "float32", 1, seed=6)
    x[0, 0, 4, 4, 1] = np.inf
    x[0, 1, 2, 3, 0] = np.nan
    assert_matches_tflm(model, [x], tmp_path)
    model, shape = dw_case(DEPTHWISE[1], act="NONE")
    x = random_inputs(list(shape), "float32", 1, seed=6)
    x[0, 0, 2, 9, 1] = -np.inf     # inside a column loop group
    x[0, 1, 6, 0, 2] = np.nan      # in a row loop group, at the left border
    x[0, 1, 12, 16, 0] = np.inf    # bottom right corner
    assert_matches_tflm(model, [x], tmp_path)


@pytest.mark.usefixtures("cross_cc")
@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m7"])
def test_f32_kernels_use_vfma(tmp_path, target):
    """On FPv4/FPv5 the multiply-adds are single VFMA instructions, never a call to fmaf."""
    for k, (model, _) in enumerate([conv_case(CONV[3]), dw_case(DEPTHWISE[1]), fc_case(FC[0])]):
        src = tmp_path / f"m{k}.tflite"
        src.write_bytes(model)
        out = tmp_path / f"out{k}"
        res = compile_model(src, out_dir=out, target=target, name="m")
        assert "EERIE_FMAF(" in res.files["m.c"]
        flags = res.files["m.mk"].split("M_CFLAGS := ")[1].splitlines()[0].split()
        subprocess.run(["arm-none-eabi-gcc", *flags, "-c", "m.c", "-o", "m.o"], cwd=out, check=True)
        dis = subprocess.run(["arm-none-eabi-objdump", "-d", "m.o"], cwd=out, check=True,
                             capture_output=True, text=True).stdout
        assert dis.count("vfma.f32") >= 4, dis[:2000]
        assert "fmaf" not in dis and "vmul.f32" not in dis


BOARD_CASES = [("conv", CONV[0]), ("conv", CONV[3]), ("conv", CONV[4]), ("conv", CONV[6]), ("conv", CONV[8]),
               ("dw", DEPTHWISE[0]), ("dw", DEPTHWISE[1]), ("dw", DEPTHWISE[4]), ("dw", DEPTHWISE[5]), ("dw", DEPTHWISE[8]),
               ("fc", FC[1]), ("fc", FC[3])]


@pytest.mark.usefixtures("board_tools")   # fail (never skip) without the cross toolchain and QEMU
@pytest.mark.parametrize("board", BOARDS)
@pytest.mark.parametrize("case", BOARD_CASES, ids=lambda c: c[0] + "-" + _ids(c[1]))
def test_f32_kernels_on_board(tmp_path, board, case):
    kind, g = case
    model, shape = {"conv": conv_case, "dw": dw_case, "fc": fc_case}[kind](g)
    xs = [random_inputs(list(shape), "float32", 2, seed=7)]
    src = tmp_path / "m.tflite"
    src.write_bytes(model)
    got, report = run_model(src, xs, board=board)
    assert report["board"] == board and report["instructions"] > 0
    ref = tflm_run(model, xs)
    assert_float_close(got[0], ref[0])
    assert_invoke_stack_within_bound(report)


@pytest.mark.usefixtures("board_tools")
@pytest.mark.parametrize("board", BOARDS)
def test_torch_ds_cnn_on_board(board):
    """A float DS-CNN from PyTorch (tests/torch/zoo.py: conv, depthwise, pointwise, linear)
    on the FPU boards matches eager PyTorch as tests/torch/test_zoo_float.py requires (the
    largest difference within 1e-4 of the largest output)."""
    import torch   # CI installs torch: without it this test errors, never skips
    import eerie_c
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "torch"))
    from zoo import build
    m, x = build("ds_cnn")
    xs = torch.randn(2, *x.shape, generator=torch.Generator().manual_seed(9))
    got, report = eerie_c.run(m, [xs.numpy()], (x,), board=board)
    with torch.no_grad():
        ref = np.stack([m(v).numpy() for v in xs])
    err = np.abs(got[0].astype(np.float64) - ref).max()
    assert err <= 1e-4 * np.abs(ref).max(), (err, np.abs(ref).max())
    assert_invoke_stack_within_bound(report)


def _layer_then(kind_act: str, layer: str, inf_nan: bool):
    """A float layer with no fused activation followed by a separate activation op, and two
    inputs (with infinities and a NaN when inf_nan)."""
    from tflite_builder import ModelBuilder, PAD
    rng = np.random.default_rng(11)
    mb = ModelBuilder()
    if layer == "FULLY_CONNECTED":
        x = mb.input([2, 9], "float32")
        w = mb.const(rng.standard_normal((5, 9)), "float32")
        b = mb.const(rng.standard_normal(5), "float32")
        z = mb.tensor([2, 5], "float32")
        mb.op(layer, [x, w, b], [z], "FullyConnectedOptions", fusedActivationFunction=0)
        shape = (2, 9)
    else:
        x = mb.input([1, 5, 6, 3], "float32")
        dw = layer == "DEPTHWISE_CONV_2D"
        w = mb.const(rng.standard_normal((1, 3, 3, 3) if dw else (4, 3, 3, 3)), "float32")
        b = mb.const(rng.standard_normal(3 if dw else 4), "float32")
        z = mb.tensor([1, 5, 6, 3 if dw else 4], "float32")
        if dw:
            mb.op(layer, [x, w, b], [z], "DepthwiseConv2DOptions", padding=PAD["SAME"], strideH=1,
                  strideW=1, depthMultiplier=1, fusedActivationFunction=0)
        else:
            mb.op(layer, [x, w, b], [z], "Conv2DOptions", padding=PAD["SAME"], strideH=1, strideW=1,
                  fusedActivationFunction=0)
        shape = (1, 5, 6, 3)
    zshape = [2, 5] if layer == "FULLY_CONNECTED" else [1, 5, 6, 3 if layer == "DEPTHWISE_CONV_2D" else 4]
    y = mb.tensor(zshape, "float32")
    mb.op(kind_act, [z], [y])
    mb.output(y)
    xs = random_inputs(list(shape), "float32", 2, seed=12, scale=3.0)
    if inf_nan:
        xs.reshape(2, -1)[0, 4] = np.inf
        xs.reshape(2, -1)[0, 7] = -np.inf
        xs.reshape(2, -1)[1, 5] = np.nan
    return mb.build(), xs


@pytest.mark.parametrize("layer", ["CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"])
@pytest.mark.parametrize("act", ["RELU", "RELU6"])   # TFLM has no RELU_N1_TO_1 kernel
def test_activation_fused_into_float_layer(tmp_path, layer, act):
    """passes/fuse_float_activation.py: the separate activation disappears and every output,
    infinities and NaN included, is what TFLM computes with the two ops."""
    model, xs = _layer_then(act, layer, inf_nan=True)
    src = tmp_path / "m.tflite"
    src.write_bytes(model)
    res = compile_model(src, name="m")
    assert [op["kind"] for op in res.report["ops"]] == [layer]
    got, _ = run_model(src, [xs])
    ref = tflm_run(model, [xs])
    assert_float_close(got[0], ref[0])
