#!/usr/bin/env python3
"""Instructions per output of the int8 pooling kernels, measured in QEMU (-icount shift=0:
SysTick on the Cortex-M boards, minstret on riscv-virt), beside the compile-time estimate
(eerie_c/estimate.py). Each case is a one-layer model; the count is one NAME_invoke (a few
dozen instructions of call and barrier on top of the layer). Measurement only: nothing is
asserted.

    python bench/pool_bench.py [--boards mps2-an386,mps3-an547] [--cases max2,max3]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

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
    "avg2": ("AVERAGE_POOL_2D", [1, 96, 96, 8], (2, 2), (2, 2), "VALID", "NONE"),
    "avg3": ("AVERAGE_POOL_2D", [1, 96, 96, 8], (3, 3), (2, 2), "SAME", "NONE"),
}
BOARDS = ("mps2-an386", "mps3-an547", "riscv-virt")


def measure(case: str, board: str, work: Path) -> tuple[int, int, int | None]:
    """(instructions of one invoke, output elements, the estimate) of one case on one board."""
    kind, shape, filt, stride, padding, act = CASES[case]
    model = pool_model(kind, "int8", shape, filt, stride, padding, act, qin=(0.03, -100))
    path = work / f"{case}.tflite"
    path.write_bytes(model)
    _, rep = run_model(path, [random_inputs(shape, "int8", 1, seed=0)], board=board, patch="off")
    outs = sum(int(__import__("math").prod(t["shape"])) for t in rep["outputs"])
    return rep["instructions"], outs, rep.get("est_instructions")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--boards", default="mps2-an386,mps3-an547")
    ap.add_argument("--cases", default=",".join(CASES))
    a = ap.parse_args()
    print(f"| case | board | instructions | outputs | per output | estimated per output |")
    print("|---|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for board in a.boards.split(","):
            for case in a.cases.split(","):
                n, outs, est = measure(case, board, Path(tmp))
                est_s = f"{est / outs:.2f}" if est else "-"
                print(f"| {case} | {board} | {n:,} | {outs:,} | {n / outs:.2f} | {est_s} |", flush=True)


if __name__ == "__main__":
    main()
