"""The int8 DEPTHWISE_CONV_2D kernel of the DSP targets for 3x3 windows at stride 2
(kernels/_depthwise_s2.py, depthwise_s8_dsp_s2.c.j2) vs TFLM: odd and even heights and widths,
SAME padding with and without top / left padding and VALID, windows reaching past the image on
every side (width or height 1 and 2), no clamp / ReLU / ReLU6 (clamps beyond SSAT), 4 to 256
channels, batches > 1, per-channel and per-tensor scales, several input zero points; on the
host (plain C, UBSan, the source proof) and on the real instructions in QEMU on the M4
(mps2-an386) and the M7 (mps2-an500). Geometries the kernel does not take (dilation, strides
2x1 / 1x2, 5x5, --optimize size) fall back to the other kernels, bit-exact too."""
from __future__ import annotations

import subprocess

import pytest

from eerie_c.api import compile_model
from test_depthwise import dw_model
from test_dsp_kernels import check_dsp_board, check_dsp_target

# in_shape, padding, act, per_channel, input zero point
SHAPES = {
    "48x48x16-same-relu6": ((1, 48, 48, 16), "SAME", "RELU6", True, -128),   # vww layer 3
    "9x8x16-same-relu6": ((1, 9, 8, 16), "SAME", "RELU6", True, -5),         # odd height: pad_t
    "8x9x8-same-relu": ((1, 8, 9, 8), "SAME", "RELU", False, 3),             # odd width: pad_l
    "7x7x4-valid-none": ((1, 7, 7, 4), "VALID", "NONE", True, 17),
    "6x8x12-valid-relu6": ((1, 6, 8, 12), "VALID", "RELU6", True, 0),        # even: last row unread
    "batch2-5x6x8": ((2, 5, 6, 8), "SAME", "NONE", True, -20),
    "1x1x8-same": ((1, 1, 1, 8), "SAME", "RELU", True, 4),                   # every tap but one padding
    "2x3x4-same": ((1, 2, 3, 4), "SAME", "NONE", False, -1),
    "6x6x128-same-relu6": ((1, 6, 6, 128), "SAME", "RELU6", True, -128),     # vww layer 23
    "5x4x256-same-relu": ((1, 5, 4, 256), "SAME", "RELU", True, 9),
    # rows past LDR's reach from a window's start: the kernel steps its pointer a row at a time
    "48x48x48-same-relu6": ((1, 48, 48, 48), "SAME", "RELU6", True, -128),   # MobileNetV2 / FOMO
    "5x81x48-same-none": ((1, 5, 81, 48), "SAME", "NONE", True, 6),         # a row of 3,888 B
}
QEMU_CASES = ["9x8x16-same-relu6", "8x9x8-same-relu", "7x7x4-valid-none", "batch2-5x6x8",
              "1x1x8-same", "6x6x128-same-relu6", "5x4x256-same-relu", "48x48x48-same-relu6",
              "5x81x48-same-none"]

# geometries that keep another kernel: in_shape, kernel, stride, padding, dilation
FALLBACK = {
    "dilated": ((1, 9, 9, 8), (3, 3), (2, 2), "SAME", (2, 2)),
    "stride2x1": ((1, 9, 8, 8), (3, 3), (2, 1), "SAME", (1, 1)),
    "stride1x2": ((1, 9, 8, 8), (3, 3), (1, 2), "SAME", (1, 1)),
    "k5-stride2": ((1, 9, 8, 8), (5, 5), (2, 2), "SAME", (1, 1)),
    "k3-stride3": ((1, 9, 8, 8), (3, 3), (3, 3), "SAME", (1, 1)),
    "row-past-reach": ((1, 5, 86, 48), (3, 3), (2, 2), "SAME", (1, 1)),   # a row of 4,128 B
}


def _model(case):
    in_shape, padding, act, pc, zp = SHAPES[case]
    return in_shape, dw_model("int8", in_shape, 1, (3, 3), (2, 2), padding, (1, 1), act=act,
                              per_channel=pc, in_zp=zp)


def _code(tmp_path, model, **kw) -> str:
    src = tmp_path / "m.tflite"
    src.write_bytes(model)
    return compile_model(src, target="cortex-m4", name="m", **kw).files["m.c"]


def _is_s2(code: str) -> bool:
    return "dw_s2_stream" in code and "smmlar" in code


@pytest.mark.parametrize("case", sorted(SHAPES))
def test_depthwise_s2_host(tmp_path, case):
    in_shape, model = _model(case)
    assert _is_s2(_code(tmp_path, model)), "the stride-2 kernel is the one under test"
    check_dsp_target(tmp_path, model, in_shape)


@pytest.mark.parametrize("board", ["mps2-an386", "mps2-an500"])
@pytest.mark.parametrize("case", QEMU_CASES)
def test_depthwise_s2_qemu(tmp_path, case, board):
    in_shape, model = _model(case)
    assert _is_s2(check_dsp_board(tmp_path, model, in_shape, board, seed=7))


@pytest.mark.parametrize("case", sorted(FALLBACK))
def test_depthwise_s2_fallback(tmp_path, case):
    in_shape, k, stride, padding, dil = FALLBACK[case]
    model = dw_model("int8", in_shape, 1, k, stride, padding, dil, act="RELU6")
    assert not _is_s2(_code(tmp_path, model)), "another kernel takes this geometry"
    check_dsp_target(tmp_path, model, in_shape)


def test_depthwise_s2_size_mode_falls_back(tmp_path):
    """--optimize size keeps the kernel over int8 weights unpacked in scratch."""
    in_shape, model = _model("9x8x16-same-relu6")
    assert not _is_s2(_code(tmp_path, model, optimize="size"))


def test_depthwise_s2_qemu_fallback(tmp_path):
    in_shape, k, stride, padding, dil = FALLBACK["stride2x1"]
    model = dw_model("int8", in_shape, 1, k, stride, padding, dil, act="RELU")
    assert not _is_s2(check_dsp_board(tmp_path, model, in_shape, "mps2-an386", seed=2))


@pytest.mark.parametrize("far", [False, True], ids=["near", "far"])
@pytest.mark.parametrize("opt", ["-O0", "-O2", "-Os"])
def test_depthwise_s2_builds_for_the_m4(tmp_path, opt, far):
    """The assembly's 13 register operands must fit gcc's allocation at every level, -O0
    (r7 the frame pointer) included."""
    in_shape, model = _model("48x48x48-same-relu6" if far else "9x8x16-same-relu6")
    src = tmp_path / "m.tflite"
    src.write_bytes(model)
    res = compile_model(src, target="cortex-m4", name="m")
    for f, text in res.files.items():
        (tmp_path / f).write_text(text)
    subprocess.run(["arm-none-eabi-gcc", "-mcpu=cortex-m4", "-mthumb", opt, "-std=c99", "-Wall",
                    "-Wextra", "-Werror", "-Wvla", "-pedantic", "-I.", "-c", "m.c", "-o", "m.o"],
                   cwd=tmp_path, check=True, capture_output=True)
