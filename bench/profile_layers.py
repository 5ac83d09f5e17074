#!/usr/bin/env python3
"""Instructions per layer of one model on one board (QEMU -icount shift=0, SysTick; minstret
on the RISC-V boards).

Builds the normal firmware project, then a copy whose model C records the SysTick counter
after every layer (EERIE_LAYER_BARRIER redefined) and prints the differences. Each record
costs a few dozen instructions of its own, so per-layer figures are slightly high; the
total of a normal build is what bench/compare_tflm.py reports.

    python bench/profile_layers.py kws_ref_model [--board mps2-an386]
    python bench/profile_layers.py examples/tiny_conv.tflite --board microbit
    python bench/profile_layers.py kws_ref_model --board riscv-virt
"""
from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from eerie_c.api import compile_model  # noqa: E402
from eerie_c.toolchain.arch import arch_of  # noqa: E402
from eerie_c.toolchain.boards import get_board  # noqa: E402
from eerie_c.toolchain.firmware import INPUTS_FILE, build_firmware, pack_records  # noqa: E402
from eerie_c.toolchain.qemu import run_qemu  # noqa: E402

PROBE = """
#include "runtime/eerie_rt.h"
uint64_t eerie_layer_ticks[%(n)d];
unsigned eerie_layer_count;
#undef EERIE_LAYER_BARRIER
#define EERIE_LAYER_BARRIER() do { __asm__ __volatile__("" ::: "memory"); \\
    if (eerie_layer_count < %(n)du) { eerie_layer_ticks[eerie_layer_count++] = eerie_counter_ticks(); } } while (0)
"""

REPORT = """
    {
        extern uint64_t eerie_layer_ticks[];
        extern unsigned eerie_layer_count;
        unsigned i;
        for (i = 0; i < eerie_layer_count; ++i) {
            eerie_put_kv("layer", eerie_ticks_to_instructions(eerie_layer_ticks[i] - (i ? eerie_layer_ticks[i - 1] : start)));
        }
        eerie_layer_count = 0;
    }
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--board", default="mps2-an386")
    args = ap.parse_args(argv)
    path = Path(args.model) if args.model.endswith(".tflite") else REPO.parent / "shared" / "models" / f"{args.model}.tflite"
    board = get_board(args.board)
    with tempfile.TemporaryDirectory(prefix="eerie-prof-") as tmp:
        out = Path(tmp) / "fw"
        res = compile_model(path, out_dir=out, board=board.name, name="m")
        src = (out / "m.c").read_text()
        n = src.count("EERIE_LAYER_BARRIER();")
        marker = "/* ---- layers ---- */"
        src = src.replace(marker, PROBE % {"n": n} + marker)
        (out / "m.c").write_text(src)
        main_c = (out / "main.c").read_text()
        main_c = re.sub(r"(ticks = eerie_counter_ticks\(\) - start;)", r"\1" + REPORT.replace("\\", "\\\\"), main_c, count=1)
        (out / "main.c").write_text(main_c)
        spec = res.report["inputs"][0]
        rng = np.random.default_rng(0)
        if spec["dtype"].startswith("float"):   # float models (ad01_fp32, pretrainedResnet)
            x = rng.standard_normal((1, *spec["shape"])).astype(spec["dtype"])
        else:
            info = np.iinfo(spec["dtype"])
            x = rng.integers(info.min, info.max + 1, size=(1, *spec["shape"]), dtype=spec["dtype"])
        (out / INPUTS_FILE).write_bytes(pack_records([x]))
        elf = build_firmware(out, "m", arch_of(board))
        run = run_qemu(board, elf, out)
        layers = [int(v) for v in re.findall(r"eerie: layer (\d+)", run.stdout)]
    ops = res.report["ops"]
    total = sum(layers)
    print(f"{args.model} on {board.name}: {total:,} instructions in {len(layers)} layers")
    for op, n_insn in zip(ops, layers):
        per_mac = f"{n_insn / op['macs']:.2f}/MAC" if op["macs"] else ""
        shapes = " + ".join("x".join(map(str, i["shape"])) for i in op["inputs"])
        print(f"  {op['index']:3d} {op['kind']:<18} {shapes:<16} {n_insn:>11,} {100 * n_insn / total:5.1f}%  {per_mac}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
