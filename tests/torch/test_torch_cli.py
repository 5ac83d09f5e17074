"""Compiled torch programs get the same report files as TFLite ones (report.json, report.md,
memory.svg: the verified memory plan), and `--max-iterations N` bounds torch loops from the
command line (`eerie-c model.pt2` and `eerie-c run model.pt2`)."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

# CI installs torch (.ci/setup): without it this module errors at collection, never skips.
import torch  # noqa: E402

import eerie_c  # noqa: E402
from test_control_flow import Newton  # noqa: E402
from test_torch_models import SmallCNN, randomize_bn  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def cli(*args, cwd):
    """`python -m eerie_c.cli` on this checkout (not an older installed copy)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "eerie_c.cli", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def test_module_compile_writes_report_md_and_memory_svg(tmp_path):
    torch.manual_seed(0)
    res = eerie_c.compile(randomize_bn(SmallCNN()).eval(), (torch.randn(1, 3, 16, 16),), name="cnn",
                          out_dir=tmp_path)
    for f in ("cnn.c", "cnn.h", "report.json", "report.md", "memory.svg"):
        assert (tmp_path / f).is_file(), f
    md = (tmp_path / "report.md").read_text()
    assert str(res.report["arena_bytes"]) in md.replace(",", "")
    assert (tmp_path / "memory.svg").read_text().lstrip().startswith(("<svg", "<?xml"))
    # the arena plan of a torch program is proved like any other
    checks = {v["check"]: v for v in res.report["verified"]}
    assert {"arena_plan", "c_source", "stack_bound"} <= set(checks) and checks["arena_plan"]["ok"]


def test_dynamic_program_report_files(tmp_path):
    from test_dynamic import SeqModel
    Dim = torch.export.Dim
    eerie_c.compile(SeqModel().eval(), (torch.randn(2, 6, 5),), name="seqm", out_dir=tmp_path,
                    dynamic_shapes=({1: Dim("seq", min=3, max=12)},))
    assert (tmp_path / "report.md").is_file() and (tmp_path / "memory.svg").is_file()
    import json
    rep = json.loads((tmp_path / "report.json").read_text())
    assert rep["dynamic_sizes"]["parameters"][0]["name"] == "seq"


@pytest.fixture(scope="module")
def newton_pt2(tmp_path_factory):
    d = tmp_path_factory.mktemp("newton")
    torch.export.save(torch.export.export(Newton(), (torch.randn(4),)), str(d / "newton.pt2"))
    np.save(d / "big.npy", np.full(4, 100.0, np.float32))    # needs the 100-step limit of the loop
    return d


def test_cli_compile_max_iterations(newton_pt2):
    p = cli("newton.pt2", "-o", "out", "--max-iterations", "7", cwd=newton_pt2)
    assert p.returncode == 0, p.stderr
    assert "more than 7 iterations" in (newton_pt2 / "out" / "newton.c").read_text()


def test_cli_run_max_iterations(newton_pt2):
    p = cli("run", "newton.pt2", "--input", "big.npy", "--output", "n.npy", "--max-iterations", "50",
            cwd=newton_pt2)
    assert p.returncode == 2 and "failed to run" in p.stderr, p.stderr
    p = cli("run", "newton.pt2", "--input", "big.npy", "--output", "x.npy", "--output", "d.npy",
            "--output", "n.npy", "--max-iterations", "150", cwd=newton_pt2)
    assert p.returncode == 0, p.stderr
    assert float(np.load(newton_pt2 / "n.npy")) == 100.0
