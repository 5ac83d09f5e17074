#!/usr/bin/env python3
"""Keyword spotting on an emulated Cortex-M board, end to end with eerie-c's Python API.

Compiles kws_dscnn.tflite (a small int8 DS-CNN, built by make_model.py) for a board, writes
the firmware project, report.md and memory.svg/.png (the arena plan) to build/kws/, runs a few
synthetic "MFCC" inputs in QEMU, checks the outputs against the tflite-micro runtime (when
installed: they must be bit-exact), and prints the top keyword per input and the
measurements (instructions per inference, flash, RAM, proven stack bound vs measured stack).

    python examples/kws/run.py [--board mps2-an386] [--out build/kws] [-n 6]

Needs eerie-c (pip install .), arm-none-eabi-gcc with newlib, make and qemu-system-arm
(.ci/setup installs them). `make -C build/kws run` runs the firmware again.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MODEL = HERE / "kws_dscnn.tflite"
try:
    import eerie_c  # noqa: F401
except ImportError:      # run from a source checkout without `pip install .`
    sys.path.insert(0, str(HERE.parents[1]))
from eerie_c.api import compile_model, run_model  # noqa: E402


def _model_module():
    """make_model.py's synthetic inputs and keyword list (it needs only numpy for these)."""
    spec = importlib.util.spec_from_file_location("kws_make_model", HERE / "make_model.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def tflm_outputs(x: np.ndarray) -> np.ndarray | None:
    """The tflite-micro runtime's outputs for each input, or None if it is not installed."""
    try:
        from tflite_micro.python.tflite_micro import runtime
    except ImportError:
        return None
    it = runtime.Interpreter.from_bytes(MODEL.read_bytes(), arena_size=200_000)
    outs = []
    for xi in x:
        it.set_input(xi, 0)
        it.invoke()
        outs.append(it.get_output(0).copy())
    return np.stack(outs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--board", default="mps2-an386", help="board to emulate (see `eerie-c boards`)")
    ap.add_argument("--out", default="build/kws", help="firmware project and reports go here")
    ap.add_argument("-n", type=int, default=6, help="number of synthetic inputs (1..12)")
    a = ap.parse_args(argv)
    mk = _model_module()
    out = Path(a.out)

    # 1. Compile: firmware project, report.json, report.md and memory.svg/.png in OUTDIR.
    res = compile_model(MODEL, out_dir=out, board=a.board)
    r = res.report
    print(f"compiled {MODEL.name} for {r['board']} ({r['target']}): {len(r['ops'])} layers, "
          f"{r['macs']:,} MACs, arena {r['arena_bytes']:,} B, constants {r['constant_bytes']:,} B")
    print(f"wrote the firmware project, report.md and memory.svg to {out}/")

    # 2. Synthetic "utterances" of n different keywords, quantized with the model's input
    #    scale and zero point (what the MFCC front end of a real device would produce).
    rng = np.random.default_rng(0)
    spoken = rng.choice(len(mk.KEYWORDS), size=max(1, min(a.n, len(mk.KEYWORDS))), replace=False)
    inp = r["inputs"][0]
    xf = mk.synthetic_mfcc(rng, spoken)
    x = np.clip(np.round(xf / inp["scale"] + inp["zero_point"]), -128, 127).astype(np.int8)

    # 3. Build the firmware and run every input in one QEMU boot (report.md, report.json and
    #    the memory picture in OUTDIR are rewritten with the measurements).
    (y,), measured = run_model(MODEL, [x], board=a.board, out_dir=out)
    out_spec = measured["outputs"][0]
    probs = (y.reshape(len(x), -1).astype(np.float64) - out_spec["zero_point"]) * out_spec["scale"]
    for k, (s, p) in enumerate(zip(spoken, probs)):
        top = int(np.argmax(p))
        mark = "" if top == s else "   (not the synthetic keyword)"
        print(f"input {k}: synthetic '{mk.KEYWORDS[s]}' -> top keyword '{mk.KEYWORDS[top]}' "
              f"(p = {p[top]:.2f}){mark}")

    # 4. The oracle: TFLM's reference kernels must give the same bytes.
    ref = tflm_outputs(x)
    if ref is None:
        print("tflite-micro is not installed: skipped the comparison with TFLM")
    else:
        same = [bool(np.array_equal(y[i], ref[i])) for i in range(len(x))]
        if not all(same):
            print(f"MISMATCH with TFLM on inputs {[i for i, s in enumerate(same) if not s]}")
            return 1
        print(f"bit-exact with TFLM (tflite-micro runtime) on {len(x)}/{len(x)} inputs")

    # 5. Measurements on the emulated board.
    print(f"instructions per inference: {measured['instructions']:,} "
          f"(QEMU instruction count on {measured['board']}, worst of {len(x)})")
    budget = measured.get("budget") or {}
    print(f"flash: {measured['flash_bytes']:,} B (firmware text + rodata; model constants "
          f"{measured['constant_bytes']:,} B) of the board's {budget.get('board_flash_bytes', 0):,} B")
    print(f"RAM: {measured['ram_static_bytes']:,} B firmware data + bss (arena {measured['arena_bytes']:,} B) "
          f"of the board's {budget.get('board_ram_bytes', 0):,} B")
    bound, used = measured["stack_bound_bytes"], measured["invoke_stack_bytes"]
    print(f"stack: proven bound {bound:,} B for {res.name}_invoke, measured {used:,} B in QEMU "
          f"(whole firmware high-water {measured['stack_high_water_bytes']:,} B)")
    if used > bound:
        print(f"STACK BOUND VIOLATED: {res.name}_invoke used {used - bound} B more than the proven bound")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
