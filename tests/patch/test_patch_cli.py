"""`eerie-c --patch {auto,off} --max-recompute PCT` and `eerie-c run` with them."""
import json
import subprocess
import sys

import numpy as np

from conftest import tflm_run
from patch_models import MOBILENET, chain_model


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "eerie_c.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True)


def test_compile_with_patches_reports_the_choice(tmp_path):
    model = tmp_path / "m.tflite"
    model.write_bytes(chain_model((1, 64, 64, 3), MOBILENET, tail="pool"))
    p = _cli(model, "--patch", "auto", "--max-recompute", "25", "-o", tmp_path / "out", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["patches"]["mode"] == "auto" and report["patches"]["max_recompute_percent"] == 25
    assert report["patches"]["chosen"] is not None
    assert "## Patch-based execution" in (tmp_path / "out" / "report.md").read_text()
    off = _cli(model, "--patch", "off", "-o", tmp_path / "off", cwd=tmp_path)
    assert off.returncode == 0, off.stderr
    r_off = json.loads((tmp_path / "off" / "report.json").read_text())
    assert r_off["patches"] == {"mode": "off", "chosen": None}
    # no --patch: auto (at the default 20% bound), the arena below the layer-by-layer one
    default = _cli(model, "-o", tmp_path / "default", cwd=tmp_path)
    assert default.returncode == 0, default.stderr
    r = json.loads((tmp_path / "default" / "report.json").read_text())
    assert r["patches"]["mode"] == "auto" and r["patches"]["max_recompute_percent"] == 20
    assert r["patches"]["chosen"] is not None and r["arena_bytes"] < r_off["arena_bytes"]
    assert r["patches"]["arena_bytes_before"] == r_off["arena_bytes"]


def test_run_with_patches_matches_tflm(tmp_path):
    model = tmp_path / "m.tflite"
    model.write_bytes(chain_model((1, 40, 36, 3), MOBILENET))
    x = np.random.default_rng(3).integers(-128, 128, (2, 1, 40, 36, 3), dtype=np.int8)
    np.save(tmp_path / "x.npy", x)
    p = _cli("run", model, "--input", "x.npy", "--output", "y.npy", "--patch", "auto",
             "--max-recompute", "100", "-o", tmp_path / "out", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), tflm_run(model, [x])[0])
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["patches"]["chosen"] is not None and report["ops"][0]["kind"] == "PATCH_STAGE"


def test_bad_patch_options_are_refused(tmp_path):
    model = tmp_path / "m.tflite"
    model.write_bytes(chain_model((1, 16, 16, 3), MOBILENET))
    p = _cli(model, "--patch", "always", cwd=tmp_path)
    assert p.returncode == 2 and "--patch" in p.stderr
    p = _cli(model, "--patch", "auto", "--max-recompute", "-5", cwd=tmp_path)
    assert p.returncode == 2 and "--max-recompute" in p.stderr
