#!/usr/bin/env python3
"""micro_speech end to end on an emulated Cortex-M board: raw 16-bit audio -> features ->
keyword, two eerie-c models in one firmware.

eerie-c compiles one model per C file, and every symbol of a model starts with its name, so
several models link into one image: the audio preprocessor (TFLM's signal-library front end)
and the keyword model are compiled each into its own directory, and firmware/main.c chains
them (49 preprocessor calls write the keyword model's input in place, then one keyword call).
The firmware runs the committed one-second clips in QEMU; the features and scores are checked
against the tflite-micro runtime (bit-exact), and the instructions per clip are printed.

    python examples/micro_speech/run.py [--board mps2-an386] [--out build/micro_speech]

Needs eerie-c, arm-none-eabi-gcc with newlib, make and qemu-system-arm (.ci/setup installs
them); the comparison needs the tflite-micro package.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
PRE = HERE / "models" / "audio_preprocessor_int8.tflite"
KWS = HERE / "models" / "micro_speech_quantized.tflite"
CLIPS = ["yes_1000ms.wav", "no_1000ms.wav"]
LABELS = ["silence", "unknown", "yes", "no"]
FRAME, STRIDE, FRAMES, FEATURES = 480, 320, 49, 40
try:
    import eerie_c  # noqa: F401
except ImportError:      # run from a source checkout without `pip install .`
    sys.path.insert(0, str(HERE.parents[1]))
from eerie_c.api import compile_model  # noqa: E402
from eerie_c.resources import resource_dir  # noqa: E402
from eerie_c.toolchain.arch import arch_of  # noqa: E402
from eerie_c.toolchain.boards import get_board  # noqa: E402
from eerie_c.toolchain.qemu import run_qemu  # noqa: E402


def read_clip(name: str) -> np.ndarray:
    with wave.open(str(HERE / "audio" / name)) as w:
        assert w.getframerate() == 16000 and w.getsampwidth() == 2 and w.getnchannels() == 1
        return np.frombuffer(w.readframes(w.getnframes()), np.int16)[:16000]


def tflm_reference(clip: np.ndarray):
    """Features and scores from the tflite-micro runtime (a fresh preprocessor per clip, as
    TFLM's micro_speech test makes one), or None without the package."""
    try:
        from tflite_micro.python.tflite_micro import runtime
    except ImportError:
        return None
    pre = runtime.Interpreter.from_bytes(PRE.read_bytes(), arena_size=100_000)
    feats = []
    for f in range(FRAMES):
        pre.set_input(clip[f * STRIDE:f * STRIDE + FRAME].reshape(1, FRAME), 0)
        pre.invoke()
        feats.append(pre.get_output(0).copy())
    kws = runtime.Interpreter.from_bytes(KWS.read_bytes(), arena_size=100_000)
    kws.set_input(np.concatenate(feats).reshape(1, -1), 0)
    kws.invoke()
    return np.concatenate(feats), kws.get_output(0).reshape(-1).copy()


def write_project(out: Path, board) -> None:
    """Both models' sources (compiled for the board's target), main.c, the Makefile, eerie-c's
    start-up and runtime and the board's linker script."""
    for model, name in ((PRE, "audio_preprocessor"), (KWS, "micro_speech")):
        res = compile_model(model, out_dir=out / name, target=board.target, name=name)
        r = res.report
        print(f"compiled {model.name} as {name}: {len(r['ops'])} ops, arena {r['arena_bytes']:,} B, "
              f"state {r['state_bytes']:,} B, constants {r['constant_bytes']:,} B, "
              f"stack bound {r['stack_bound_bytes']:,} B")
    for f in ("main.c", "Makefile"):
        shutil.copy(HERE / "firmware" / f, out / f)
    (out / "runtime").mkdir(exist_ok=True)
    for dst, src in arch_of(board).runtime.items():   # start-up, runtime and their headers
        if dst.endswith((".c", ".h")):
            shutil.copy(resource_dir("runtime_c") / src, out / "runtime" / dst)
    shutil.copy(board.linker_script, out / board.linker_script.name)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--board", default="mps2-an386", help="board to emulate (see `eerie-c boards`)")
    ap.add_argument("--out", default="build/micro_speech", help="the firmware project goes here")
    a = ap.parse_args(argv)
    board, out = get_board(a.board), Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    write_project(out, board)

    ipt = board.insns_per_tick
    make = ["make", "--no-print-directory", "-B", "micro_speech_app.elf", f"MACHINE={board.qemu_machine}",
            f"LDSCRIPT={board.linker_script.name}", f"STACK_BYTES={board.stack_bytes}",
            f"TICKS=-DEERIE_INSNS_PER_TICK_NUM={ipt.numerator}u -DEERIE_INSNS_PER_TICK_DEN={ipt.denominator}u"]
    p = subprocess.run(make, cwd=out, capture_output=True, text=True)
    if p.returncode:
        print(p.stdout + p.stderr)
        return 1
    clips = [read_clip(c) for c in CLIPS]
    (out / "inputs.bin").write_bytes(b"".join(c.tobytes() for c in clips))
    run = run_qemu(board, out / "micro_speech_app.elf", out)
    size = subprocess.run(["arm-none-eabi-size", "-B", "micro_speech_app.elf"], cwd=out,
                          capture_output=True, text=True).stdout.split("\n")[1].split()
    print(f"firmware for {board.name} ({board.cpu}): flash {int(size[0]):,} B, RAM {int(size[1]) + int(size[2]):,} B "
          f"(data + bss), stack high-water {run.values['stack_high_water_bytes']:,} B")

    raw = (out / "outputs.bin").read_bytes()
    per = FRAMES * FEATURES + len(LABELS)
    counts = [line.split() for line in run.stdout.splitlines() if line.startswith("eerie: clip ")]
    exact = 0
    for k, (name, clip) in enumerate(zip(CLIPS, clips)):
        rec = np.frombuffer(raw[k * per:(k + 1) * per], np.int8)
        feats, scores = rec[:-len(LABELS)], rec[-len(LABELS):]
        top = LABELS[int(np.argmax(scores))]
        front, kw = int(counts[k][4]), int(counts[k][6])
        print(f"clip {k}: {name} -> '{top}' (scores {scores.tolist()}); instructions: front end "
              f"{front:,} ({front // FRAMES:,} per 30 ms frame), keyword model {kw:,}")
        ref = tflm_reference(clip)
        if ref is not None:
            if not (np.array_equal(feats, ref[0]) and np.array_equal(scores, ref[1])):
                print(f"MISMATCH with TFLM on clip {k}")
                return 1
            exact += 1
    if exact:
        print(f"features and scores bit-exact with TFLM (tflite-micro runtime) on {exact}/{len(CLIPS)} clips")
    else:
        print("tflite-micro is not installed: skipped the comparison with TFLM")
    return 0


if __name__ == "__main__":
    sys.exit(main())
