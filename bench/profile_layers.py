#!/usr/bin/env python3
"""Where each instruction goes: per layer of one model on one board, the instructions it
runs (QEMU -icount shift=0, SysTick; minstret
on the RISC-V boards), its MACs and instructions per MAC, beside its kernel's
innermost loop read from the disassembly (bench/inner_loops.py): instructions per iteration,
MACs per iteration and their ratio, the floor the rest of the layer's code adds to.

Builds the normal firmware project once with -g (same code; objdump -l --inlines then maps
NAME_invoke's instructions to the layer each was inlined from), then a copy whose model C
records the SysTick counter after every layer (EERIE_LAYER_BARRIER redefined) and prints the
differences. Each record costs a few dozen instructions of its own, so per-layer figures are
slightly high; the total of a normal build is what bench/compare_tflm.py reports.

    python bench/profile_layers.py kws_ref_model [--board mps2-an386] [--markdown]
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

PATCH = "off"   # --patch
OPTIMIZE = "balanced"   # --optimize
from eerie_c.toolchain.arch import arch_of  # noqa: E402
from eerie_c.toolchain.boards import get_board  # noqa: E402
from eerie_c.toolchain.firmware import INPUTS_FILE, build_firmware, pack_records  # noqa: E402
from eerie_c.toolchain.qemu import run_qemu  # noqa: E402
from eerie_c.toolchain.build import run_cmd  # noqa: E402

sys.path.insert(0, str(REPO / "bench"))
import inner_loops  # noqa: E402

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


def kernel_loops(out: Path, name: str, ops: list[dict], board=None) -> list[inner_loops.Loop | None]:
    """Per op, the innermost loop of its kernel (inner_loops.main_loop), from a -g build of
    the project in `out` (the code is the same as without -g). inner_loops reads Arm code
    only: on other boards (RISC-V) the loop columns stay empty."""
    if board is not None and board.family != "arm":
        return [None] * len(ops)
    var = f"{name.upper()}_CFLAGS"
    flags = re.search(rf"^{var} := (.*)$", (out / f"{name}.mk").read_text(), re.M).group(1)
    run_cmd(["make", "--no-print-directory", "-B", f"{var}={flags} -g", f"{name}.elf"], out, "-g build")
    insns = inner_loops.disassemble(out / f"{name}.elf")
    entry = f"{name}_invoke"
    lines = inner_loops.call_lines((out / f"{name}.c").read_text(), entry, [op["function"] for op in ops])
    return [inner_loops.main_loop(inner_loops.innermost_loops(
        inner_loops.layer_code(insns, entry, lines[op["function"]]))) for op in ops]


def measure(path: Path, board) -> tuple[list[dict], list[int], list]:
    """(report ops, instructions per layer, kernel inner loop per layer)."""
    with tempfile.TemporaryDirectory(prefix="eerie-prof-") as tmp:
        out = Path(tmp) / "fw"
        res = compile_model(path, out_dir=out, board=board.name, name="m", patch=PATCH,
                            optimize=OPTIMIZE)
        ops = res.report["ops"]
        loops = kernel_loops(out, "m", ops, board)
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
        elf = build_firmware(out, "m", arch=arch_of(board))
        run = run_qemu(board, elf, out)
        layers = [int(v) for v in re.findall(r"eerie: layer (\d+)", run.stdout)]
    return ops, layers, loops


COLUMNS = ["#", "kind", "input shapes", "instructions", "%", "MACs", "instr/MAC",
           "loop instr", "loop MACs", "loop instr/MAC", "loop in"]


def rows(ops, layers, loops) -> list[list[str]]:
    total = sum(layers)
    out = []
    for op, n_insn, lp in zip(ops, layers, loops):
        shapes = " + ".join("x".join(map(str, i["shape"])) for i in op["inputs"])
        macs = op["macs"]
        where = "" if lp is None else lp.insns[0].symbol.split(".")[0]
        out.append([str(op["index"]), op["kind"], shapes, f"{n_insn:,}", f"{100 * n_insn / total:.1f}",
                    f"{macs:,}" if macs else "", f"{n_insn / macs:.2f}" if macs else "",
                    "" if lp is None else str(lp.length), str(lp.macs) if macs and lp and lp.macs else "",
                    f"{lp.length / lp.macs:.2f}" if macs and lp and lp.macs else "",
                    "NAME_invoke (inlined)" if where.endswith("_invoke") else where])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--board", default="mps2-an386")
    ap.add_argument("--markdown", action="store_true", help="a Markdown table (for bench/results.md)")
    ap.add_argument("--patch", choices=("off", "auto"), default="off",
                    help="patch-based execution of the first layers (eerie-c --patch)")
    ap.add_argument("--optimize", choices=("balanced", "speed", "size"), default="balanced",
                    help="eerie-c --optimize")
    args = ap.parse_args(argv)
    global PATCH, OPTIMIZE
    PATCH, OPTIMIZE = args.patch, args.optimize
    path = Path(args.model) if args.model.endswith(".tflite") else REPO / "models" / "mlperf_tiny" / f"{args.model}.tflite"
    board = get_board(args.board)
    ops, layers, loops = measure(path, board)
    total, macs = sum(layers), sum(op["macs"] for op in ops)
    print(f"{path.stem} on {board.name}: {total:,} instructions in {len(layers)} layers, "
          f"{macs:,} MACs ({total / max(macs, 1):.2f} instructions per MAC)")
    table = rows(ops, layers, loops)
    if args.markdown:
        print("\n| " + " | ".join(COLUMNS) + " |")
        print("|" + "|".join("---:" if c not in ("kind", "input shapes", "loop in") else "---" for c in COLUMNS) + "|")
        for r in table:
            print("| " + " | ".join(r) + " |")
    else:
        widths = [max(len(c), *(len(r[k]) for r in table)) for k, c in enumerate(COLUMNS)]
        for r in [COLUMNS] + table:
            print("  ".join(v.rjust(w) if k not in (1, 2, 10) else v.ljust(w)
                            for k, (v, w) in enumerate(zip(r, widths))).rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
