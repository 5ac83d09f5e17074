"""The int8 DEPTHWISE_CONV_2D kernel of the DSP targets with its requantization table (weights
and bias stored doubled, 16 words of bias and parameters per 4 channels) over sign-extended
input rows (kernels/depthwise.py, kernels/depthwise_s8_dsp_rows.c.j2: assembly taps for
kh <= 3 within LDRD's reach, C otherwise) vs TFLM: odd spatial shapes, strides, dilation, both paddings,
batches > 1, ReLU / ReLU6 / none, per-channel and per-tensor scales, on the host (plain C,
UBSan, the source proof) and on the real instructions in QEMU on the M4 (mps2-an386) and the
M7 (mps2-an500)."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import random_inputs, tflm_run
from eerie_c.api import compile_model, run_model
from test_depthwise import dw_model
from test_dsp_kernels import check_dsp_board, check_dsp_target

# in_shape, kernel, stride, padding, dilation, act, per_channel (stride 1: the rows kernel,
# but 3x3 undilated: the pairs kernel, test_depthwise_pairs.py; strided layers keep
# depthwise_s8_dsp.c.j2, with the table from 32 channels on)
SHAPES = {
    "k3-odd-relu6": ((1, 7, 5, 36), (3, 3), (1, 1), "SAME", (1, 1), "RELU6", True),   # pairs
    "k3x2-odd-relu6": ((1, 7, 5, 36), (3, 2), (1, 1), "SAME", (1, 1), "RELU6", True),
    "k3-batch2-8ch": ((2, 9, 6, 8), (3, 3), (1, 1), "SAME", (1, 1), "NONE", True),     # pairs
    "k3-dil2-valid": ((1, 9, 8, 32), (3, 3), (1, 1), "VALID", (2, 2), "RELU", False),
    "k5x3-same": ((1, 6, 7, 48), (5, 3), (1, 1), "SAME", (1, 1), "RELU", True),   # C taps (kh > 3)
    "k2x3-256ch": ((1, 4, 5, 256), (2, 3), (1, 1), "SAME", (1, 1), "RELU", True),  # C taps (LDRD reach)
    "k3-dil2-none": ((1, 9, 8, 32), (3, 3), (1, 1), "SAME", (2, 2), "NONE", True),
    "k3-valid-odd": ((1, 8, 7, 32), (3, 3), (1, 1), "VALID", (1, 1), "RELU6", True),
    "k3-s2-batch2-table": ((2, 9, 6, 32), (3, 3), (2, 2), "SAME", (1, 1), "NONE", True),  # not rows
}


def _model(case):
    in_shape, k, stride, padding, dil, act, pc = SHAPES[case]
    return in_shape, dw_model("int8", in_shape, 1, k, stride, padding, dil, act=act, per_channel=pc)


@pytest.mark.parametrize("case", sorted(SHAPES))
def test_depthwise_table_host(tmp_path, case):
    in_shape, model = _model(case)
    src = tmp_path / "m.tflite"
    src.write_bytes(model)
    code = compile_model(src, target="cortex-m4", name="m").files["m.c"]
    if SHAPES[case][1:3] == ((3, 3), (1, 1)) and SHAPES[case][4] == (1, 1):
        assert "(w0, w1) and (w1, w2)" in code, "3x3, stride 1: the pairs kernel"
    elif SHAPES[case][2] == (1, 1):
        assert "extended zero-point row" in code, "the kernel over extended rows is the one under test"
    else:
        assert "eerie_requant_fast2(" in code and "extended zero-point row" not in code
    check_dsp_target(tmp_path, model, in_shape)


@pytest.mark.parametrize("board", ["mps2-an386", "mps2-an500"])
@pytest.mark.parametrize("case", sorted(SHAPES))
def test_depthwise_table_qemu(tmp_path, case, board):
    in_shape, model = _model(case)
    check_dsp_board(tmp_path, model, in_shape, board, seed=4)


@pytest.mark.parametrize("board", ["mps2-an386", "mps2-an500"])
@pytest.mark.parametrize("kw", [dict(), dict(dil=(2, 2)), dict(batches=2), dict(hw=(9, 7), c=12)],
                         ids=["3x3", "dilated", "batches", "9x7x12"])
def test_rows_in_place_qemu(tmp_path, kw, board):
    """In place the rows kernel (dilated) and the pairs kernel (3x3: fused RELU at a zero
    point of -1) write output row oy straight over input row oy (already extended, like every
    row up to it): no ring of output rows."""
    from test_dsp_kernels import dw_chain
    model, shape = dw_chain(**kw)
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    rep = compile_model(p, target="cortex-m4", name="m", patch="off").report
    dw = next(o for o in rep["ops"] if o["kind"] == "DEPTHWISE_CONV_2D")
    assert dw["inputs"][0]["offset"] == dw["outputs"][0]["offset"], "runs in place"
    assert ("static void eerie_dw_pairs" in compile_model(p, target="cortex-m4", name="m", patch="off").files["m.c"]) \
        == ("dil" not in kw)
    xs = [random_inputs(list(shape), "int8", 2, seed=6)]
    got, rep = run_model(p, xs, board=board, patch="off")
    np.testing.assert_array_equal(got[0], tflm_run(model, xs)[0])
