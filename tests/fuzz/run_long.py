#!/usr/bin/env python3
"""Deep fuzzing run of the TFLite frontend and compiler (the same properties as
tests/fuzz/test_fuzz_tflite.py, with many more examples).

    python tests/fuzz/run_long.py                      # 20x the CI example counts
    python tests/fuzz/run_long.py --scale 200 -k kws   # 200x, only tests matching "kws"
    python tests/fuzz/run_long.py --scale 50 --seed 7  # reproducible (derandomized) run
    python tests/fuzz/run_long.py --scale 50 -n 2      # spread over 2 processes (pytest-xdist)

--scale multiplies every test's max_examples (CI runs scale 1: a few thousand examples in
total); --hang-seconds is the per-example time limit after which an example counts as a hang.
Any failure is printed by hypothesis as a minimal falsifying example with a
@reproduce_failure line to paste into the test. Exit status is pytest's.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, default=20.0, help="multiplier on every test's example count")
    ap.add_argument("--seed", default=None, help="derandomize (same examples on every run)")
    ap.add_argument("--hang-seconds", type=int, default=20, help="per-example time limit")
    ap.add_argument("-k", default=None, help="pytest -k expression to pick tests")
    ap.add_argument("-n", default=None, help="pytest-xdist worker count")
    a = ap.parse_args(argv)
    os.environ["FUZZ_SCALE"] = str(a.scale)
    os.environ["FUZZ_HANG_SECONDS"] = str(a.hang_seconds)
    if a.seed is not None:
        os.environ["FUZZ_SEED"] = str(a.seed)
    import pytest
    args = [str(HERE / "test_fuzz_tflite.py"), "-q", "-p", "no:cacheprovider", "--durations=0"]
    if a.seed is not None:
        args += ["-p", "no:randomly", f"--hypothesis-seed={a.seed}"]
    if a.k:
        args += ["-k", a.k]
    if a.n:
        args += ["-n", a.n]
    return pytest.main(args)


if __name__ == "__main__":
    sys.exit(main())
