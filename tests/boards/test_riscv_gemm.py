"""The RISC-V int8 GEMM kernels (kernels/_rv.py, helpers/gemm_rv.c.j2: CONV_2D and
FULLY_CONNECTED) on the RISC-V boards in QEMU: riscv-virt (RV32IMAFC) and sifive_e (RV32IMAC,
16 KiB of RAM). Shapes cover the kernels' tails: output channels not a multiple of 4, an odd
pixel or batch count (the one-row kernel), odd K, padded taps through im2col, strides,
dilation, batches > 1. Each must equal TFLM bit for bit, run without a misaligned access (the
RISC-V boards' QEMU plugin ends the run at the first one) and keep its measured stack under
the proven bounds. The host-built runs of the same kernels on many more shapes are
tests/ops/test_rv_kernels.py. Fails, never skips, without the RISC-V toolchain and QEMU."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conftest import assert_board_matches_tflm, random_inputs, require_board_tools

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "ops"))
from test_conv import conv_model, unsaturated_scale  # noqa: E402
from test_fully_connected import fc_model  # noqa: E402

CASES = {
    # name: (model builder, input shape)
    "conv3x3-same-odd": (lambda: conv_model("int8", (1, 7, 9, 3), 5, (3, 3), (1, 1), "SAME",
                                            out_scale=unsaturated_scale(27)), (1, 7, 9, 3)),
    "conv3x3-s2-dil": (lambda: conv_model("int8", (1, 10, 11, 3), 6, (3, 2), (2, 1), "VALID", (2, 2),
                                          act="RELU", out_scale=unsaturated_scale(18)), (1, 10, 11, 3)),
    "conv-batches": (lambda: conv_model("int8", (2, 4, 5, 8), 5, (3, 3), (1, 1), "SAME",
                                        out_scale=unsaturated_scale(72)), (2, 4, 5, 8)),
    "pointwise-strided": (lambda: conv_model("int8", (1, 5, 7, 9), 9, (1, 1), (2, 3), "SAME",
                                             out_scale=unsaturated_scale(9)), (1, 5, 7, 9)),
    "pointwise-batches": (lambda: conv_model("int8", (3, 3, 3, 5), 6, (1, 1), (1, 1), "VALID",
                                             per_channel=False, out_scale=unsaturated_scale(5)),
                          (3, 3, 3, 5)),
    "fc-batch1": (lambda: fc_model("int8", 1, 37, 11, "RELU", per_channel=True), (1, 37)),
    "fc-batch3": (lambda: fc_model("int8", 3, 64, 13, "NONE"), (3, 64)),
}


@pytest.mark.parametrize("board,target", [("riscv-virt", "riscv32imafc"), ("sifive_e", "riscv32imac")])
@pytest.mark.parametrize("case", sorted(CASES))
def test_rv_gemm_on_board_matches_tflm(tmp_path, case, board, target):
    require_board_tools(board)
    build, shape = CASES[case]
    xs = [random_inputs(list(shape), "int8", 2, seed=11)]
    assert_board_matches_tflm(build(), xs, tmp_path, board, target, name=case.replace("-", "_"))
