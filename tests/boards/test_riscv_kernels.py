"""Every kernel family on the small RISC-V board: the Cortex-M0 suite's models
(tests/boards/test_cortex_m0.py: int8, the int16 16x8 scheme with 64-bit bias arithmetic,
float32, odd sizes so that arena offsets are not word multiples) on sifive_e (RV32IMAC, soft
float: libgcc's __mulsf3 / __muldi3 and friends, 16 KiB of RAM). Each must equal TFLM (int8 /
int16 bit for bit, float within 1e-5 of the output range), run without a misaligned access
(the RISC-V boards' QEMU plugin ends the run at the first one), and keep its measured stack
under the proven bounds. Fails, never skips, without the RISC-V toolchain and QEMU."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import assert_board_matches_tflm, random_inputs, require_board_tools
from test_cortex_m0 import IDS, models

BOARD, TARGET = "sifive_e", "riscv32imac"


@pytest.mark.parametrize("model_id", IDS)
def test_kernel_on_sifive_e_matches_tflm(tmp_path, model_id):
    require_board_tools(BOARD)
    _, model, specs = models()[model_id]
    xs = [random_inputs(list(shape), dtype, 2, seed=3 + k, scale=3.0 if dtype == "float32" else 1.0)
          for k, (shape, dtype) in enumerate(specs)]
    if specs[0][1] == "int16":
        xs = [(x // 4).astype(np.int16) for x in xs]
    assert_board_matches_tflm(model, xs, tmp_path, BOARD, TARGET, name=model_id)
