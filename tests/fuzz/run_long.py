#!/usr/bin/env python3
"""Deep fuzzing run of the TFLite frontend and compiler (the same properties as
tests/fuzz/test_fuzz_tflite.py, with many more examples).

    python tests/fuzz/run_long.py                      # 20x the CI example counts, a new seed
    python tests/fuzz/run_long.py --scale 200 -k kws   # 200x, only tests matching "kws"
    python tests/fuzz/run_long.py --scale 50 --seed 7  # seed 7's examples (again: same ones)
    python tests/fuzz/run_long.py --scale 50 -n 2      # spread over 2 processes (pytest-xdist)

--scale multiplies every test's max_examples (CI runs scale 1: a few thousand examples in
total); --hang-seconds is the per-example time limit after which an example counts as a hang.
--seed N draws the examples of seed N, different for every N; without it a random seed is
picked and printed, so every long run explores new examples and any run can be repeated
(CI, which runs pytest without FUZZ_SEED, draws the same derandomized examples every time).
Any failure is printed by hypothesis as a minimal falsifying example with a
@reproduce_failure line to paste into the test. Exit status is pytest's.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, default=20.0, help="multiplier on every test's example count")
    ap.add_argument("--seed", type=int, default=None,
                    help="the examples of this seed (default: a random seed, printed)")
    ap.add_argument("--hang-seconds", type=int, default=20, help="per-example time limit")
    ap.add_argument("-k", default=None, help="pytest -k expression to pick tests")
    ap.add_argument("-n", default=None, help="pytest-xdist worker count")
    a = ap.parse_args(argv)
    os.environ["FUZZ_SCALE"] = str(a.scale)
    os.environ["FUZZ_HANG_SECONDS"] = str(a.hang_seconds)
    if a.seed is None:
        a.seed = random.randrange(2 ** 32)
    os.environ["FUZZ_SEED"] = str(a.seed)
    print(f"run_long.py: FUZZ_SEED={a.seed} (repeat this run with --seed {a.seed})", flush=True)
    import pytest
    args = [str(HERE / "test_fuzz_tflite.py"), "-q", "-p", "no:cacheprovider", "--durations=0"]
    if a.k:
        args += ["-k", a.k]
    if a.n:
        args += ["-n", a.n]
    return pytest.main(args)


if __name__ == "__main__":
    sys.exit(main())
