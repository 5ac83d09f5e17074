"""Row-band input on the emulated M4 (mps2-an386), against TFLM: the firmware harness reads each
record row by row (EERIE_BAND_ROWS = 1, a camera's line event) into one row buffer and
pushes it with NAME_input_rows, so the image never sits whole in RAM; the harness fails the run
when a push before the last row returns 1 or the last one does not. RAM is measured, not
asserted against a target (bench/compare_patches.py); only that it is below the whole-image run."""
import numpy as np
import pytest

from conftest import eerie_run, random_inputs, tflm_run
from patch_models import MOBILENET, ODD, chain_model


@pytest.mark.parametrize("layers, shape, patch", [(MOBILENET, (1, 19, 23, 3), (4, (3, 4))),
                                                  (ODD, (1, 21, 18, 4), (4, (2, 3)))])
def test_rows_chain_on_m4_bit_exact(board_tools, tmp_path, layers, shape, patch):
    model = chain_model(shape, layers, seed=3)
    x = random_inputs(list(shape), "int8", 2, seed=7)
    ref = tflm_run(model, [x])
    got, report = eerie_run(model, [x], tmp_path, board="mps2-an386", patch=patch, input_mode="rows")
    assert report["patches"]["input_rows"]["ring_rows"] < shape[1]
    np.testing.assert_array_equal(got[0], ref[0])


def test_vww_rows_on_m4(board_tools, models_dir, tmp_path):
    from eerie_c.api import run_model
    path = models_dir / "vww_96_int8.tflite"
    x = random_inputs([1, 96, 96, 3], "int8", 1, seed=1)
    ref = tflm_run(path, [x])[0]
    got, rows = run_model(path, [x], board="mps2-an386", patch="auto", input_mode="rows")
    np.testing.assert_array_equal(got[0], ref)
    info = rows["patches"]["input_rows"]
    assert info["ring_bytes"] < info["image_bytes"]
    got, whole = run_model(path, [x], board="mps2-an386", patch="auto")
    np.testing.assert_array_equal(got[0], ref)
    assert rows["ram_bytes"] < whole["ram_bytes"], (rows["ram_bytes"], whole["ram_bytes"])
