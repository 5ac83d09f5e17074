"""The int8 DEPTHWISE_CONV_2D kernel of the DSP targets for 3x3 windows at stride 1 over
per-channel extended rows, in blocks of up to 5 outputs per channel pass (kernels/_dw_pairs.py,
depthwise_s8_dsp_pairs.c.j2, helpers/dw_pairs.c.j2) vs TFLM: odd and even output widths (blocks
starting on either half of a word, single outputs), widths 1 and 2, SAME and VALID padding,
batches > 1, 4 to 1024 channels (1024: blocks of 4, STRB's reach), a width past LDRD's
post-index (the explicit pointer step), fused RELU / RELU6 / RELU_N1_TO_1 (clamps beyond SSAT
at the output zero point, below and above it), per-channel and per-tensor scales, different
zero points, on the host (plain C, UBSan, the source proof) and on the real instructions in
QEMU on the M4 (mps2-an386) and the M7 (mps2-an500)."""
from __future__ import annotations

import pytest

from eerie_c.api import compile_model
from eerie_c.kernels._dw_pairs import block_cost, blocks, layout, pairs_ok
from eerie_c.kernels.window import Window
from test_depthwise import dw_model
from test_dsp_kernels import check_dsp_board, check_dsp_target

# in_shape, padding, per_channel, input zero point, activation, output scale, output zero point
SHAPES = {
    "w5-64ch-same": ((1, 6, 5, 64), "SAME", True, -5, "NONE", 0.12, -2),
    "w6-8ch-batch2": ((2, 7, 6, 8), "SAME", True, 3, "NONE", 0.12, -2),
    "w7-12ch-valid": ((1, 8, 9, 12), "VALID", False, -128, "NONE", 0.12, -2),
    "w2-4ch": ((1, 4, 2, 4), "SAME", True, 17, "NONE", 0.12, -2),
    "w1-4ch": ((1, 3, 1, 4), "SAME", False, 0, "NONE", 0.12, -2),
    # fused activations: a clamp at the output zero point (RELU), on both sides (RELU6), and
    # at neither (RELU_N1_TO_1: -1 and 1 in the output scale); small output scales saturate
    "w5-64ch-relu": ((1, 5, 5, 64), "SAME", True, -5, "RELU", 0.05, -2),
    "w11-16ch-relu-zp9": ((1, 7, 11, 16), "SAME", True, 4, "RELU", 0.05, 9),
    "w6-8ch-relu6-batch3": ((3, 5, 6, 8), "SAME", True, 3, "RELU6", 0.03, -100),
    "w9-4ch-relu6-valid": ((2, 6, 11, 4), "VALID", False, -20, "RELU6", 0.05, -128),
    "w4-32ch-n1to1": ((1, 9, 4, 32), "SAME", True, 0, "RELU_N1_TO_1", 0.01, 20),
    "w3-256ch-relu": ((1, 3, 3, 256), "SAME", True, -128, "RELU", 0.08, 5),
    "w5-1024ch-relu6": ((1, 3, 5, 1024), "SAME", True, 7, "RELU6", 0.05, -1),
    "w171-4ch-wide": ((1, 3, 171, 4), "SAME", True, -3, "NONE", 0.12, -2),
    "w48-8ch-odd-h": ((1, 5, 48, 8), "SAME", True, -128, "RELU", 0.05, -128),
}


def _model(case):
    in_shape, padding, pc, zp, act, scale, ozp = SHAPES[case]
    return in_shape, dw_model("int8", in_shape, 1, (3, 3), (1, 1), padding, (1, 1), act=act,
                              per_channel=pc, in_zp=zp, out_scale=scale, out_zp=ozp)


def _clamp(case):
    """TFLite's activation range of the case's output (what SSAT leaves to clamp)."""
    _, _, _, _, act, scale, zp = SHAPES[case]
    q = lambda v: zp + round(v / scale)   # noqa: E731 (no halves at these scales)
    return {"NONE": (-128, 127), "RELU": (max(-128, q(0)), 127),
            "RELU6": (max(-128, q(0)), min(127, q(6))),
            "RELU_N1_TO_1": (max(-128, q(-1)), min(127, q(1)))}[act]


def _is_pairs(code: str) -> None:
    assert "static void eerie_dw_pairs" in code and "per channel: doubled folded bias, (w0, w1)" in code, \
        "the pairs kernel is the one under test"


@pytest.mark.parametrize("case", sorted(SHAPES))
def test_depthwise_pairs_host(tmp_path, case):
    in_shape, model = _model(case)
    src = tmp_path / "m.tflite"
    src.write_bytes(model)
    _is_pairs(compile_model(src, target="cortex-m4", name="m").files["m.c"])
    check_dsp_target(tmp_path, model, in_shape)


@pytest.mark.parametrize("board", ["mps2-an386", "mps2-an500"])
@pytest.mark.parametrize("case", sorted(SHAPES))
def test_depthwise_pairs_qemu(tmp_path, case, board):
    in_shape, model = _model(case)
    code = check_dsp_board(tmp_path, model, in_shape, board, seed=9)
    _is_pairs(code)
    lo, hi = _clamp(case)   # the clamps beyond SSAT are in the assembly the board ran
    assert ("it     lt" in code) == (lo > -128) and ("it     gt" in code) == (hi < 127)
    if case == "w171-4ch-wide":
        assert "add    %[r], %[r], #" in code, "beyond LDRD's post-index: the explicit step"
    if case == "w5-1024ch-relu6":
        assert "eerie_dw_pairs5" not in code, "STRB reaches 4 outputs of 1024 channels"


def test_pairs_cases_clamp_each_way():
    """The cases clamp at the low end only, the high end only, both, and at neither."""
    kinds = {(lo > -128, hi < 127) for lo, hi in map(_clamp, SHAPES)}
    assert kinds == {(True, False), (False, True), (True, True), (False, False)}


def _win(out_w, pad_l=1):
    return Window(kh=3, kw=3, sh=1, sw=1, dh=1, dw=1, pad_t=1, pad_l=pad_l, out_h=4, out_w=out_w,
                  has_interior=True, has_border=True, interior_cond="")


def test_pairs_blocks_cover_the_row():
    """Every output of a row in exactly one block, blocks of at most 5 (STRB's reach fewer),
    the layout's rows long enough for every word a block reads, and the widths past LDRD's
    reach refused (they take the rows kernel)."""
    for out_w in range(1, 60):
        for pad_l in (0, 1):
            in_w = out_w + 2 - 2 * pad_l
            shift, xoff, pwp = layout(_win(out_w, pad_l), in_w)
            assert xoff % 2 == 0 and xoff + in_w <= pwp and pwp % 2 == 0
            for in_c in (4, 64, 1024, 4092):
                bl = blocks(_win(out_w, pad_l), shift, in_c, 0)
                assert [ox for ox0, n in bl for ox in range(ox0, ox0 + n)] == list(range(out_w))
                assert all(1 <= n <= 5 and (n - 1) * in_c <= 4095 for _, n in bl)
                for ox0, n in bl:   # words read: (ox0 + shift) // 2 + 0 .. NW - 1
                    p0 = ox0 + shift
                    assert p0 // 2 + (p0 % 2 + n + 1) // 2 + 1 <= pwp // 2
    assert blocks(_win(5), 1, 64, 0) == [(0, 5)]                    # kws: one block of 5
    assert pairs_ok(_win(171), 4, 171) and not pairs_ok(_win(260), 4, 260)
    assert block_cost(5, 0, 64, 0) == 69 and block_cost(5, 0, 64, 2) == 99
