#!/usr/bin/env python3
"""TFLM's signal-library FFTs compiled by eerie-c: instructions per transform in QEMU.

For each dtype (int16, int32, float32) and FFT length, builds a one-op model (SignalRfft of
one frame, or SignalIrfft of one spectrum), runs it on mps2-an386 (Cortex-M4F) and riscv-virt
(RV32IMAFC) with -icount shift=0, checks the outputs bit-exact against the tflite-micro
runtime, and prints instructions per transform (one frame per inference; the harness's
per-inference count is NAME_invoke alone).

    python3 bench/signal_fft_bench.py                     # 512 and 60 points, every dtype
    python3 bench/signal_fft_bench.py --lengths 256 --boards mps2-an386

Measurement only: nothing here asserts a speed.
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

from eerie_c.api import run_model  # noqa: E402
from eerie_c.kernels._kiss_fft import kiss_factors  # noqa: E402

DTYPES = ("int16", "int32", "float32")


def measure(op: str, dtype: str, length: int, board: str) -> int:
    from conftest import tflm_run
    from test_signal_irfft import irfft_model
    from test_signal_rfft import rfft_model, signals
    if op == "SignalRfft":
        model, shape = rfft_model([length], length, dtype), [length]
    else:
        model, shape = irfft_model([length + 2], [length], length, dtype), [length + 2]
    xs = [signals(5, shape, length, dtype)]
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "m.tflite"
        p.write_bytes(model)
        got, rep = run_model(p, xs, board=board)
    if not np.array_equal(got[0], tflm_run(model, xs)[0]):
        raise SystemExit(f"{op} {dtype} {length} on {board}: outputs differ from TFLM")
    return rep["instructions"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[512, 60])
    ap.add_argument("--boards", nargs="+", default=["mps2-an386", "riscv-virt"])
    a = ap.parse_args()
    head = ["op", "dtype", "fft_length", "radices"] + [f"{b} instructions" for b in a.boards]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for op in ("SignalRfft", "SignalIrfft"):
        for length in a.lengths:
            radices = "x".join(str(p) for p, _ in kiss_factors(length // 2))
            for dtype in DTYPES:
                cells = [f"{measure(op, dtype, length, b):,}" for b in a.boards]
                print(f"| {op} | {dtype} | {length} | {radices} | " + " | ".join(cells) + " |",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
