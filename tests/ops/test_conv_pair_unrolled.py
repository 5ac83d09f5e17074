"""The shared int8 CONV_2D kernel unrolled per depth (eerie_conv_pair_s8_gG, eerie_conv_pair_s8_gGd
with doubled columns and, under --optimize speed, eerie_conv_pair_s8_gGw; helpers/gemm_dsp_g.c.j2): layers of at most
UNROLL_MAX_GROUPS groups of 4 taps, no clamp beyond SSAT, an even channel count. vs TFLM on
shapes that reach each part of it: one and several pairs of channels, 2 to 32 groups (the
column offsets), odd pixel counts (the last pixel twice), batches > 1, strides, dilation,
padding, per-channel and per-tensor requantization. Built for the host (the plain-C branch,
which calls the general kernel, with UBSan and the source proof) and run on the real
instructions in QEMU on the M4 (mps2-an386) and the M7 (mps2-an500)."""
from __future__ import annotations

import re

import pytest

from eerie_c.api import compile_model
from eerie_c.kernels.conv import UNROLL_MAX_GROUPS
from test_conv import conv_model
from test_conv_pair_dsp import _int8_weights_when_balanced, _speed  # noqa: F401 (autouse fixture)
from test_dsp_kernels import check_dsp_board, check_dsp_target


# in_shape, out_c, kernel, stride, padding, dilation, per_channel; groups = ceil(K / 4)
SHAPES = {
    "pw-K64-odd-pixels": ((1, 5, 3, 64), 10, (1, 1), (1, 1), "SAME", (1, 1), True),      # 16
    "k3-K36-s2-batch2": ((2, 5, 7, 4), 6, (3, 3), (2, 2), "SAME", (1, 1), True),         # 9
    "k3-K27-dil2-valid": ((1, 7, 6, 3), 8, (3, 3), (1, 1), "VALID", (2, 2), False),      # 7
    "k2x3-K60-s1x2-pad": ((1, 4, 5, 10), 4, (2, 3), (1, 2), "SAME", (1, 1), True),       # 15
    "pw-K16-one-pair": ((1, 3, 3, 16), 2, (1, 1), (1, 1), "SAME", (1, 1), False),        # 4
    "pw-K128-odd-pixels": ((1, 3, 5, 128), 6, (1, 1), (1, 1), "SAME", (1, 1), True),    # 32
    "d-pw-K8-batch3-s2": ((3, 5, 4, 8), 6, (1, 1), (2, 2), "VALID", (1, 1), True),         # 2
    # out_c > kp / 2: columns doubled (SADD16), the "d" copy (by default; speed doubles the
    # weights instead): 1 to 16 input channels, the column builders of _conv_cols.py
    "d-pw-K8-odd-pixels": ((1, 5, 3, 8), 10, (1, 1), (1, 1), "SAME", (1, 1), True),       # 2
    "d-pw-K16-batch2": ((2, 3, 4, 16), 12, (1, 1), (1, 1), "VALID", (1, 1), False),      # 4
    "d-k10x4-in1-s2": ((1, 13, 7, 1), 24, (10, 4), (2, 2), "SAME", (1, 1), True),        # 10
    "d-k3-in3-s2-first": ((2, 9, 8, 3), 16, (3, 3), (2, 2), "SAME", (1, 1), True),       # 7
    "d-k3-in2-dil2": ((1, 8, 7, 2), 12, (3, 3), (1, 1), "SAME", (2, 2), False),          # 5
    "d-k3-in4-valid": ((1, 6, 6, 4), 20, (3, 3), (1, 1), "VALID", (1, 1), True),         # 9
    # fused ReLU with the output zero point at -128 (vww's layers): no clamp beyond SSAT, so
    # still the unrolled kernel
    "d-relu-k3-in3-s2": ((1, 9, 9, 3), 16, (3, 3), (2, 2), "SAME", (1, 1), True, "RELU"),  # 7
    "relu-pw-K32": ((1, 4, 5, 32), 8, (1, 1), (1, 1), "SAME", (1, 1), False, "RELU"),     # 8
}


def _model(case):
    in_shape, out_c, k, stride, padding, dil, pc, *act = SHAPES[case]
    act = act[0] if act else "NONE"
    return in_shape, conv_model("int8", in_shape, out_c, k, stride, padding, dil, act=act,
                                per_channel=pc, seed=5, out_zp=-128 if act == "RELU" else 4)


def _groups(case) -> int:
    in_shape, _, k, *_ = SHAPES[case]
    return -(-k[0] * k[1] * in_shape[3] // 4)


def _called(code: str, case, wide: bool) -> None:
    g = _groups(case)
    assert g <= UNROLL_MAX_GROUPS
    # doubled columns by default where the channels outnumber half the padded depth
    d = "d" if not wide and SHAPES[case][1] > 2 * g else ""
    assert (d == "d") == case.startswith("d-") or wide
    name = f"eerie_conv_pair_s8_g{g}{'w' if wide else ''}{d}"
    assert re.search(rf"{name}\(ca,", code), "the unrolled kernel is the one under test"
    assert f"static void {name}(" in code


@pytest.mark.parametrize("case", sorted(SHAPES))
def test_unrolled_host(tmp_path, case):
    in_shape, model = _model(case)
    src = tmp_path / "m.tflite"
    src.write_bytes(model)
    _called(compile_model(src, target="cortex-m4", name="m").files["m.c"], case, False)
    check_dsp_target(tmp_path, model, in_shape)


@pytest.mark.parametrize("case", sorted(SHAPES))
def test_unrolled_wide_host(tmp_path, monkeypatch, case):
    in_shape, model = _model(case)
    src = tmp_path / "m.tflite"
    src.write_bytes(model)
    _called(compile_model(src, target="cortex-m4", name="m", optimize="speed").files["m.c"], case, True)
    _speed(monkeypatch)
    check_dsp_target(tmp_path, model, in_shape)


@pytest.mark.parametrize("optimize", ["balanced", "speed"])
@pytest.mark.parametrize("board", ["mps2-an386", "mps2-an500"])
@pytest.mark.parametrize("case", sorted(SHAPES))
def test_unrolled_qemu(tmp_path, case, board, optimize):
    in_shape, model = _model(case)
    _called(check_dsp_board(tmp_path, model, in_shape, board, seed=11, optimize=optimize), case,
            optimize == "speed")


@pytest.mark.parametrize("board", ["host", "mps2-an386"])
def test_balanced_widens_small_layers(tmp_path, monkeypatch, board):
    """--optimize balanced stores weights sign-extended (the speed kernel, no SXTB16) for a
    layer with at most WIDE_BALANCED_BYTES of weights, int8 above: both bit-exact with TFLM."""
    import eerie_c.kernels.conv as conv
    monkeypatch.undo()   # the real threshold, not the autouse fixture's 0
    assert conv.WIDE_BALANCED_BYTES == 2048
    small = ((1, 6, 5, 8), 48, (1, 1), (1, 1), "SAME", (1, 1), True)      # 384 B (MobileNetV2's)
    large = ((1, 4, 5, 64), 40, (1, 1), (1, 1), "SAME", (1, 1), True)     # 2,560 B
    for (in_shape, out_c, k, stride, padding, dil, pc), wide in ((small, True), (large, False)):
        model = conv_model("int8", in_shape, out_c, k, stride, padding, dil, per_channel=pc, seed=3)
        src = tmp_path / "m.tflite"
        src.write_bytes(model)
        code = compile_model(src, target="cortex-m4", name="m").files["m.c"]
        g = -(-in_shape[3] // 4)
        assert (f"eerie_conv_pair_s8_g{g}w(" in code) == wide, (in_shape, out_c)
        run = tmp_path / f"run{out_c}"
        run.mkdir()
        if board == "host":
            check_dsp_target(run, model, in_shape)
        else:
            check_dsp_board(run, model, in_shape, board, seed=5)
