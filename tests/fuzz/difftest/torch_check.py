"""Checking one TorchProgram: the reference (eager float, or the converted PT2E program's own
eager output), eerie-c's compile (a clean EerieError is a refusal) and run (any failure is a
crash), and the comparison under docs/pytorch.md's contract. Also the reproducer writer."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

from . import core
from .torch_layers import Unfit


def _reference(prog, xs):
    """(exported program, example input, reference outputs), or raise: the generator's fault."""
    import torch
    m = prog.module()
    x0 = torch.tensor(xs[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if prog.flavour == "float":
            with torch.no_grad():
                ref = np.stack([m(torch.tensor(x)).numpy() for x in xs])
            return torch.export.export(m, (x0,)), ref
        from pt2e import eager, quantize
        from .torch_programs import QUANTIZER
        cm, ex = quantize(m, x0, QUANTIZER[prog.flavour], seed=prog.seed % 1000)
        ref = eager(cm, xs)
        return torch.export.export(cm, (ex,)), ref


def _compare_int8(got, ref, graph) -> core.Outcome:
    from pt2e import output_step
    from .torch_programs import INT8_STEPS, INT8_WITHIN_ONE
    step = output_step(graph)
    got, ref = got.reshape(ref.shape).astype(np.float64), ref.astype(np.float64)
    if not step:    # the output comes from a float island
        err = np.abs(got - ref)
        tol = 1e-5 * max(1.0, float(np.abs(ref).max()))
        if not err.max() <= tol:
            i = np.unravel_index(np.nanargmax(err), err.shape)
            return core.Outcome(core.MISMATCH, f"float output off by {err.max():.3g} at {list(i)}: "
                                f"got {got[i]:.6g} ref {ref[i]:.6g}", float(err.max()))
        return core.Outcome(core.MATCH, "", float(err.max()))
    err = np.abs(got - ref) / step
    within = float(np.mean(err <= 1 + 1e-3))
    if err.max() > INT8_STEPS + 1e-3 or within < INT8_WITHIN_ONE or np.isnan(got).any():
        i = np.unravel_index(np.nanargmax(err), err.shape)
        return core.Outcome(core.MISMATCH, f"int8 output off by {err.max():.2f} steps (step {step:.4g}) at "
                            f"{list(i)}: got {got[i]:.6g} ref {ref[i]:.6g}; {within:.1%} within one step",
                            float(np.abs(got - ref).max()))
    return core.Outcome(core.MATCH, f"max {err.max():.2f} steps, {within:.1%} within one",
                        float(np.abs(got - ref).max()))


def check(prog, target: str, workdir: Path) -> core.Outcome:
    import torch
    from conftest import assert_float_close
    from eerie_c.errors import EerieError
    from eerie_c.frontend.torch import DEFAULT_MAX_ITERATIONS
    from eerie_c.pipeline import _load_and_compile
    from eerie_c.runner import _run_board, _run_host, load_inputs

    workdir.mkdir(parents=True, exist_ok=True)
    xs = prog.inputs()
    try:
        ep, ref = _reference(prog, xs)
        torch.export.save(ep, str(workdir / "program.pt2"))
    except Unfit as e:
        return core.Outcome(core.INVALID, f"unfit: {e}")
    except Exception as e:
        return core.Outcome(core.INVALID, f"torch: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
                            if str(e) else f"torch: {type(e).__name__}")
    board = None if target == "host" else target
    try:
        res, brd = _load_and_compile(workdir / "program.pt2", None, "program", board, None, None,
                                     DEFAULT_MAX_ITERATIONS, None)
    except EerieError as e:
        return core.Outcome(core.REFUSED, str(e).splitlines()[0][:300])
    arrays, _ = load_inputs(res.report["inputs"], [xs])
    run_dir = workdir / "run"
    run_dir.mkdir(exist_ok=True)
    outs = _run_host(res, arrays, run_dir) if brd is None else _run_board(res, brd, arrays, run_dir, None)
    got = outs[0].reshape(ref.shape)
    if prog.flavour != "float":
        return _compare_int8(got, ref, res.graph)
    try:
        assert_float_close(got, ref, 1e-5)
    except AssertionError as e:
        err = np.abs(got.astype(np.float64) - ref)
        return core.Outcome(core.MISMATCH, str(e)[:400], float(np.nanmax(err)))
    return core.Outcome(core.MATCH, "", float(np.nanmax(np.abs(got.astype(np.float64) - ref))))


REPRO = '''"""Differential-tester reproducer: {describe}

Outcome on {target}: {status}: {detail}

The module (torch_specs.build of SPECS below):
{module}
Run: python3 {folder}/repro.py   (the inputs are inputs.npz beside this file)
"""
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(os.environ.get("EERIE_C_REPO", {repo!r}))
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "tests" / "fuzz")]
from difftest.torch_programs import TorchProgram  # noqa: E402

SPECS = {specs}
PROGRAM = TorchProgram(flavour={flavour!r}, dom={dom!r}, shape={shape!r}, specs=SPECS, seed={seed})

if __name__ == "__main__":
    assert np.array_equal(np.load(Path(__file__).with_name("inputs.npz"))["x"], PROGRAM.inputs())
    module = PROGRAM.module()
    print(module)
    print(PROGRAM.check({target!r}, Path(tempfile.mkdtemp(prefix="repro-"))))
'''


def write_reproducer(prog, folder: Path, target: str = "host", outcome=None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(folder / "inputs.npz", x=prog.inputs())
    try:
        module = str(prog.module())
    except Exception as e:   # still write the file: the spec is what matters
        module = f"(does not build: {e})"
    text = REPRO.format(describe=prog.describe(), target=target,
                        status=outcome.status if outcome else "see the campaign log",
                        detail=outcome.detail if outcome else "", module=module, folder=folder,
                        repo=str(Path(__file__).resolve().parents[3]),
                        specs=json.dumps(prog.specs, indent=1).replace("true", "True")
                        .replace("false", "False"),
                        flavour=prog.flavour, dom=prog.dom, shape=tuple(prog.shape), seed=prog.seed)
    (folder / "repro.py").write_text(text)
    (folder / "README").write_text(f"python3 repro.py   # {prog.describe()}\n")
