"""Determinism (the same input gives byte-identical output directories, report.json included,
whatever the hash seed, working directory or output path) and atomicity (a compile that fails
at any stage leaves a previous output directory byte-identical, and leaves no temporary files)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tflite_builder import ACT, ModelBuilder  # noqa: E402

import eerie_c.api as api  # noqa: E402
import eerie_c.pipeline as pipeline  # noqa: E402
import eerie_c.output as output  # noqa: E402
from eerie_c.errors import EerieError  # noqa: E402


def snapshot(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def small_model(seed=0) -> bytes:
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    x = mb.input([1, 12], "int8", scale=0.05, zero_point=-3, name="x")
    w = mb.const(rng.integers(-127, 128, (8, 12)), "int8", scale=0.01, zero_point=0, name="w")
    b = mb.const(rng.integers(-500, 500, (8,)), "int32", scale=0.0005, zero_point=0, name="b")
    y = mb.tensor([1, 8], "int8", scale=0.1, zero_point=2, name="y")
    mb.op("FULLY_CONNECTED", [x, w, b], [y], "FullyConnectedOptions", fusedActivationFunction=ACT["RELU"])
    mb.output(y)
    return mb.build()


def eerie(*args, cwd=None, seed="0"):
    env = dict(os.environ, PYTHONHASHSEED=seed)
    return subprocess.run([sys.executable, "-m", "eerie_c.cli", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("model", ["ad01_int8", "kws_ref_model"])
def test_cli_output_is_byte_identical(models_dir, tmp_path, model):
    """Two processes with different hash seeds, working directories and output paths."""
    path = models_dir / f"{model}.tflite"
    (tmp_path / "w1").mkdir()
    (tmp_path / "w2" / "deeper").mkdir(parents=True)
    p1 = eerie(path, "-o", "out", "--name", "net", cwd=tmp_path / "w1", seed="1")
    p2 = eerie(path, "-o", tmp_path / "elsewhere" / "out", "--name", "net", cwd=tmp_path / "w2" / "deeper",
               seed="12345")
    assert p1.returncode == 0 and p2.returncode == 0, p1.stderr + p2.stderr
    a, b = snapshot(tmp_path / "w1" / "out"), snapshot(tmp_path / "elsewhere" / "out")
    assert {"net.c", "net.h", "net.mk", "report.json"} <= set(a)
    assert a == b
    assert str(tmp_path).encode() not in b"".join(a.values())   # no absolute paths leak


@pytest.mark.parametrize("board", ["mps2-an386", "riscv-virt"])
def test_firmware_project_is_byte_identical(models_dir, tmp_path, board):
    path = models_dir / "ad01_int8.tflite"
    api.compile_model(path, tmp_path / "a", name="ad", board=board)
    api.compile_model(path, tmp_path / "b", name="ad", board=board)
    a, b = snapshot(tmp_path / "a"), snapshot(tmp_path / "b")
    assert "main.c" in a and a == b


@pytest.fixture()
def previous(tmp_path):
    """An output directory from a successful compile, plus a file of the user's own."""
    m = tmp_path / "m.tflite"
    m.write_bytes(small_model())
    out = tmp_path / "out"
    api.compile_model(m, out, name="m")
    (out / "notes.txt").write_text("the user's own file")
    return m, out, snapshot(out)


def _no_temp_dirs(parent: Path):
    assert not [p for p in parent.iterdir() if p.name.startswith(".")]


def test_bad_model_leaves_previous_output(previous, tmp_path):
    m, out, before = previous
    m.write_bytes(small_model()[:-30])
    with pytest.raises(EerieError):
        api.compile_model(m, out, name="m")
    assert snapshot(out) == before
    _no_temp_dirs(tmp_path)


@pytest.mark.parametrize("stage", ["lower_graph", "plan_memory", "emit_model", "render"])
def test_injected_failure_leaves_previous_output(previous, tmp_path, monkeypatch, stage):
    m, out, before = previous
    m.write_bytes(small_model(seed=1))        # a different model: the files would change

    def boom(*a, **k):
        raise RuntimeError(f"injected failure in {stage}")
    # each stage as pipeline.py calls it (render: as emit/c.py does)
    target = pipeline if stage != "render" else __import__("eerie_c.emit.c", fromlist=["render"])
    monkeypatch.setattr(target, stage, boom)
    with pytest.raises(RuntimeError, match="injected"):
        api.compile_model(m, out, name="m")
    assert snapshot(out) == before
    _no_temp_dirs(tmp_path)


def test_failure_while_writing_leaves_previous_output(previous, tmp_path, monkeypatch):
    """Disk full on the third file: nothing of the new compile reaches the directory."""
    m, out, before = previous
    m.write_bytes(small_model(seed=2))
    real = Path.write_text
    calls = []

    def flaky(self, *a, **k):
        calls.append(self.name)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real(self, *a, **k)
    monkeypatch.setattr(Path, "write_text", flaky)
    with pytest.raises(OSError):
        api.compile_model(m, out, name="m")
    monkeypatch.undo()
    assert snapshot(out) == before
    _no_temp_dirs(tmp_path)


def test_cli_failed_compile_exit_code_and_untouched(previous, tmp_path):
    m, out, before = previous
    bad = tmp_path / "bad.tflite"
    data = bytearray(small_model(seed=3))
    data[len(data) // 2:len(data) // 2 + 8] = b"\xff" * 8
    bad.write_bytes(bytes(data))
    p = eerie(bad, "-o", out, "--name", "m")
    assert p.returncode in (0, 2) and "Traceback" not in p.stderr, p.stderr
    if p.returncode == 2:
        assert snapshot(out) == before
    _no_temp_dirs(tmp_path)


def test_interrupted_while_moving_files_into_place(previous, tmp_path, monkeypatch):
    """Ctrl-C after some new files already replaced old ones: the old ones come back."""
    m, out, before = previous
    m.write_bytes(small_model(seed=4))
    real = os.replace
    calls = []

    def interrupted(src, dst):
        calls.append(dst)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(src, dst)
    monkeypatch.setattr(output.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        api.compile_model(m, out, name="m")
    monkeypatch.undo()
    assert len(calls) >= 3
    assert snapshot(out) == before
    _no_temp_dirs(tmp_path)
    # And into a directory that did not exist: nothing is left behind.
    monkeypatch.setattr(output.os, "replace", interrupted)
    calls.clear()
    with pytest.raises(KeyboardInterrupt):
        api.compile_model(m, tmp_path / "fresh", name="m")
    monkeypatch.undo()
    assert not (tmp_path / "fresh").exists()
