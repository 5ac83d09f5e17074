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
    """(exported program, reference outputs, the int8 program's island sensitivity and its
    per-element jump allowance as callables, or None), or raise: the generator's fault."""
    import torch
    m = prog.module()
    x0 = torch.tensor(xs[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if prog.flavour == "float":
            with torch.no_grad():
                ref = np.stack([m(torch.tensor(x)).numpy() for x in xs])
            return torch.export.export(m, (x0,)), ref, None, None
        from pt2e import eager, island_sensitivity, jump_allowance, quantize
        from .torch_programs import QUANTIZER
        cm, ex = quantize(m, x0, QUANTIZER[prog.flavour], seed=prog.seed % 1000)
        ref = eager(cm, xs)
        return (torch.export.export(cm, (ex,)), ref, lambda: island_sensitivity(cm, xs),
                lambda: jump_allowance(cm, xs))


def _worst(got, ref, err, what) -> core.Outcome:
    i = tuple(int(j) for j in np.unravel_index(np.nanargmax(err), err.shape))
    return core.Outcome(core.MISMATCH, f"{what} at {list(i)}: got {got[i]:.7g} ref {ref[i]:.7g}",
                        float(np.nanmax(np.abs(got - ref))))


def compare_float(got, ref, rtol=1e-5) -> core.Outcome:
    """docs/pytorch.md: within 1e-5 of eager, relative to the output's magnitude (max |ref|:
    a layer norm's outputs near zero carry the rounding of its large inputs), NaN where eager
    has NaN, infinities equal."""
    got, ref = got.reshape(ref.shape).astype(np.float64), ref.astype(np.float64)
    if not np.array_equal(np.isnan(got), np.isnan(ref)):
        return _worst(got, ref, (np.isnan(got) != np.isnan(ref)).astype(float), "NaNs differ")
    finite = np.isfinite(ref)
    if not np.array_equal(got[~finite & ~np.isnan(ref)], ref[~finite & ~np.isnan(ref)]):
        return _worst(got, ref, (~finite & (got != ref)).astype(float), "infinities differ")
    g, r = np.where(finite, got, 0.0), np.where(finite, ref, 0.0)
    scale = float(np.abs(r).max(initial=0.0))
    err = np.abs(g - r)
    if err.max(initial=0.0) > rtol * scale + 1e-30:
        return _worst(g, r, err, f"off by {err.max():.3g} (> {rtol:g} x max|ref| {scale:.4g})")
    return core.Outcome(core.MATCH, f"max err {err.max(initial=0.0):.3g}", float(err.max(initial=0.0)))


def _within(err: np.ndarray) -> bool:
    """The tester's int8 bound on errors in steps: none past INT8_STEPS, and INT8_WITHIN_ONE
    of them within one step, though one element beyond it is allowed however small the output
    (one of 8 elements two steps off is 87.5% within one)."""
    from .torch_programs import INT8_STEPS, INT8_WITHIN_ONE
    if np.isnan(err).any() or err.max(initial=0.0) > INT8_STEPS + 1e-3:
        return False
    return int(np.sum(err > 1 + 1e-3)) <= max(1, int((1 - INT8_WITHIN_ONE) * err.size))


def compare_int8(got, ref, graph, sensitivity=None, jumps=None) -> core.Outcome:
    from pt2e import output_step
    step = output_step(graph)
    got, ref = got.reshape(ref.shape).astype(np.float64), ref.astype(np.float64)
    if not step:
        # A float island at the end: its inputs carry the int8 steps before it, so a step is
        # the larger of the output's range over 127 and the island's input step (a tanh at the
        # end turns one step of its input's rounding into up to one input step of output).
        # An island with a gain (a layer norm over a nearly constant row) makes a step of its
        # input many: its measured sensitivity to one step there is a step too.
        from pt2e import island_input_step
        step = max(float(np.abs(ref[np.isfinite(ref)]).max(initial=0.0)) / 127,
                   island_input_step(graph), sensitivity() if sensitivity else 0.0) or 1e-30
        what = "float-island output"
    else:
        what = "int8 output"
        if sensitivity is not None and not _within(np.abs(got - ref) / step):
            # A norm inside the program (pt2e.NORMS) multiplies the one-step roundings the
            # contract allows before it: a step is then also the output change one step at
            # its input makes in the converted program (measured only when needed: it runs
            # the program six more times).
            gain = sensitivity()
            if gain > step:
                step, what = gain, f"int8 output (island gain {gain / step:.1f} steps)"
    diff = np.abs(got - ref)
    if jumps is not None and not _within(diff / step):
        # A discontinuous op (pt2e.JUMPS: hardshrink) turns a one-step difference at its
        # input near its threshold into the jump: each element may differ by its own measured
        # allowance (0 far from every threshold) and is then held to the bound.
        allow = jumps()
        if allow is not None:
            diff = np.maximum(diff - allow.reshape(diff.shape), 0.0)
            what += " (beyond its jump allowance)"
    err = diff / step
    within = float(np.mean(err <= 1 + 1e-3))
    if np.isnan(got).any() or not _within(err):
        return _worst(got, ref, np.nan_to_num(err, nan=np.inf),
                      f"{what} off by {err.max():.2f} steps (step {step:.4g}; {within:.1%} "
                      f"within one)")
    how = what.replace("float-island output", "").replace("int8 output", "").strip()
    how = f" {how}" if how else ""
    return core.Outcome(core.MATCH, f"max {err.max():.2f} steps, {within:.1%} within one{how}",
                        float(np.abs(got - ref).max()))


def check(prog, target: str, workdir: Path, gain: bool = True) -> core.Outcome:
    """The program's outcome on `target`; gain=False compares int8 outputs without measuring
    the converted program's island gain (tests show a gain is what a program needed)."""
    import torch
    from eerie_c.errors import EerieError
    from eerie_c.frontend.torch import DEFAULT_MAX_ITERATIONS
    from eerie_c.pipeline import _load_and_compile
    from eerie_c.runner import _run_board, _run_host, load_inputs

    workdir.mkdir(parents=True, exist_ok=True)
    xs = prog.inputs()
    try:
        ep, ref, sensitivity, jumps = _reference(prog, xs)
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
    if prog.flavour == "float":
        return compare_float(got, ref)
    return compare_int8(got, ref, res.graph, sensitivity if gain else None, jumps if gain else None)


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
    (folder / "program.json").write_text(json.dumps({   # what campaign --reproduce loads
        "flavour": prog.flavour, "dom": prog.dom, "shape": list(prog.shape), "specs": prog.specs,
        "seed": prog.seed}, indent=1) + "\n")
    (folder / "README").write_text(f"python3 repro.py   # {prog.describe()}\n")
