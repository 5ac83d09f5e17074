"""The MLPerf Tiny models from models/mlperf_tiny, on the host: bit-exact with TFLM (int8),
within 1e-4 of the output range (float), strict-warning C, deterministic output, arena no
larger than TFLM's activation arena."""
import filecmp
import subprocess

import numpy as np
import pytest

from conftest import random_inputs, tflm_run
from eerie_c.api import compile_model, run_model

INT8 = ["kws_ref_model", "vww_96_int8", "pretrainedResnet_quant", "ad01_int8"]
FLOAT = ["pretrainedResnet", "ad01_fp32"]
# TFLM's activation arena on the host (models/mlperf_tiny/README.md).
TFLM_ACTIVATIONS = {"kws_ref_model": 16000, "pretrainedResnet_quant": 49152, "vww_96_int8": 73728,
                    "ad01_int8": 768, "pretrainedResnet": 196608, "ad01_fp32": 3072}


def _inputs(res, n, seed):
    spec = res.report["inputs"][0]
    return random_inputs(spec["shape"], spec["dtype"], n, seed=seed)


@pytest.mark.parametrize("model", INT8)
def test_int8_bit_exact_with_tflm(models_dir, model, tmp_path):
    path = models_dir / f"{model}.tflite"
    res = compile_model(path)
    x = _inputs(res, 20, seed=1)
    got, _ = run_model(path, [x])
    ref = tflm_run(path, [x])
    assert got[0].dtype == np.int8
    np.testing.assert_array_equal(got[0], ref[0])


@pytest.mark.parametrize("model", FLOAT)
def test_float_matches_tflm(models_dir, model, tmp_path):
    path = models_dir / f"{model}.tflite"
    res = compile_model(path)
    x = _inputs(res, 20, seed=2)
    got, _ = run_model(path, [x])
    ref = tflm_run(path, [x])
    span = float(ref[0].max() - ref[0].min()) or 1.0
    assert float(np.abs(got[0] - ref[0]).max()) <= 1e-4 * span


@pytest.mark.parametrize("model", INT8 + FLOAT)
def test_arena_not_worse_than_tflm(models_dir, model):
    res = compile_model(models_dir / f"{model}.tflite")
    # TFLM's figure is its activation arena (the peak of simultaneously live activations
    # under its planner); ours is the static arena (caller-owned inputs/outputs excluded).
    assert res.report["arena_bytes"] <= TFLM_ACTIVATIONS[model], res.report["arena_bytes"]


@pytest.mark.parametrize("model", INT8 + FLOAT)
def test_strict_c_and_deterministic(models_dir, model, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    compile_model(models_dir / f"{model}.tflite", a, name="net")
    compile_model(models_dir / f"{model}.tflite", b, name="net")
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir())
    match, mismatch, errors = filecmp.cmpfiles(a, b, names, shallow=False)
    assert not mismatch and not errors
    subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-Wvla", "-pedantic", "-O1",
                    "-c", "net.c", "-o", "net.o"], cwd=a, check=True)
    text = (a / "net.c").read_text()
    for banned in ("malloc", "free(", "printf", "alloca"):
        assert banned not in text
