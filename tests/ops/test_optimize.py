"""--optimize {balanced,speed,size}: what layers with a choice (today the fully connected
weight formats on DSP targets, kernels/_fc_formats.choose) pick under each mode, that
report.md lists each choice with its reason, that every mode stays bit-exact with TFLM (ad01
on the host build of the cortex-m4 C, a packed-format layer in QEMU on mps2-an386), and the
command line."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from conftest import random_inputs, tflm_run
from eerie_c.api import compile_model, run_model
from eerie_c.errors import EerieError
from test_dsp_kernels import dsp_target_run
from test_fc_formats import engineered_weights, fc_weights_model, kernels_used


def test_modes_on_ad01(models_dir):
    ad01 = models_dir / "ad01_int8.tflite"
    res = {m: compile_model(ad01, target="cortex-m4", name="m", optimize=m) for m in ("speed", "balanced", "size")}
    used = {m: kernels_used(r.files["m.c"]) for m, r in res.items()}
    assert set(used["speed"]) == {"s16"}, used["speed"]
    assert used["balanced"][:5] == ["p556", "mix", "mix", "p4", "p4"], used["balanced"]   # 0 split
    packed = {m: sum(k in ("p4", "p556") for k in u) for m, u in used.items()}
    assert packed["size"] > packed["balanced"] > packed["speed"] == 0
    flash = {m: r.report["constant_bytes"] for m, r in res.items()}
    assert flash["size"] < flash["balanced"] < flash["speed"], flash
    for m, r in res.items():
        assert r.report["optimize"] == m
        choices = [op["choice"] for op in r.report["ops"] if op["kind"] == "FULLY_CONNECTED"]
        assert len(choices) == 10 and all(c.startswith("weights ") for c in choices), choices
    assert "int16: fewest instructions" in res["speed"].report["ops"][0]["choice"]
    ops = res["size"].report["ops"]
    assert "smallest: saves 3,093 B" in ops[7]["choice"], ops[7]["choice"]   # balanced: int8
    assert ops[4]["choice"].startswith("weights mix (int8: no packed format saves 1024 B")   # saves 40 B
    assert "no packed format saves enough" in res["balanced"].report["ops"][7]["choice"]


@pytest.mark.parametrize("mode", ["speed", "size"])
def test_ad01_modes_bit_exact_host(models_dir, tmp_path, monkeypatch, mode):
    """The cortex-m4 C of each mode built and run on the host (UBSan, source proof)."""
    import eerie_c.kernels as kernels
    orig = kernels.LowerCtx.__init__

    def init(self, graph, target="host", optimize="balanced"):
        orig(self, graph, target, mode)
    monkeypatch.setattr(kernels.LowerCtx, "__init__", init)   # dsp_target_run compiles with defaults
    model = (models_dir / "ad01_int8.tflite").read_bytes()
    xs = [random_inputs([1, 640], "int8", 4, seed=8)]
    np.testing.assert_array_equal(dsp_target_run(model, xs, tmp_path)[0], tflm_run(model, xs)[0])


@pytest.mark.parametrize("mode", ["speed", "size"])
def test_modes_on_cortex_m4(tmp_path, mode):
    """A layer of mostly small weights: speed stores it sign-extended (int16), size packs it;
    both bit-exact in QEMU."""
    w = engineered_weights(96, 200, seed=5, minus128=False)
    model = fc_weights_model(w, 2, "RELU", True)
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    xs = [random_inputs([2, 200], "int8", 2, seed=9)]
    got, rep = run_model(p, xs, board="mps2-an386", name="m", out_dir=tmp_path / "fw", optimize=mode)
    used = kernels_used((tmp_path / "fw" / "m.c").read_text())
    assert used == ["s16"] if mode == "speed" else used in (["p4"], ["p556"]), used
    assert f"--optimize {mode}" in (tmp_path / "fw" / "report.md").read_text()
    np.testing.assert_array_equal(got[0], tflm_run(model, xs)[0])


def test_cli_optimize(models_dir, tmp_path):
    cmd = [sys.executable, "-c", "from eerie_c.cli import main; main()",
           str(models_dir / "ad01_int8.tflite"), "--target", "cortex-m4", "-o", str(tmp_path / "o"), "-q"]
    r = subprocess.run(cmd + ["--optimize", "speed"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "--optimize speed" in (tmp_path / "o" / "report.md").read_text()
    r = subprocess.run(cmd + ["--optimize", "fast"], capture_output=True, text=True)
    assert r.returncode != 0 and "invalid choice" in r.stderr
    with pytest.raises(EerieError, match="--optimize must be one of"):
        compile_model(models_dir / "ad01_int8.tflite", target="cortex-m4", optimize="fast")
