"""The int8 DEPTHWISE_CONV_2D kernel of the DSP targets for 3x3 windows at stride 1 over
per-channel extended rows, two outputs per pass (kernels/depthwise.py pairs_ok,
depthwise_s8_dsp_pairs.c.j2) vs TFLM: odd and even output widths (the last output alone),
widths 1 and 2, SAME and VALID padding (left padding odd and even), batches > 1, 4 to 64
channels, per-channel and per-tensor scales, different zero points, on the host (plain C,
UBSan, the source proof) and on the real instructions in QEMU on the M4 (mps2-an386) and the
M7 (mps2-an500)."""
from __future__ import annotations

import pytest

from eerie_c.api import compile_model
from test_depthwise import dw_model
from test_dsp_kernels import check_dsp_board, check_dsp_target

# in_shape, padding, per_channel, input zero point
SHAPES = {
    "w5-64ch-same": ((1, 6, 5, 64), "SAME", True, -5),
    "w6-8ch-batch2": ((2, 7, 6, 8), "SAME", True, 3),
    "w7-12ch-valid": ((1, 8, 9, 12), "VALID", False, -128),
    "w2-4ch": ((1, 4, 2, 4), "SAME", True, 17),
    "w1-4ch": ((1, 3, 1, 4), "SAME", False, 0),
}


def _model(case):
    in_shape, padding, pc, zp = SHAPES[case]
    return in_shape, dw_model("int8", in_shape, 1, (3, 3), (1, 1), padding, (1, 1), act="NONE",
                              per_channel=pc, in_zp=zp)


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
    _is_pairs(check_dsp_board(tmp_path, model, in_shape, board, seed=9))
