#!/usr/bin/env python3
"""TFLM + CMSIS-NN on .tflite models in QEMU, as a markdown table (the baseline's own command).

    python bench/tflm_baseline/measure.py                         # the MLPerf Tiny four, both boards
    python bench/tflm_baseline/measure.py my_model.tflite --boards mps2-an386 --inputs 4

Needs the library: python bench/tflm_baseline/build.py (docs/bench.md). Exit 1 if a
firmware's outputs differ from the host tflite-micro runtime's, 2 if a model cannot be run.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BENCH))

from tflm_baseline import BOARD_ARCH, BaselineNotBuilt, HarnessError, measure  # noqa: E402

MLPERF = ("kws_ref_model", "vww_96_int8", "pretrainedResnet_quant", "ad01_int8")
HEADER = ("| model | board | instructions | arena B | flash B | RAM B | stack B | bit-exact |\n"
          "|---|---|---:|---:|---:|---:|---:|---|")


def row(r: dict) -> str:
    return (f"| {r['model']} | {r['board']} | {r['instructions']:,} | {r['arena_bytes']:,} | "
            f"{r['flash_bytes']:,} | {r['ram_bytes']:,} | {r['stack_bytes']:,} | "
            f"{'yes' if r['bit_exact'] else 'NO'} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*", type=Path,
                    default=[BENCH.parent / "models" / "mlperf_tiny" / f"{m}.tflite" for m in MLPERF])
    ap.add_argument("--boards", nargs="+", default=list(BOARD_ARCH), choices=list(BOARD_ARCH))
    ap.add_argument("--inputs", type=int, default=2, help="random input records per model (default 2)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-cache", action="store_true", help="measure again even if a result is cached")
    args = ap.parse_args(argv)
    rows = []
    try:
        for board in args.boards:
            for model in args.models:
                if not model.is_file():
                    raise HarnessError(f"{model}: no such file")
                r = measure(model, board, n_inputs=args.inputs, seed=args.seed, cache=not args.no_cache)
                print(f"{r['model']} on {board}: {r['instructions']:,} instructions, "
                      f"bit-exact={r['bit_exact']}", file=sys.stderr)
                rows.append(r)
    except (BaselineNotBuilt, HarnessError) as e:
        print(f"tflm_baseline: {e}", file=sys.stderr)
        return 2
    print(HEADER)
    for r in rows:
        print(row(r))
    return 0 if all(r["bit_exact"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
