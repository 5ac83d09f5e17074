"""A DEPTHWISE_CONV_2D over one input channel runs as a CONV_2D (passes/depthwise_as_conv.py):
bit-exact with TFLM's depthwise kernel for int8 (per-channel and per-tensor weights) and within
the float contract, for depth multipliers 1..8, strides, dilation and both paddings; and TFLM's
micro_speech model, whose only heavy layer is one, on the M4 and the RISC-V board."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import assert_board_matches_tflm, assert_matches_tflm, random_inputs, require_board_tools
from test_depthwise import dw_model

from eerie_c.api import compile_model

# in_shape, multiplier, kernel, stride, padding, dilation, act
CASES = {
    "mult8-10x8-s2": ((1, 25, 20, 1), 8, (10, 8), (2, 2), "SAME", (1, 1), "RELU"),
    "mult1-3x3": ((1, 9, 7, 1), 1, (3, 3), (1, 1), "SAME", (1, 1), "NONE"),
    "mult3-valid": ((2, 8, 9, 1), 3, (3, 2), (1, 2), "VALID", (1, 1), "RELU6"),
    "mult4-dilated": ((1, 11, 10, 1), 4, (3, 3), (1, 1), "SAME", (2, 2), "NONE"),
    "mult16-1d": ((1, 1, 40, 1), 16, (1, 5), (1, 2), "SAME", (1, 1), "RELU"),
}


def _kinds(model, tmp_path):
    p = tmp_path / "k.tflite"
    p.write_bytes(model)
    return [op.kind for op in compile_model(p, patch="off").graph.ops]


@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_one_channel_depthwise_matches_tflm(tmp_path, case, dtype):
    in_shape, mult, k, stride, padding, dil, act = CASES[case]
    model = dw_model(dtype, in_shape, mult, k, stride, padding, dil, act=act,
                     per_channel=case != "mult3-valid", seed=len(case))
    assert _kinds(model, tmp_path) == ["CONV_2D"]
    assert_matches_tflm(model, [random_inputs(list(in_shape), dtype, 3, seed=1)], tmp_path)


def test_two_channels_stay_depthwise(tmp_path):
    model = dw_model("int8", (1, 6, 6, 2), 2, (3, 3))
    assert _kinds(model, tmp_path) == ["DEPTHWISE_CONV_2D"]


@pytest.mark.parametrize("board,core", [("mps2-an386", "cortex-m4"), ("riscv-virt", "riscv32imafc")])
def test_micro_speech_on_boards(tmp_path, board, core):
    """TFLM's micro_speech: 49x40x1 -> a 10x8 stride-2 depthwise with multiplier 8 -> FC."""
    require_board_tools(board)
    from conftest import ROOT
    model = (ROOT / "examples" / "micro_speech" / "models" / "micro_speech_quantized.tflite").read_bytes()
    xs = [random_inputs([1, 1960], "int8", 3, seed=7)]
    rep = assert_board_matches_tflm(model, xs, tmp_path, board, core, patch="off")
    assert [op["kind"] for op in rep["ops"]][0] == "CONV_2D"
