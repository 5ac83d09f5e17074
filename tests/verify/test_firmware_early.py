"""The firmware stack bound's other compiles, started beside the verification
(eerie_c/toolchain/firmware_early.py): used only when they built exactly the project the
compile makes, falling back to the usual `make stack` otherwise, and the bound is the one a
full `make stack` gives either way."""
from __future__ import annotations

import shutil

import pytest

from eerie_c.api import compile_model
from eerie_c.errors import CompilerBug
from eerie_c.toolchain import firmware_early
from eerie_c.toolchain.firmware import firmware_stack

pytestmark = pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None or shutil.which("make") is None,
                                reason="needs arm-none-eabi-gcc and make")


def _spy(monkeypatch):
    """Record each early job and what its project() answered."""
    seen = []
    real_project = firmware_early.EarlyFirmwareStack.project

    def project(self, files):
        got = real_project(self, files)
        seen.append((self, got))
        return got
    monkeypatch.setattr(firmware_early.EarlyFirmwareStack, "project", project)
    return seen


def _compile_and_check(models_dir, tmp_path):
    out = tmp_path / "fw"
    rep = compile_model(models_dir / "kws_ref_model.tflite", out, board="mps2-an386").report
    full = firmware_stack(out, rep["target"])   # every source compiled by make, here
    assert full["firmware_stack_bound_bytes"] == rep["firmware_stack_bound_bytes"]
    assert full["firmware_stack"] == rep["firmware_stack"]
    return rep


def test_early_build_is_used(models_dir, tmp_path, monkeypatch):
    seen = _spy(monkeypatch)
    _compile_and_check(models_dir, tmp_path)
    assert len(seen) == 1
    job, got = seen[0]
    assert got == job.dir and job.error is None
    assert f"{job.model}.c" in job.dry_run and "-fcallgraph-info=su" in job.dry_run
    assert not job.dir.exists()   # removed once the bound is made


def test_other_project_is_not_used(models_dir, tmp_path, monkeypatch):
    """An early build of files other than the final project's is ignored."""
    seen = _spy(monkeypatch)
    real_start = firmware_early.start

    def start(files, model):   # builds a main.c other than the one the compile writes
        return real_start(dict(files, **{"main.c": files["main.c"] + "\n/* edited */\n"}), model)
    monkeypatch.setattr(firmware_early, "start", start)
    _compile_and_check(models_dir, tmp_path)
    assert len(seen) == 1 and seen[0][1] is None


def test_failed_early_build_falls_back(models_dir, tmp_path, monkeypatch):
    seen = _spy(monkeypatch)

    def broken(cmd, cwd, what, timeout=600):
        raise CompilerBug(f"{what} failed (test)")
    monkeypatch.setattr(firmware_early, "run_cmd", broken)
    _compile_and_check(models_dir, tmp_path)
    assert len(seen) == 1 and seen[0][1] is None and isinstance(seen[0][0].error, CompilerBug)
