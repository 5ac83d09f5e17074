"""The memory-plan picture drawn ahead by a child process (plan/picture.py start_drawing, which
a compile with an output directory starts before its verification) is byte-for-byte the one
drawn in process, is used only for the same plan and name, and a failed child falls back to
drawing in process."""
import json
import subprocess

from eerie_c.api import compile_graph
from eerie_c.frontend import load_model
from eerie_c.plan import picture


def _plan(models_dir, model="kws_ref_model"):
    g = load_model(models_dir / f"{model}.tflite", model, None)
    return compile_graph(g, model).report["memory_plan"]


def _files(paths):
    return {p.name: p.read_bytes() for p in paths}


def test_child_drawing_is_the_in_process_one(models_dir, tmp_path):
    mp = _plan(models_dir)
    direct = _files(picture._draw_files(mp, "kws", tmp_path / "direct", "memory"))
    picture.start_drawing(mp, "kws")
    job = picture._early
    early = _files(picture.draw_memory_plan(json.loads(json.dumps(mp)), "kws", tmp_path / "early"))
    assert list(early) == ["memory.svg", "memory.png"] and early == direct
    assert job.proc.returncode == 0 and not job.dir.exists() and picture._early is None


def test_other_plan_or_name_is_drawn_afresh(models_dir, tmp_path):
    mp = _plan(models_dir)
    picture.start_drawing(mp, "kws")
    job = picture._early
    other = _files(picture.draw_memory_plan(mp, "other", tmp_path / "o"))
    assert job.proc.returncode is not None and not job.dir.exists()
    assert other == _files(picture._draw_files(mp, "other", tmp_path / "d", "memory"))


def test_failed_child_falls_back(models_dir, tmp_path, monkeypatch):
    mp = _plan(models_dir)
    real = subprocess.Popen
    monkeypatch.setattr(subprocess, "Popen", lambda cmd, **kw: real(["false"], **kw))
    picture.start_drawing(mp, "kws")
    got = _files(picture.draw_memory_plan(mp, "kws", tmp_path / "f"))
    assert got == _files(picture._draw_files(mp, "kws", tmp_path / "d", "memory"))
