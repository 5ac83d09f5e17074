"""The differential tester's common part: what a program is, what checking one yields, and the
shrinker that turns a failing program into a minimal one.

A frontend's generator module (tflite_programs.py, torch_programs.py) registers itself in
GENERATORS with the flavours it draws (e.g. "int8", "float") and a function
`generate(rng, flavour) -> Program`. Everything else (the campaign loop, the CI slice, the
shrinker, the reproducer folders) works on the Program protocol alone.
"""
from __future__ import annotations

import random
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Protocol

# What checking one program on one target can end in.
MATCH = "match"              # eerie-c's outputs equal the reference's under the contract
MISMATCH = "mismatch"        # compiled and ran, wrong answer: the worst defect
CRASH = "crash"              # eerie-c raised an internal error, the C did not build, or it crashed
REFUSED = "refused"          # eerie-c refused cleanly (CompileError: "unsupported ..."): a finding
INVALID = "invalid"          # the reference itself cannot run the program: the generator's fault
FAILURES = (MISMATCH, CRASH)


@dataclass
class Outcome:
    status: str
    detail: str = ""                  # one line: the worst element, the error message, ...
    max_abs_err: float | None = None

    @property
    def failed(self) -> bool:
        return self.status in FAILURES

    def same_kind(self, other: "Outcome") -> bool:
        """A shrink step keeps a candidate only when it fails the same way (a mismatch stays a
        mismatch; a crash keeps its first line), so the shrinker does not wander to another bug."""
        if self.status != other.status:
            return False
        if self.status == CRASH:
            return self.detail.split(":")[0] == other.detail.split(":")[0]
        return True


class Program(Protocol):
    frontend: str                     # "tflite" | "torch"
    flavour: str                      # e.g. "int8", "int16x8", "float", "pt2e-xnnpack", "pt2e-cortexm"

    def describe(self) -> str: ...
    """One line: the layers and shapes."""

    def size(self) -> int: ...
    """Layers plus a measure of the shapes; every shrink candidate is strictly smaller."""

    def check(self, target: str, workdir: Path) -> Outcome: ...
    """Compile with eerie-c for `target` ("host" or a board name), run it on the program's
    inputs, compare with the reference. Never raises: an exception is the caller's CRASH."""

    def shrink_candidates(self) -> Iterable["Program"]: ...
    """Smaller valid programs: one layer dropped, a dimension halved, ...; in the order to try."""

    def write_reproducer(self, folder: Path) -> None: ...
    """The program as a file (.tflite + inputs .npz, or Python source) with a README line saying
    how to run it, ready to become a regression test."""


Generate = Callable[[random.Random, str], Program]


@dataclass
class Frontend:
    name: str
    flavours: tuple[str, ...]
    generate: Generate
    # Optional: the Program a write_reproducer folder holds (campaign --reproduce DIR).
    load: Callable[[Path], Program] | None = None


GENERATORS: dict[str, Frontend] = {}
# The generator modules (in this package), by frontend; each registers itself when imported.
GENERATOR_MODULES = {"tflite": "tflite_programs", "torch": "torch_programs"}


def register(name: str, flavours: Iterable[str], generate: Generate,
             load: Callable[[Path], Program] | None = None) -> None:
    GENERATORS[name] = Frontend(name, tuple(flavours), generate, load)


def load_generators(frontends: Iterable[str] | None = None) -> dict[str, str]:
    """Import the generator modules of `frontends` (all by default). Returns {frontend: why}
    for those that could not be imported (a module not written yet, torch missing), so a
    campaign over "all" runs what it has and says what it left out."""
    import importlib
    missing = {}
    for fe in (frontends or GENERATOR_MODULES):
        if fe in GENERATORS:      # loaded already (or registered by a test)
            continue
        if fe not in GENERATOR_MODULES:
            raise ValueError(f"unknown frontend {fe!r} (known: {', '.join(GENERATOR_MODULES)})")
        try:
            importlib.import_module(f".{GENERATOR_MODULES[fe]}", __package__)
        except ImportError as e:
            missing[fe] = f"{type(e).__name__}: {e}"
    return missing


def case_seed(campaign_seed: int, index: int) -> int:
    """Case `index` of campaign `campaign_seed`: reproducible alone (--seed S --case I)."""
    return (campaign_seed * 1_000_003 + index * 7_919) % (2**31 - 1)


def safe_check(program: Program, target: str, workdir: Path) -> Outcome:
    try:
        return program.check(target, workdir)
    except Exception as e:   # a bug in eerie-c or the harness: report it, keep the campaign going
        tb = traceback.format_exc(limit=-3).strip().splitlines()
        return Outcome(CRASH, f"{type(e).__name__}: {e}".splitlines()[0][:300] + " | " + " / ".join(tb[-3:])[:300])


@dataclass
class ShrinkResult:
    program: Program
    outcome: Outcome
    steps: int = 0
    tried: int = 0
    log: list[str] = field(default_factory=list)


def shrink(program: Program, outcome: Outcome, target: str, workdir: Path,
           budget_s: float = 300.0) -> ShrinkResult:
    """Greedy delta debugging: take the first candidate that still fails the same way, start
    over from it; stop when no candidate fails or the time budget is spent."""
    best = ShrinkResult(program, outcome)
    deadline = time.monotonic() + budget_s
    progress = True
    while progress and time.monotonic() < deadline:
        progress = False
        for cand in best.program.shrink_candidates():
            if time.monotonic() >= deadline:
                break
            if cand.size() >= best.program.size():
                continue
            best.tried += 1
            got = safe_check(cand, target, workdir / f"shrink{best.tried}")
            if got.failed and got.same_kind(outcome):
                best.program, best.outcome = cand, got
                best.steps += 1
                best.log.append(cand.describe())
                progress = True
                break
    return best
