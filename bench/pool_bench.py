#!/usr/bin/env python3
"""Instructions per output of the int8 pooling kernels, measured in QEMU (-icount shift=0:
SysTick on the Cortex-M boards, minstret on riscv-virt), beside the compile-time estimate
(eerie_c/estimate.py). Each case is a one-layer model; the count is one NAME_invoke (a few
dozen instructions of call and barrier on top of the layer). Measurement only: nothing is
asserted. Before / after figures of issue 28's pool kernels: bench/pool_results.md.

    python bench/pool_bench.py [--boards mps2-an386,mps3-an547] [--cases max2,max3] [--fit]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "ops"))

from conftest import random_inputs  # noqa: E402
from test_pooling import pool_model  # noqa: E402

from eerie_c.runner import run_model  # noqa: E402

# name -> (kind, input shape, filter, stride, padding, activation)
CASES = {
    "max2": ("MAX_POOL_2D", [1, 96, 96, 8], (2, 2), (2, 2), "VALID", "NONE"),
    "max3": ("MAX_POOL_2D", [1, 96, 96, 8], (3, 3), (2, 2), "SAME", "NONE"),
    "max2-relu6-c20": ("MAX_POOL_2D", [1, 48, 48, 20], (2, 2), (2, 2), "VALID", "RELU6"),
    "max2-c3": ("MAX_POOL_2D", [1, 32, 32, 3], (2, 2), (2, 2), "VALID", "NONE"),
    "max3s1-relu-c16": ("MAX_POOL_2D", [1, 24, 24, 16], (3, 3), (1, 1), "SAME", "RELU"),
    "avg2": ("AVERAGE_POOL_2D", [1, 96, 96, 8], (2, 2), (2, 2), "VALID", "NONE"),
    "avg3": ("AVERAGE_POOL_2D", [1, 96, 96, 8], (3, 3), (2, 2), "SAME", "NONE"),
    "avg2-relu6-c20": ("AVERAGE_POOL_2D", [1, 48, 48, 20], (2, 2), (2, 2), "VALID", "RELU6"),
    "avg-global-c64": ("AVERAGE_POOL_2D", [1, 25, 5, 64], (25, 5), (1, 1), "VALID", "NONE"),
    "avg3s1-c16": ("AVERAGE_POOL_2D", [1, 24, 24, 16], (3, 3), (1, 1), "SAME", "RELU"),
}
BOARDS = ("mps2-an386", "mps3-an547", "riscv-virt")


def measure(case: str, board: str, work: Path) -> tuple[int, int, int | None, dict]:
    """(instructions of one invoke, output elements, the estimate, the kernel's vector loads
    and stores as report.json gives them) of one case on one board."""
    kind, shape, filt, stride, padding, act = CASES[case]
    model = pool_model(kind, "int8", shape, filt, stride, padding, act, qin=(0.03, -100))
    path = work / f"{case}.tflite"
    path.write_bytes(model)
    _, rep = run_model(path, [random_inputs(shape, "int8", 1, seed=0)], board=board, patch="off")
    outs = sum(int(__import__("math").prod(t["shape"])) for t in rep["outputs"])
    return rep["instructions"], outs, rep.get("est_instructions"), rep["ops"][0].get("pool") or {}


def fit(rows: list[tuple[int, dict]], fixed: int = 150) -> tuple[float, float]:
    """Per vector load and per vector store, least squares on relative errors (a negative
    coefficient is dropped to 0 and the other refitted): how estimate.py's POOL_COSTS were
    obtained."""
    a = np.array([[w["loads"], w["stores"]] for _, w in rows], float)
    b = np.array([n - fixed for n, _ in rows], float)
    wts = 1.0 / b
    coef = np.linalg.lstsq(a * wts[:, None], b * wts, rcond=None)[0]
    if coef.min() < 0:
        k = int(np.argmax(coef))
        coef = np.zeros(2)
        coef[k] = np.linalg.lstsq(a[:, [k]] * wts[:, None], b * wts, rcond=None)[0][0]
    return float(coef[0]), float(coef[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--boards", default="mps2-an386,mps3-an547")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--fit", action="store_true",
                    help="also fit per vector load / store per board and pool kind")
    a = ap.parse_args()
    print("| case | board | instructions | outputs | per output | estimated per output | "
          "vector loads | vector stores |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    fits = {}
    with tempfile.TemporaryDirectory() as tmp:
        for board in a.boards.split(","):
            for case in a.cases.split(","):
                n, outs, est, work = measure(case, board, Path(tmp))
                est_s = f"{est / outs:.2f}" if est else "-"
                print(f"| {case} | {board} | {n:,} | {outs:,} | {n / outs:.2f} | {est_s} | "
                      f"{work.get('loads', '-')} | {work.get('stores', '-')} |", flush=True)
                if work:
                    fits.setdefault((board, CASES[case][0]), []).append((n, work))
    if a.fit:
        for (board, kind), rows in fits.items():
            per_load, per_store = fit(rows)
            print(f"{board} {kind}: {per_load:.3f} per vector load, {per_store:.3f} per vector store "
                  f"({len(rows)} cases)")


if __name__ == "__main__":
    main()
