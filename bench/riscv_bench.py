#!/usr/bin/env python3
"""eerie-c on 32-bit RISC-V in QEMU: instructions per MAC of the int8 MLPerf Tiny models.

For each model in models/mlperf_tiny, compiles it for the riscv-virt board (RV32IMAFC; or
--target riscv32imac / riscv32imc / riscv on the same board), builds the firmware with
riscv64-unknown-elf-gcc + picolibc, runs a few random inputs in qemu-system-riscv32 (-icount
shift=0, the minstret CSR counts retired instructions), checks the outputs bit-exact against
TFLM (the `tflite-micro` package) and prints a table: MACs, instructions per inference and per
MAC, flash, static RAM, proven stack bounds beside the measured high-water marks. With --arm
the same model also runs on mps2-an386 (Cortex-M4, DSP kernels) for comparison.

    python3 bench/riscv_bench.py                        # the four int8 models on riscv-virt
    python3 bench/riscv_bench.py --models kws_ref_model --target riscv32imac --arm

Measurement only: nothing here asserts a speed. int8 CONV_2D and FULLY_CONNECTED use the RISC-V
GEMM kernels (eerie_c/kernels/_rv.py), DEPTHWISE_CONV_2D the RISC-V one (kernels/_rv_dw.py),
the other ops the portable C ones; bench/riscv_results.md
has the table with the figures before those kernels, and per-layer counts
(bench/profile_layers.py MODEL --board riscv-virt).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from eerie_c.api import compile_model, run_model  # noqa: E402

MODELS_DIR = REPO / "models" / "mlperf_tiny"
MODELS = ("kws_ref_model", "vww_96_int8", "pretrainedResnet_quant", "ad01_int8")


def measure(model: str, board: str, target: str | None, n: int) -> dict:
    from conftest import random_inputs, tflm_run
    path = MODELS_DIR / f"{model}.tflite"
    spec = compile_model(path).report["inputs"]
    xs = [random_inputs(s["shape"], s["dtype"], n, seed=7 + k) for k, s in enumerate(spec)]
    got, rep = run_model(path, xs, board=board, target=target)
    exact = all(np.array_equal(g, r) for g, r in zip(got, tflm_run(path, xs)))
    return {**rep, "exact": exact}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--board", default="riscv-virt")
    ap.add_argument("--target", default=None, help="default: the board's (riscv32imafc)")
    ap.add_argument("--inputs", type=int, default=2)
    ap.add_argument("--arm", action="store_true", help="also mps2-an386 (Cortex-M4) per model")
    a = ap.parse_args()
    head = ("| model | MACs | target | instructions | instr/MAC | flash B | static RAM B | "
            "stack bound / measured (invoke) | firmware stack bound / high-water | TFLM |")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    ok = True
    for m in a.models:
        runs = [(a.board, a.target)] + ([("mps2-an386", None)] if a.arm else [])
        for board, target in runs:
            r = measure(m, board, target, a.inputs)
            ok &= r["exact"]
            print(f"| {m} | {r['macs']:,} | {r['target']} | {r['instructions']:,} | "
                  f"{r['instructions'] / r['macs']:.2f} | {r['flash_bytes']:,} | {r['ram_static_bytes']:,} | "
                  f"{r['stack_bound_bytes']} / {r['invoke_stack_bytes']} | "
                  f"{r['firmware_stack_bound_bytes']} / {r['stack_high_water_bytes']} | "
                  f"{'bit-exact' if r['exact'] else 'DIFFERS'} |", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
