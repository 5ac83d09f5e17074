"""The RISC-V int8 DEPTHWISE_CONV_2D kernel (kernels/_rv_dw.py, depthwise_s8_rv.c.j2) on the
RISC-V boards in QEMU: riscv-virt (RV32IMAFC) and sifive_e (RV32IMAC, 16 KiB of RAM). A few
shapes covering its blocks: SAME borders with the interior pairs and an odd column, stride 2
with a depth multiplier, dilation with VALID padding and batches. Each must equal TFLM bit for
bit, run without a misaligned access (the boards' QEMU plugin ends the run at the first one)
and keep its measured stack under the proven bound. The host-built runs on many more shapes
are tests/ops/test_rv_depthwise.py. Fails, never skips, without the toolchain and QEMU."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conftest import assert_board_matches_tflm, random_inputs, require_board_tools

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "ops"))
from test_conv import unsaturated_scale  # noqa: E402
from test_depthwise import dw_model  # noqa: E402

from eerie_c.api import compile_model  # noqa: E402

CASES = {
    # name: (model builder, input shape)
    "dw3x3-same-odd": (lambda: dw_model("int8", (1, 7, 9, 5), 1, (3, 3), (1, 1), "SAME",
                                        out_scale=unsaturated_scale(9)), (1, 7, 9, 5)),
    "dw3x3-s2-mult2": (lambda: dw_model("int8", (1, 7, 8, 3), 2, (3, 3), (2, 2), "SAME", act="RELU",
                                        per_channel=False, in_zp=37), (1, 7, 8, 3)),
    "dw-dil-valid-batches": (lambda: dw_model("int8", (2, 8, 9, 4), 1, (3, 2), (1, 1), "VALID", (2, 2),
                                              out_scale=unsaturated_scale(6)), (2, 8, 9, 4)),
}


@pytest.mark.parametrize("board,target", [("riscv-virt", "riscv32imafc"), ("sifive_e", "riscv32imac")])
@pytest.mark.parametrize("case", sorted(CASES))
def test_rv_depthwise_on_board_matches_tflm(tmp_path, case, board, target):
    require_board_tools(board)
    build, shape = CASES[case]
    model = build()
    xs = [random_inputs(list(shape), "int8", 2, seed=11)]
    assert_board_matches_tflm(model, xs, tmp_path, board, target, name=case.replace("-", "_"))
    src = tmp_path / "k.tflite"
    src.write_bytes(model)
    assert "/* output rows " in compile_model(src, target=target, name="k").files["k.c"], \
        "the RISC-V depthwise kernel is used"
