"""Progress and timing of the slow stages, on stderr.

Level 0 (-q) prints nothing; level 1 (the default) prints one line per finished stage when
stderr is a terminal; level 2 (-v) always prints them, plus details. Errors never depend on
this: they are always the CLI's single line.
"""
from __future__ import annotations

import sys
import time
from contextlib import contextmanager

LEVEL = 1


def set_level(level: int):
    global LEVEL
    LEVEL = level


def _enabled(detail: bool = False) -> bool:
    if LEVEL >= 2:
        return True
    if LEVEL == 1:
        return not detail and sys.stderr.isatty()
    return False


def note(msg: str, detail: bool = False):
    if _enabled(detail):
        print(f"eerie-c: {msg}", file=sys.stderr, flush=True)


@contextmanager
def stage(name: str):
    """Time a stage; report it when it finishes (a failing stage reports nothing)."""
    t0 = time.perf_counter()
    yield
    note(f"{name} ({time.perf_counter() - t0:.2f} s)")


class Bar:
    """A progress bar on stderr for a loop of `total` steps (the reference's inferences): one
    line redrawn in place on a terminal at level 1, the final count only at level 2 when
    stderr is not a terminal, nothing at level 0."""

    def __init__(self, total: int, label: str):
        self.total, self.label, self.done = total, label, 0
        self.t0 = time.perf_counter()
        self.live = LEVEL >= 1 and sys.stderr.isatty()

    def step(self, n: int = 1):
        self.done += n
        if self.live:
            width = 30
            full = width * self.done // max(self.total, 1)
            print(f"\reerie-c: {self.label} [{'#' * full}{'.' * (width - full)}] {self.done}/{self.total}",
                  end="", file=sys.stderr, flush=True)

    def close(self):
        if self.live:
            print(file=sys.stderr, flush=True)
        note(f"{self.label}: {self.done}/{self.total} ({time.perf_counter() - self.t0:.2f} s)",
             detail=self.live)
