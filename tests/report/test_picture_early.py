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


def test_prepared_child_draws_the_plan_sent_later(models_dir, tmp_path):
    """prepare_drawing starts the child before the plan exists; start_drawing hands that
    same child the plan, and its drawing is the in-process one."""
    mp = _plan(models_dir)
    picture.prepare_drawing()
    job = picture._early
    assert job.key is None and job.proc.poll() is None   # waiting for its request
    picture.start_drawing(mp, "kws")
    assert picture._early is job   # no second child
    got = _files(picture.draw_memory_plan(mp, "kws", tmp_path / "p"))
    assert got == _files(picture._draw_files(mp, "kws", tmp_path / "d", "memory"))
    assert job.proc.returncode == 0 and not job.dir.exists()


def test_prepared_child_without_request_is_stopped(models_dir, tmp_path):
    mp = _plan(models_dir)
    picture.prepare_drawing()
    job = picture._early
    got = _files(picture.draw_memory_plan(mp, "kws", tmp_path / "n"))   # drawn in process
    assert job.proc.returncode is not None and not job.dir.exists() and picture._early is None
    assert got == _files(picture._draw_files(mp, "kws", tmp_path / "d", "memory"))
    picture.prepare_drawing()
    job = picture._early
    picture.cancel_drawing()
    assert job.proc.returncode is not None and not job.dir.exists() and picture._early is None


def test_failed_compile_leaves_no_child(tmp_path):
    from eerie_c.errors import EerieError
    from eerie_c.pipeline import compile_model
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"not a flatbuffer at all")
    try:
        compile_model(bad, tmp_path / "out")
    except EerieError:
        pass
    else:
        raise AssertionError("a malformed model compiled")
    assert picture._early is None
