"""A constant PAD folded into the CONV_2D / DEPTHWISE_CONV_2D that reads it (passes/fold_pad.py)
vs TFLM running the PAD as its own layer: Keras' ZeroPadding2D before a stride-2 depthwise
(MobileNetV2, FOMO), asymmetric pads on every side, pads added to the conv's own SAME padding,
dilation, int8 per-channel and per-tensor with PAD and PADV2, float32. Each case checks that
the PAD is gone from the compiled graph (or, for the pads that must not fold, still there),
and that the outputs equal TFLM's: on the host, and on the DSP (M4), Helium (M55) and RISC-V
kernels in QEMU, with and without a patch stage."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import assert_board_matches_tflm, assert_matches_tflm, random_inputs, require_board_tools
from tflite_builder import ModelBuilder

from eerie_c.api import compile_model
from eerie_c.ir.window_size import out_size

PAD_ENUM = {"SAME": 0, "VALID": 1}
IN_SCALE, IN_ZP = 0.05, -5


def _conv(mb, rng, kind, x, in_shape, out_c, k, stride, padding, dil, dtype, per_channel, out_zp):
    """One CONV_2D / DEPTHWISE_CONV_2D on x (shape in_shape); returns its output id and shape."""
    n, h, w_, c = in_shape
    kh, kw = k
    oh, ow = out_size(padding, h, kh, stride[0], dil[0]), out_size(padding, w_, kw, stride[1], dil[1])
    dw = kind == "DEPTHWISE_CONV_2D"
    oc = c if dw else out_c
    wshape = (1, kh, kw, oc) if dw else (oc, kh, kw, c)
    if dtype == "int8":
        wscale = rng.uniform(0.002, 0.02, oc) if per_channel else [0.01]
        w = mb.const(rng.integers(-127, 128, wshape), "int8", scale=wscale,
                     zero_point=[0] * len(wscale), axis=3 if dw else 0)
        bscale = IN_SCALE * np.asarray(wscale, np.float32)
        b = mb.const(rng.integers(-3000, 3000, oc), "int32", scale=bscale,
                     zero_point=[0] * len(bscale), axis=0)
        y = mb.tensor([n, oh, ow, oc], "int8", scale=IN_SCALE, zero_point=out_zp)
    else:
        w = mb.const(rng.standard_normal(wshape) * 0.3, "float32")
        b = mb.const(rng.standard_normal(oc), "float32")
        y = mb.tensor([n, oh, ow, oc], "float32")
    opts = dict(padding=PAD_ENUM[padding], strideH=stride[0], strideW=stride[1],
                dilationHFactor=dil[0], dilationWFactor=dil[1])
    if dw:
        mb.op(kind, [x, w, b], [y], "DepthwiseConv2DOptions", depthMultiplier=1, **opts)
    else:
        mb.op(kind, [x, w, b], [y], "Conv2DOptions", **opts)
    return y, [n, oh, ow, oc]


def _pad(mb, x, in_shape, pads, dtype, how="PAD", zp=IN_ZP):
    """PAD (or PADV2 with an explicit value) of x over height and width by (t, b, l, r)."""
    t, b, left, r = pads
    n, h, w_, c = in_shape
    shape = [n, h + t + b, w_ + left + r, c]
    q = dict(scale=IN_SCALE, zero_point=zp) if dtype == "int8" else {}
    y = mb.tensor(shape, dtype, **q)
    p = mb.const(np.array([[0, 0], [t, b], [left, r], [0, 0]], np.int32), "int32")
    if how == "PAD":
        mb.op("PAD", [x, p], [y], "PadOptions")
    else:   # PADV2: how = the pad value (int8: in the output's quantization)
        cv = mb.const(np.array(how).reshape(()), dtype, **q)
        mb.op("PADV2", [x, p, cv], [y], "PadV2Options")
    return y, shape


def layers_model(dtype, in_shape, layers, per_channel=True, seed=0):
    """A chain of (pads | None, kind, out_c, k, stride, padding, dil[, how]) layers: each
    optionally padded first, every tensor with the input's scale and zero point (so an int8
    PAD keeps its input's quantization, as the fold needs)."""
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    q = dict(scale=IN_SCALE, zero_point=IN_ZP) if dtype == "int8" else {}
    x = mb.input(list(in_shape), dtype, **q)
    shape = list(in_shape)
    for pads, kind, out_c, k, stride, padding, dil, *how in layers:
        if pads is not None:
            x, shape = _pad(mb, x, shape, pads, dtype, *how)
        x, shape = _conv(mb, rng, kind, x, shape, out_c, k, stride, padding, dil, dtype,
                         per_channel, IN_ZP)
    mb.output(x)
    return mb.build()


def _kinds(model, tmp_path, **kw):
    p = tmp_path / "k.tflite"
    p.write_bytes(model)
    return [op.kind for op in compile_model(p, **kw).graph.ops]


DW, CONV = "DEPTHWISE_CONV_2D", "CONV_2D"
# (input shape, pads (t, b, l, r), kind, out_c, kernel, stride, conv padding, dilation)
CASES = {
    "keras-dw-s2": ((1, 12, 10, 8), (0, 1, 0, 1), DW, 0, (3, 3), (2, 2), "VALID", (1, 1)),
    "keras-dw-s2-odd": ((1, 11, 9, 16), (1, 1, 1, 1), DW, 0, (3, 3), (2, 2), "VALID", (1, 1)),
    "dw-top-left-only": ((1, 9, 9, 8), (2, 0, 2, 0), DW, 0, (3, 3), (1, 1), "VALID", (1, 1)),
    "dw-plus-same": ((1, 8, 7, 12), (1, 0, 0, 1), DW, 0, (5, 5), (1, 1), "SAME", (1, 1)),
    "dw-dilated": ((1, 10, 10, 8), (2, 2, 1, 3), DW, 0, (3, 3), (1, 1), "VALID", (2, 2)),
    "conv-3x3-s2": ((1, 12, 12, 3), (0, 1, 0, 1), CONV, 8, (3, 3), (2, 2), "VALID", (1, 1)),
    "conv-asym": ((1, 7, 9, 5), (2, 1, 0, 2), CONV, 6, (3, 3), (1, 1), "VALID", (1, 1)),
    "conv-plus-same-s2": ((1, 9, 8, 4), (1, 1, 1, 0), CONV, 8, (3, 3), (2, 2), "SAME", (1, 1)),
    "conv-5x3": ((1, 8, 8, 16), (2, 2, 1, 1), CONV, 16, (5, 3), (1, 1), "VALID", (1, 1)),
    "conv-1x7-rows": ((1, 1, 20, 6), (0, 0, 3, 3), CONV, 4, (1, 7), (1, 1), "VALID", (1, 1)),
}


@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_folded_pad_matches_tflm(tmp_path, case, dtype):
    in_shape, pads, kind, out_c, k, stride, padding, dil = CASES[case]
    model = layers_model(dtype, in_shape, [(pads, kind, out_c, k, stride, padding, dil)],
                         per_channel=sorted(CASES).index(case) % 2 == 0)
    assert _kinds(model, tmp_path, patch="off") == [kind], "the PAD was not folded"
    assert_matches_tflm(model, [random_inputs(list(in_shape), dtype, 3, seed=len(case))], tmp_path)


@pytest.mark.parametrize("dtype,how,folds", [
    ("int8", IN_ZP, True),       # PADV2 with the zero point: folds
    ("int8", 7, False),          # another value: the padded taps are no zeros
    ("float32", 0.0, True),
    ("float32", 1.5, False),
])
def test_padv2_folds_only_with_the_zero(tmp_path, dtype, how, folds):
    in_shape = (1, 8, 8, 8)
    model = layers_model(dtype, in_shape, [((1, 1, 1, 1), DW, 0, (3, 3), (1, 1), "VALID", (1, 1), how)])
    kinds = _kinds(model, tmp_path, patch="off")
    assert kinds == ([DW] if folds else ["PADV2", DW]), kinds
    assert_matches_tflm(model, [random_inputs(list(in_shape), dtype, 2, seed=3)], tmp_path)


def test_pads_beyond_the_window_stay_a_layer(tmp_path):
    """3 rows of padding before a 3x3 window: some windows would see padding only, which
    no SAME conv does, so the PAD stays (and the answer is still TFLM's)."""
    model = layers_model("int8", (1, 6, 6, 4), [((3, 0, 0, 0), CONV, 4, (3, 3), (1, 1), "VALID", (1, 1))])
    assert _kinds(model, tmp_path, patch="off") == ["PAD", CONV]
    assert_matches_tflm(model, [random_inputs([1, 6, 6, 4], "int8", 2)], tmp_path)


def test_pad_read_twice_stays_a_layer(tmp_path):
    mb = ModelBuilder()
    rng = np.random.default_rng(1)
    x = mb.input([1, 6, 6, 8], "float32")
    p, shape = _pad(mb, x, [1, 6, 6, 8], (1, 1, 1, 1), "float32")
    y1, _ = _conv(mb, rng, DW, p, shape, 0, (3, 3), (1, 1), "VALID", (1, 1), "float32", True, 0)
    mb.output(y1)
    mb.output(p)   # the padded tensor is also an output
    model = mb.build()
    assert _kinds(model, tmp_path, patch="off") == ["PAD", DW]
    assert_matches_tflm(model, [random_inputs([1, 6, 6, 8], "float32", 2)], tmp_path)


# A MobileNetV2-style stem: conv s2 after ZeroPadding2D, depthwise, pointwise, then a padded
# stride-2 depthwise: every fast kernel family sees folded padding, and `patch` auto may put
# the first layers in a patch stage.
STEM = [((0, 1, 0, 1), CONV, 16, (3, 3), (2, 2), "VALID", (1, 1)),
        (None, DW, 0, (3, 3), (1, 1), "SAME", (1, 1)),
        (None, CONV, 32, (1, 1), (1, 1), "VALID", (1, 1)),
        ((0, 1, 0, 1), DW, 0, (3, 3), (2, 2), "VALID", (1, 1)),
        ((1, 1, 1, 1), DW, 0, (3, 3), (1, 1), "VALID", (1, 1)),
        ((1, 0, 1, 0), CONV, 8, (3, 3), (1, 1), "SAME", (1, 1))]


@pytest.mark.parametrize("board,core", [("mps2-an386", "cortex-m4"), ("mps3-an547", "cortex-m55"),
                                        ("riscv-virt", "riscv32imafc")])
def test_folded_stem_on_boards(tmp_path, board, core):
    require_board_tools(board)
    model = layers_model("int8", (1, 24, 24, 3), STEM)
    assert "PAD" not in _kinds(model, tmp_path, patch="off", target=core)
    xs = [random_inputs([1, 24, 24, 3], "int8", 2, seed=9)]
    for patch in ("off", "auto"):
        (tmp_path / patch).mkdir()
        assert_board_matches_tflm(model, xs, tmp_path / patch, board, core, patch=patch)


def test_folded_stem_host_patch_auto(tmp_path):
    model = layers_model("int8", (1, 24, 24, 3), STEM, seed=4)
    xs = [random_inputs([1, 24, 24, 3], "int8", 3, seed=5)]
    got, ref = assert_matches_tflm(model, xs, tmp_path)
    from conftest import eerie_run
    got2, rep = eerie_run(model, xs, tmp_path, name="auto", patch="auto")
    np.testing.assert_array_equal(got2[0], ref[0])
