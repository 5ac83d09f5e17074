"""Patch stages on the emulated boards, against TFLM: the per-tile kernels with SMLAD
(mps2-an386 Cortex-M4, mps2-an500 M7, mps3-an547 M55), portable (mps2-an385 M3, riscv-virt), and the shared vww model with the
planner's own choice; the stage's RAM is measured, not asserted (bench/compare_tflm.py)."""
import numpy as np
import pytest

from conftest import eerie_run, random_inputs, tflm_run
from patch_models import MOBILENET, ODD, chain_model

BOARDS = ["mps2-an386", "mps3-an547"]
# the chains also on a core without DSP (M3: the portable per-tile kernel), the M7 and RISC-V
CHAIN_BOARDS = BOARDS + ["mps2-an385", "mps2-an500", "riscv-virt"]


@pytest.mark.parametrize("board", CHAIN_BOARDS)
@pytest.mark.parametrize("layers, shape, patch", [(MOBILENET, (1, 19, 23, 3), (4, (3, 4))),
                                                  (ODD, (1, 21, 18, 4), (4, (2, 3)))])
def test_chain_on_board_bit_exact(board_tools, tmp_path, board, layers, shape, patch):
    model = chain_model(shape, layers, seed=3)
    x = random_inputs(list(shape), "int8", 2, seed=7)
    ref = tflm_run(model, [x])
    got, report = eerie_run(model, [x], tmp_path, board=board, patch=patch)
    assert report["ops"][0]["kind"] == "PATCH_STAGE"
    np.testing.assert_array_equal(got[0], ref[0])


def test_vww_with_patches_on_m4_within_the_instruction_bound(board_tools, models_dir, tmp_path):
    """The planner's stage on the M4 shrinks the arena and, measured in QEMU, grows the
    instructions per inference by at most the 20% bound (the estimate said so beforehand)."""
    from eerie_c.api import run_model
    path = models_dir / "vww_96_int8.tflite"
    x = random_inputs([1, 96, 96, 3], "int8", 1, seed=1)
    ref = tflm_run(path, [x])[0]
    got, report = run_model(path, [x], board="mps2-an386", patch="auto", max_recompute=20)
    np.testing.assert_array_equal(got[0], ref)
    p = report["patches"]
    assert p["chosen"] is not None and report["arena_bytes"] == p["arena_bytes_after"] < p["arena_bytes_before"]
    assert p["est_growth_percent"] <= 20
    off_got, off = run_model(path, [x], board="mps2-an386", patch="off")
    np.testing.assert_array_equal(off_got[0], ref)
    assert report["instructions"] <= 1.20 * off["instructions"], (report["instructions"], off["instructions"])


def test_vww_on_m55_in_row_bands_within_the_bound(board_tools, models_dir, tmp_path):
    """On the M55 the planner's stage runs in row bands through the layers' own Helium
    kernels (the per-tile C, 3.4 instructions per MAC against Helium's ~0.13, measured 2.36x
    before the bound): the RAM target of issue 19 (<= 36,000 B) and, measured in QEMU, at
    most 20% more instructions."""
    from eerie_c.api import run_model
    path = models_dir / "vww_96_int8.tflite"
    x = random_inputs([1, 96, 96, 3], "int8", 1, seed=1)
    ref = tflm_run(path, [x])[0]
    got, report = run_model(path, [x], board="mps3-an547", patch="auto", max_recompute=20)
    np.testing.assert_array_equal(got[0], ref)
    p = report["patches"]
    assert p["chosen"] is not None and p["chosen"]["grid"][1] == 1
    assert report["arena_bytes"] == p["arena_bytes_after"] < p["arena_bytes_before"]
    assert report["ram_bytes"] <= 36_000, report["ram_bytes"]
    off_got, off = run_model(path, [x], board="mps3-an547", patch="off")
    np.testing.assert_array_equal(off_got[0], ref)
    assert report["instructions"] <= 1.20 * off["instructions"], (report["instructions"], off["instructions"])
