#!/usr/bin/env python3
"""Validate an MLPerf Tiny model on the STM32 board: `eerie-c validate` with inputs from a .npz.

The keyword-spotting model (models/mlperf_tiny/kws_ref_model.tflite, int8) is compiled for
netduinoplus2 (STM32F405, Cortex-M4F), every input of the .npz runs in ONE QEMU boot of the
firmware, the same inputs run on TFLM's reference kernels, and the table compares them:

    eerie-c validate models/mlperf_tiny/kws_ref_model.tflite --board netduinoplus2 \\
        --inputs OUT/kws_inputs.npz -o OUT/validate

The .npz holds one array named after the model's input (`input_1`, [N, 1, 49, 10, 1] int8).
This script makes one of 50 inputs (smooth random spectrogram-like patches; replace them with
your own features); exit status 0 means every output bit-exact with TFLM.

    python examples/validate/mlperf_kws_stm32.py [--board netduinoplus2] [--out build/validate_kws]

Needs eerie-c with the tflite-micro package (`pip install 'eerie-c[validate]'`), plus
arm-none-eabi-gcc with newlib, make and qemu-system-arm.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "mlperf_tiny" / "kws_ref_model.tflite"


def make_inputs(path: Path, n: int = 50, seed: int = 0) -> Path:
    """n int8 [1, 49, 10, 1] inputs: a random walk along time, so neighbouring frames are
    alike (as in a spectrogram), clipped to int8."""
    rng = np.random.default_rng(seed)
    steps = rng.normal(0, 12, size=(n, 1, 49, 10, 1))
    x = np.clip(np.cumsum(steps, axis=2) + rng.normal(-20, 30, size=(n, 1, 1, 10, 1)), -128, 127)
    np.savez(path, input_1=x.astype(np.int8))
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--board", default="netduinoplus2")
    ap.add_argument("--out", default="build/validate_kws")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    inputs = make_inputs(out / "kws_inputs.npz")
    cmd = ["validate", str(MODEL), "--board", args.board, "--inputs", str(inputs), "-o", str(out / "validate")]
    print("$ eerie-c " + " ".join(cmd), flush=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "eerie_c.cli", *cmd], env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
