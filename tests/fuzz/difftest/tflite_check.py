"""Check one TFLite program: the tflite-micro runtime is the reference; eerie-c compiles the
same .tflite for the host or a board and runs it. The compile and the run are separate steps
(pipeline._load_and_compile, then the runner's host / board run) so that a clean refusal at
compile time (an EerieError) is told apart from a build or run failure of accepted code."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from . import core
from .tflite_layers import Inconsistent


def compare(got: list[np.ndarray], ref: list[np.ndarray]) -> core.Outcome:
    """int outputs bit-exact, float outputs per conftest.assert_float_close."""
    from conftest import assert_float_close
    if len(got) != len(ref):
        return core.Outcome(core.MISMATCH, f"{len(got)} outputs, the reference has {len(ref)}")
    worst = 0.0
    for k, (g, r) in enumerate(zip(got, ref)):
        if g.shape != r.shape or g.dtype != r.dtype:
            return core.Outcome(core.MISMATCH, f"output {k}: {g.dtype}{list(g.shape)}, "
                                f"reference {r.dtype}{list(r.shape)}")
        if r.dtype.kind == "f":
            try:
                assert_float_close(g, r, what=f"output {k}")
            except AssertionError as e:
                err = float(np.nanmax(np.abs(g.astype(np.float64) - r)))
                return core.Outcome(core.MISMATCH, str(e).splitlines()[0][:400], err)
            worst = max(worst, float(np.nanmax(np.abs(g.astype(np.float64) - r), initial=0.0)))
        elif not np.array_equal(g, r):
            d = np.abs(g.astype(np.int64) - r.astype(np.int64))
            i = np.unravel_index(int(d.argmax()), d.shape)
            return core.Outcome(core.MISMATCH, f"output {k}: {int((d > 0).sum())} of {d.size} elements "
                                f"differ, worst at {list(map(int, i))}: got {g[i]} ref {r[i]}", float(d.max()))
    return core.Outcome(core.MATCH, "", worst)


def reference(program) -> tuple[list[np.ndarray] | None, str]:
    """TFLM's outputs, or None and why TFLM could not run the program."""
    from conftest import tflm_run
    if program._ref is None:
        try:
            model, inputs = program.built()
            program._ref = tflm_run(model, inputs)
        except Inconsistent as e:
            return None, f"spec does not build: {e}"
        except Exception as e:   # TFLM refused or failed: the generator made an invalid program
            return None, f"TFLM: {type(e).__name__}: {str(e).strip().splitlines()[-1][:300] if str(e).strip() else ''}"
    return program._ref, ""


def check_tflite(program, target: str, workdir: Path) -> core.Outcome:
    from eerie_c.errors import EerieError
    from eerie_c.pipeline import _load_and_compile
    from eerie_c.runner import _run_board, _run_host
    ref, why = reference(program)
    if ref is None:
        return core.Outcome(core.INVALID, why)
    model, inputs = program.built()
    workdir = Path(workdir)
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    path = workdir / "model.tflite"
    path.write_bytes(model)
    board = None if target == "host" else target
    try:
        spec = program.spec
        res, brd = _load_and_compile(path, None, "m", board, None, None, None, None,
                                     patch=spec.get("patch", "off"), optimize=spec.get("optimize", "balanced"))
    except EerieError as e:
        return core.Outcome(core.REFUSED, str(e).splitlines()[0][:300])
    run = workdir / "run"
    run.mkdir()
    try:
        got = _run_board(res, brd, inputs, run, None) if brd is not None else _run_host(res, inputs, run)
    except Exception as e:
        return core.Outcome(core.CRASH, f"run on {target}: {type(e).__name__}: "
                            f"{str(e).strip().splitlines()[0][:300] if str(e).strip() else ''}")
    return compare(got, ref)
