"""Row-band input (--input-rows, patch/rows.py) on a stage of row bands (each layer's own
kernel per band, patch/band_kernels.py), residual blocks (CONV_2D_ADD) included: the ring of
input rows feeds the first layer's band kernel one band per call. Bit-exact with TFLM on the
host (rows pushed in bands of several sizes) and in QEMU on the M4 and the M55; the ring proof
rejects a layer's kernel scratch placed over the ring (the ring keeps the next band's halo rows
between calls, so nothing in the stage may write there)."""
import dataclasses
import subprocess

import numpy as np
import pytest

from conftest import eerie_run, random_inputs, tflm_run
from patch_models import MOBILENET, chain_model
from test_patch_rows import DRIVER

from eerie_c.api import compile_model
from eerie_c.errors import CompilerBug
from eerie_c.patch.proof import prove_patches

RESNET = "pretrainedResnet_quant.tflite"


def _build_and_push(tmp_path, model_path, patch, bands, x, nimg):
    res = compile_model(model_path, out_dir=tmp_path / "out", name="m", patch=patch, input_mode="rows")
    st = res.graph.ops[0].attrs["patch"]
    assert st.bands and st.rows is not None, "not a stage of row bands with a ring"
    (tmp_path / "out" / "drv.c").write_text(DRIVER.replace("BANDS", bands).replace("NIMG", str(nimg)))
    exe = tmp_path / "drv"
    subprocess.run(["gcc", "-std=c99", "-O1", "-Wall", "-Wextra", "-Werror", "-Wvla", "-pedantic",
                    "-o", str(exe), "drv.c", "m.c", "-lm"], cwd=tmp_path / "out", check=True)
    run = subprocess.run([str(exe)], input=x.tobytes(), capture_output=True, timeout=300)
    assert run.returncode == 0, run.stderr
    return res, run.stdout


def cached_rows_match_tflm(tmp_path, model: bytes, patch, bands, x):
    """Push two images of x in `bands` through a forced cached stage (patch) of model: the
    stage has cached halos and the outputs equal TFLM's."""
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    res, out = _build_and_push(tmp_path, p, patch, bands, x, 2)
    assert res.graph.ops[0].attrs["patch"].cache is not None
    ref = tflm_run(model, [x])[0]
    np.testing.assert_array_equal(np.frombuffer(out, np.int8).reshape(ref.shape), ref)


@pytest.mark.parametrize("grid", [(4, 1), (11, 1), (32, 1)])
@pytest.mark.parametrize("bands", ["1", "3, 8, 1"])
def test_resnet_block_rows_in_bands_bit_exact_on_host(models_dir, tmp_path, grid, bands):
    x = random_inputs([1, 32, 32, 3], "int8", 2, seed=5)
    ref = tflm_run(models_dir / RESNET, [x])[0]
    res, out = _build_and_push(tmp_path, models_dir / RESNET, (3, grid), bands, x, 2)
    st = res.graph.ops[0].attrs["patch"]
    assert st.skips == [None, None, 1] and st.rows.ring_rows < 32
    np.testing.assert_array_equal(np.frombuffer(out, np.int8).reshape(ref.shape), ref)


@pytest.mark.parametrize("bands", ["1", "2, 5, 1, 3"])
def test_chain_rows_in_bands_bit_exact_on_host(tmp_path, bands):
    shape = (1, 19, 23, 3)
    model = chain_model(shape, MOBILENET, seed=3)
    x = random_inputs(list(shape), "int8", 2, seed=7)
    ref = tflm_run(model, [x])[0]
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    _, out = _build_and_push(tmp_path, p, (4, (5, 1)), bands, x, 2)
    np.testing.assert_array_equal(np.frombuffer(out, np.int8).reshape(ref.shape), ref)


def test_proof_rejects_kernel_scratch_over_the_ring(models_dir):
    res = compile_model(models_dir / RESNET, patch=(3, (4, 1)), input_mode="rows")
    steps = {o["function"]: o["step"] for o in res.report["ops"] if o["scratch_bytes"]}
    op = res.graph.ops[0]
    stage = op.attrs["patch"]
    assert prove_patches(res.graph, res.extra["plan"], steps)["input_rows"][0]["ok"]
    assert all(off >= stage.rows.ring_bytes for off, _ in stage.kernel_scratch)
    ks = list(stage.kernel_scratch)
    ks[1] = (0, 16)   # clear of every patch buffer, but over the ring's first row
    op.attrs["patch"] = dataclasses.replace(stage, kernel_scratch=ks)
    try:
        with pytest.raises(CompilerBug, match="kernel scratch at 0 overlaps the ring"):
            prove_patches(res.graph, res.extra["plan"], steps)
    finally:
        op.attrs["patch"] = stage


@pytest.mark.parametrize("board", ["mps2-an386", "mps3-an547"])
def test_resnet_rows_auto_on_board(board_tools, models_dir, tmp_path, board):
    """The planner's stage for ResNet (its first residual block in row bands) with the image
    pushed one row at a time by the firmware harness: bit-exact, and the ring is smaller than
    the image (RAM is measured by bench/compare_patches.py, not asserted here)."""
    x = random_inputs([1, 32, 32, 3], "int8", 1, seed=1)
    got, rep = eerie_run(models_dir / RESNET, [x], tmp_path, board=board, patch="auto", input_mode="rows")
    np.testing.assert_array_equal(got[0], tflm_run(models_dir / RESNET, [x])[0])
    p = rep["patches"]
    assert p["chosen"]["grid"][1] == 1 and p["input_rows"]["ring_bytes"] < p["input_rows"]["image_bytes"]


def test_chain_rows_in_bands_on_m55(board_tools, tmp_path):
    shape = (1, 19, 23, 3)
    model = chain_model(shape, MOBILENET, seed=3)
    x = random_inputs(list(shape), "int8", 2, seed=7)
    got, rep = eerie_run(model, [x], tmp_path, board="mps3-an547", patch=(4, (5, 1)), input_mode="rows")
    assert rep["patches"]["input_rows"]["ring_rows"] < shape[1]
    np.testing.assert_array_equal(got[0], tflm_run(model, [x])[0])
