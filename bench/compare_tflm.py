#!/usr/bin/env python3
"""eerie-c next to TFLM + CMSIS-NN on the MLPerf Tiny models, in QEMU.

For each model in models/mlperf_tiny and each board, compiles the
model, builds the firmware, runs a few random inputs in QEMU (-icount shift=0, SysTick), checks
the outputs bit-exact against the host TFLM runtime (the `tflite-micro` package), and prints:
instructions per inference, instructions per MAC, flash (text + rodata + data image of the
ELF, i.e. everything the firmware puts in flash), RAM (data + bss + measured stack
high-water; the arena is part of bss), arena, stack, compile command wall time; beside the TFLM +
CMSIS-NN figures with our/their ratios: measured on the same model by bench/tflm_baseline
(`--tflm measured`, the default once `python bench/tflm_baseline/build.py` has built it; see
docs/bench.md), else the constants typed in from issue 6 (`--tflm reference`); the table says
which. Then the host rows: the same
model compiled for the host (portable C, gcc -O2, loaded as a shared object with ctypes) and the
`tflite-micro` Python runtime's invoke(), timed side by side in this process on the same inputs
(microseconds per inference, ratio, bit-exact). Writes bench/results.md too.

    python bench/compare_tflm.py                  # mps2-an386 (Cortex-M4), all four models
    python bench/compare_tflm.py --all-boards     # + mps2-an500 (M7) and mps3-an547 (M55)
    python bench/compare_tflm.py --models kws_ref_model --boards mps2-an386 --no-write
    python bench/compare_tflm.py --no-host        # QEMU rows only
    python bench/compare_tflm.py --boards         # host rows only (no board)
    python bench/compare_tflm.py --tflm measured  # TFLM columns measured (bench/tflm_baseline)

Measurement only: nothing here asserts a speed.
"""
from __future__ import annotations

import argparse
import ctypes
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))   # tflm_baseline, compare_patches

from eerie_c import api  # noqa: E402
from eerie_c.pipeline import DEFAULT_PATCH  # noqa: E402

MODELS_DIR = REPO / "models" / "mlperf_tiny"
MODELS = ("kws_ref_model", "vww_96_int8", "pretrainedResnet_quant", "ad01_int8")
ALL_BOARDS = ("mps2-an386", "mps2-an500", "mps3-an547")


@dataclass(frozen=True)
class Ref:
    """TFLM + CMSIS-NN on the same model, as measured for issue 6 (its "Reference figures"
    table: tflite-micro 90b983c, CMSIS-NN 4ab83cc, arm-none-eabi-gcc 12.2, release Makefile,
    -mcpu=cortex-m4 -mfloat-abi=hard, QEMU mps2-an386 -icount shift=0; arena = smallest that
    works; stack by painting). These are the baseline we compare against, not our results.
    Re-measured on 2026-11-29 with the same pins (TFLM's own Makefile, cortex-m4+fp and
    cortex-m55, OPTIMIZED_KERNEL_DIR=cmsis_nn, release; a harness over eerie-c's start-up and
    SysTick, every output bit-exact with the host runtime): instructions within 0.15% of these
    on both boards (exactly equal for vww and ad01 on the M4). That harness builds TFLM, a
    program from outside the project, so it is not part of the repository."""
    macs: int
    instructions: int          # per inference on mps2-an386 (M7 within 1% of it per the issue)
    flash: int                 # model + TFLM + CMSIS-NN code
    arena: int
    stack: int
    m55_instructions: int      # mps3-an547, CMSIS-NN with MVE

    @property
    def ram(self) -> int:      # arena + stack (the issue gives no data/bss figure for TFLM)
        return self.arena + self.stack


REFERENCE = {   # issue 6, "Reference figures"
    "kws_ref_model": Ref(2_660_000, 7_696_440, 130_259, 22_824, 1_428, 1_812_125),
    "vww_96_int8": Ref(7_490_000, 24_101_960, 409_611, 100_712, 1_428, 6_558_344),
    "pretrainedResnet_quant": Ref(12_500_000, 29_862_920, 169_581, 55_000, 1_428, 4_911_688),
    "ad01_int8": Ref(260_000, 583_000, 303_517, 3_012, 932, 150_031),
}

@dataclass(frozen=True)
class Tflm:
    """The TFLM + CMSIS-NN figures one row is compared with, and where they come from."""
    instructions: int
    flash: int
    ram: int
    source: str                # "measured" (bench/tflm_baseline) or "reference" (issue 6)
    exact: bool = True         # measured: TFLM's own firmware outputs equal the host runtime's


# Boards the measured baseline has no build for, and the board whose figure they take (the
# M7 row took the M4 figure in issue 6 too: within 1% of it).
BASELINE_BOARD = {"mps2-an500": "mps2-an386"}


def tflm_reference(model: str, board: str) -> Tflm:
    ref = REFERENCE[model]
    insns = ref.m55_instructions if board == "mps3-an547" else ref.instructions
    return Tflm(insns, ref.flash, ref.ram, "reference")


def tflm_measured(model: str | Path, board: str, n_inputs: int, seed: int) -> Tflm:
    from tflm_baseline import measure   # bench/tflm_baseline
    path = model if isinstance(model, Path) else MODELS_DIR / f"{model}.tflite"
    m = measure(path, BASELINE_BOARD.get(board, board), n_inputs=n_inputs, seed=seed)
    return Tflm(m["instructions"], m["flash_bytes"], m["ram_bytes"], "measured", m["bit_exact"])


def tflm_mode(mode: str, boards: list[str]) -> str:
    """--tflm auto: measured when the baseline is built for every board asked, else reference."""
    if mode != "auto":
        return mode
    from tflm_baseline import is_built
    return "measured" if all(is_built(BASELINE_BOARD.get(b, b)) for b in boards) else "reference"


# Targets of issue 6 (ratios ours / TFLM's on mps2-an386).
TARGET_INSNS, TARGET_RAM, TARGET_FLASH = 0.7, 0.6, 0.8
# issue 15: wall time of `eerie-c MODEL --board mps2-an386 -o DIR`, every verification included
TARGET_COMPILE_S = {"kws_ref_model": 2.0, "vww_96_int8": 4.0}
COMPILE_REPEAT = 2   # compiles per model and board for the compile column (the fastest shown)


def tflm_outputs(path: Path, x: np.ndarray) -> np.ndarray:
    from tflite_micro.python.tflite_micro import runtime
    it = runtime.Interpreter.from_file(str(path), arena_size=512 * 1024)
    outs = []
    for rec in x:
        it.set_input(rec, 0)
        it.invoke()
        outs.append(np.array(it.get_output(0)))
    return np.stack(outs)


HOST_BENCH_C = """\
/* bench/compare_tflm.py: `repeat` inferences of the model on one input record, timed by the
 * caller around this one call (so no per-inference Python overhead on our side). */
#include "m.h"
int eerie_bench_host(const int8_t *in, int8_t *out, int repeat);
int eerie_bench_host(const int8_t *in, int8_t *out, int repeat)
{
    int k, rc = 0;
    for (k = 0; k < repeat; ++k) {
        rc |= m_invoke(in, out);
    }
    return rc;
}
"""


def bench_inputs(path: Path, n_inputs: int, seed: int) -> np.ndarray:
    """The random int8 input records the QEMU and host rows run (same seed, same records)."""
    from eerie_c.frontend import load_model
    g = load_model(path, "m")
    spec = g.t(g.inputs[0])
    if len(g.inputs) != 1 or spec.dtype != "int8":
        raise SystemExit(f"{path.stem}: bench expects one int8 input, got {len(g.inputs)} "
                         f"({spec.dtype})")
    rng = np.random.default_rng(seed)
    return rng.integers(-128, 128, size=(n_inputs, *spec.shape), dtype=np.int8)


def _repeats(one_call_s: float, min_seconds: float) -> int:
    return max(1, int(np.ceil(min_seconds / max(one_call_s, 1e-9))))


def measure_host(model: str, n_inputs: int, seed: int, repeat: int = 0,
                 min_seconds: float = 0.2, models_dir: Path | None = None) -> dict:
    """Host row: our C for the host target (gcc -O2, a shared object called through ctypes)
    and the tflite-micro Python runtime, both in this process on the same input records.
    `repeat` inferences per record on each side (0: enough for min_seconds per record and
    side, after one warm-up call). Times are wall-clock per inference, invoke() only on the
    TFLM side (set_input outside the timed loop); bit-exact compares every record's output."""
    from tflite_micro.python.tflite_micro import runtime

    from eerie_c.toolchain.build import build_host
    from eerie_c.toolchain.targets import get_target
    path = (models_dir or MODELS_DIR) / f"{model}.tflite"
    x = bench_inputs(path, n_inputs, seed)
    res = api.compile_model(path, target="host", name="m")
    outs = res.report["outputs"]
    if len(outs) != 1 or outs[0]["dtype"] != "int8":
        raise SystemExit(f"{model}: host rows expect one int8 output")
    out_shape, out_bytes = tuple(outs[0]["shape"]), outs[0]["bytes"]
    it = runtime.Interpreter.from_file(str(path), arena_size=512 * 1024)
    ours_s = tflm_s = 0.0
    n_ours = n_tflm = 0
    exact = True
    with tempfile.TemporaryDirectory(prefix="eerie-bench-host-") as tmp:
        work = Path(tmp)
        for f, content in res.files.items():
            if isinstance(content, str):
                (work / f).write_text(content)
            else:
                (work / f).write_bytes(content)
        (work / "bench_host.c").write_text(HOST_BENCH_C)
        target = get_target("host")
        lib_path = build_host(work, "m", target, ["bench_host.c"], exe="libeerie_bench.so",
                              extra_flags=["-fPIC", "-shared"])
        lib = ctypes.CDLL(str(lib_path))
        fn = lib.eerie_bench_host
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
        fn.restype = ctypes.c_int
        for rec in x:
            rec = np.ascontiguousarray(rec)
            out = np.zeros(out_bytes, np.int8)
            args = (rec.ctypes.data, out.ctypes.data)
            t0 = time.perf_counter()
            if fn(*args, 1) != 0:                       # warm-up, and the output to check
                raise SystemExit(f"{model}: the host build's invoke failed")
            n = repeat or _repeats(time.perf_counter() - t0, min_seconds)
            t0 = time.perf_counter()
            fn(*args, n)
            ours_s += time.perf_counter() - t0
            n_ours += n
            it.set_input(rec, 0)
            t0 = time.perf_counter()
            it.invoke()                                  # warm-up, and the reference output
            one = time.perf_counter() - t0
            ref = np.array(it.get_output(0))
            n = repeat or _repeats(one, min_seconds)
            t0 = time.perf_counter()
            for _ in range(n):
                it.invoke()
            tflm_s += time.perf_counter() - t0
            n_tflm += n
            exact &= bool(np.array_equal(out.reshape(ref.shape), ref)) and ref.shape == out_shape
    del lib
    ours_us, tflm_us = 1e6 * ours_s / n_ours, 1e6 * tflm_s / n_tflm
    return {"model": model, "ours_us": ours_us, "tflm_us": tflm_us, "ratio": ours_us / tflm_us,
            "repeat": (n_ours // len(x), n_tflm // len(x)), "exact": exact}


HOST_HEADER = ("| model | ours us/inference (C, -O2) | TFLM us/inference (tflite-micro Python "
               "runtime) | ratio | bit-exact |")


def host_compiler() -> str:
    """First line of the host C compiler's --version (what built the host rows)."""
    import subprocess

    from eerie_c.toolchain.targets import get_target
    cc = get_target("host").cc
    try:
        p = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30)
        return p.stdout.splitlines()[0].strip() if p.stdout else cc
    except OSError:
        return cc


def host_table(rows: list[dict]) -> str:
    out = ["Host (this machine, one process): our generated C for the host target (portable "
           f"kernels, {host_compiler()} -O2, a shared object called through ctypes) vs the "
           "tflite-micro Python runtime's invoke() on the same input records; wall-clock per "
           "inference, ratio = ours / TFLM.", "",
           HOST_HEADER, "|---|---:|---:|---:|---|"]
    for r in rows:
        out.append(f"| {r['model']} | {r['ours_us']:,.1f} | {r['tflm_us']:,.1f} | "
                   f"{r['ratio']:.2f}x | {'yes' if r['exact'] else 'NO'} |")
    return "\n".join(out) + "\n"


def command_compile_seconds(path: Path, board: str, repeat: int = COMPILE_REPEAT) -> float:
    """Wall time of the whole `eerie-c MODEL --board BOARD -o DIR` command, every verification
    included, each run in a fresh process (start-up and imports count, as for a user); the
    fastest of `repeat`, since other load on the machine only adds time. bench/compile_time.py
    breaks it down by stage."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("compile_time", Path(__file__).with_name("compile_time.py"))
    ct = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ct)
    with tempfile.TemporaryDirectory(prefix="eerie-bench-compile-") as tmp:
        return min(ct.compile_once(path.resolve(), board, Path(tmp) / f"o{k}", REPO)[0]
                   for k in range(repeat))


def measure(model: str, board: str, n_inputs: int, seed: int, patch: str = DEFAULT_PATCH,
            max_recompute: float = 20.0, optimize: str = "balanced", input_mode: str = "whole",
            time_compile: bool = False) -> dict:
    """One model on one board, compiled as `eerie-c MODEL --board BOARD` compiles it unless
    patch / max_recompute / optimize / input_mode say otherwise; time_compile: also the
    compile command's wall time (the results.md table)."""
    path = model if isinstance(model, Path) else MODELS_DIR / f"{model}.tflite"
    model = path.stem
    x = bench_inputs(path, n_inputs, seed)
    outs, rep = api.run_model(path, [x], board=board, patch=patch, max_recompute=max_recompute,
                             optimize=optimize, input_mode=input_mode)
    ref = tflm_outputs(path, x)
    exact = bool(np.array_equal(outs[0].reshape(ref.shape), ref))
    sizes = rep["elf_sizes"]
    model_sizes = rep.get("model_object_sizes", {})
    return {
        "model": model, "board": board, "target": rep["target"], "macs": rep["macs"],
        "instructions": rep["instructions"],
        "flash": sizes["text"] + sizes["data"],               # what the ELF puts in flash
        "model_flash": model_sizes.get("text", 0) + model_sizes.get("data", 0),
        "ram": sizes["data"] + sizes["bss"] + rep["stack_high_water_bytes"],
        "arena": rep["arena_bytes"], "stack": rep["stack_high_water_bytes"],
        "compile_s": command_compile_seconds(path, board) if time_compile else 0.0,
        "exact": exact, "patches": rep.get("patches", {}),
    }


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


def verdict(r: float, limit: float) -> str:
    return "ok" if r <= limit else "MISSED"


def tables(rows: list[dict]) -> str:
    """rows: measure() results, each with its TFLM figures under "tflm" (a Tflm)."""
    out = []
    sources = sorted({r["tflm"].source for r in rows})
    out.append("TFLM + CMSIS-NN columns: " + " and ".join(TFLM_SOURCE_TEXT[s] for s in sources) + ".")
    out.append("")
    out.append("| model | board | instructions | TFLM+CMSIS-NN | ratio | instr/MAC (TFLM) | "
               "flash B (model only) | TFLM flash | ratio | RAM B | TFLM RAM | ratio | arena B | "
               "stack B | compile s | bit-exact |")
    out.append("|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        t = r["tflm"]
        exact = "yes" if r["exact"] else "NO"
        if not t.exact:
            exact += " (TFLM firmware: NO)"
        out.append(
            f"| {r['model']} | {r['board']} | {r['instructions']:,} | {t.instructions:,} | "
            f"{ratio(r['instructions'], t.instructions)} | {r['instructions'] / r['macs']:.2f} "
            f"({t.instructions / r['macs']:.2f}) | {r['flash']:,} ({r['model_flash']:,}) | {t.flash:,} | "
            f"{ratio(r['flash'], t.flash)} | {r['ram']:,} | {t.ram:,} | {ratio(r['ram'], t.ram)} | "
            f"{r['arena']:,} | {r['stack']:,} | {r['compile_s']:.2f} | {exact} |")
    m4 = [r for r in rows if r["board"] == "mps2-an386"]
    if m4:
        out.append("")
        out.append("Targets of issue 6 on mps2-an386 (ours / TFLM + CMSIS-NN): instructions <= "
                   f"{TARGET_INSNS}x, RAM <= {TARGET_RAM}x, flash <= {TARGET_FLASH}x; of issue 15: "
                   "the whole compile command " + ", ".join(f"{m} <= {t:g} s" for m, t in TARGET_COMPILE_S.items())
                   + ".")
        out.append("")
        out.append("| model | instructions | RAM | flash | compile |")
        out.append("|---|---|---|---|---|")
        for r in m4:
            t = r["tflm"]
            ri, rr, rf = r["instructions"] / t.instructions, r["ram"] / t.ram, r["flash"] / t.flash
            out.append(f"| {r['model']} | {ri:.2f}x {verdict(ri, TARGET_INSNS)} | "
                       f"{rr:.2f}x {verdict(rr, TARGET_RAM)} | {rf:.2f}x {verdict(rf, TARGET_FLASH)} | "
                       f"{r['compile_s']:.2f} s{_compile_verdict(r)} |")
    return "\n".join(out) + "\n"


TFLM_SOURCE_TEXT = {
    "measured": "measured on the same model and inputs by bench/tflm_baseline (TFLM + CMSIS-NN "
                "built from its pins.toml with TFLM's Makefile, release build, in the same QEMU; "
                "RAM = data + bss with the arena at arena_used_bytes() + stack high-water)",
    "reference": "the reference figures typed in from issue 6 (bench/tflm_baseline is not built: "
                 "docs/bench.md; RAM = arena + stack)",
}


def _compile_verdict(r: dict) -> str:
    limit = TARGET_COMPILE_S.get(r["model"])
    return "" if limit is None else f" {verdict(r['compile_s'], limit)}"


NOTES = """
Columns: instructions per inference (worst of the inputs run; QEMU -icount shift=0, SysTick);
instr/MAC ours (TFLM's); flash = text + data of the whole firmware ELF (harness and start-up
included; in brackets the model object alone: code + weights); RAM = data + bss (arena, the
harness's input/output buffers and the runtime included) + measured stack high-water; TFLM RAM
measured: the same sum for TFLM's firmware (its arena counted at arena_used_bytes()); TFLM RAM
from the issue's constants: its tensor arena + stack (no data/bss given there, so this favours TFLM);
compile = wall time of the whole `eerie-c MODEL --board BOARD -o DIR` command (a fresh
process; every verification, the firmware stack bound and the picture included; fastest of
two; bench/compile_time.py gives the stages and the CPU time). Every row is compiled with the
defaults users get, `--patch auto` included (the planner's patch stage where it makes the arena
smaller: docs/patches.md; layer by layer against it in bench/patch_results.md). The M55 row compares with
TFLM's M55 (MVE) build; the M7 row with the M4 figure (issue 6: M7 within 1% of M4).
Bit-exact: outputs equal the host TFLM runtime's on the same random inputs.
"""


README_BEGIN, README_END = "<!-- bench:begin -->\n", "<!-- bench:end -->\n"


def sync_readme(text: str) -> None:
    """The README shows the latest tables: the generated part of bench/results.md, verbatim,
    between its bench markers (tests/test_readme.py checks they agree)."""
    readme = REPO / "README.md"
    old = readme.read_text()
    if README_BEGIN in old and README_END in old:
        before, rest = old.split(README_BEGIN, 1)
        after = rest.split(README_END, 1)[1]
        readme.write_text(before + README_BEGIN + text.rstrip("\n") + "\n" + README_END + after)


class TflmUnavailable(RuntimeError):
    """--tflm measured, and the baseline is not built or cannot run a model (one line)."""


def measure_rows(args, boards: list[str]) -> list[dict]:
    """Our QEMU rows, each with the TFLM figures it is compared with under "tflm"."""
    rows = []
    mode = tflm_mode(args.tflm, boards) if boards else "reference"
    if mode == "measured":   # say so before the slow part
        from tflm_baseline import BaselineNotBuilt, HarnessError, check_built
        try:
            for board in boards:
                check_built(BASELINE_BOARD.get(board, board))
        except (BaselineNotBuilt, HarnessError) as e:
            raise TflmUnavailable(str(e)) from None
    for board in boards:
        for model in args.models:
            r = measure(model, board, args.inputs, args.seed, optimize=args.optimize, time_compile=True)
            if mode == "measured":
                try:
                    r["tflm"] = tflm_measured(model, board, args.inputs, args.seed)
                except (BaselineNotBuilt, HarnessError) as e:
                    raise TflmUnavailable(f"{model} on {board}: {e}") from None
            else:
                r["tflm"] = tflm_reference(model, board)
            rows.append(r)
            print(f"{model} on {board}: {r['instructions']:,} instructions, "
                  f"{r['instructions'] / r['macs']:.2f}/MAC, exact={r['exact']}; TFLM ({mode}) "
                  f"{r['tflm'].instructions:,}", file=sys.stderr)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="*", default=list(MODELS), choices=MODELS)
    ap.add_argument("--boards", nargs="*", default=["mps2-an386"])
    ap.add_argument("--all-boards", action="store_true", help="mps2-an386, mps2-an500, mps3-an547")
    ap.add_argument("--inputs", type=int, default=2, help="random inputs per model (default 2)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-write", action="store_true", help="do not write bench/results.md")
    ap.add_argument("--tflm", choices=("auto", "measured", "reference"), default="auto",
                    help="the TFLM columns: measured by bench/tflm_baseline on the same model, or "
                         "issue 6's typed-in reference figures; auto (default): measured if built")
    ap.add_argument("--optimize", default="balanced", choices=("balanced", "speed", "size"),
                    help="compile with --optimize MODE (other than balanced: printed, not written)")
    ap.add_argument("--no-host", action="store_true",
                    help="skip the host rows (our C with gcc -O2 vs the tflite-micro Python runtime)")
    ap.add_argument("--host-repeat", type=int, default=0,
                    help="inferences per input record and side in the host rows (default: "
                         "enough for 0.2 s each)")
    ap.add_argument("--patch", choices=("off", "auto"), default="off",
                    help="auto: measure each model layer by layer and with patch-based execution "
                         "of its first layers, into bench/patch_results.md (results.md untouched)")
    ap.add_argument("--max-recompute", type=float, default=20.0, metavar="PCT")
    ap.add_argument("--rows-recompute", type=float, default=110.0, metavar="PCT",
                    help="with --patch auto: the larger bound of the row-band input rows (--input-rows)")
    ap.add_argument("--rows-only", action="store_true",
                    help="with --patch auto: measure only the row-band input section of bench/patch_results.md")
    ap.add_argument("--person-detect", action="store_true",
                    help="with --patch auto: also the MobileNet v1 0.25 person detector of issue 19")
    args = ap.parse_args(argv)
    boards = list(ALL_BOARDS) if args.all_boards else args.boards
    if args.patch == "auto":
        from compare_patches import patch_main   # bench/compare_patches.py
        return patch_main(args, boards)
    try:
        rows = measure_rows(args, boards)
    except TflmUnavailable as e:
        print(f"compare_tflm: {e}", file=sys.stderr)
        return 2
    host_rows = []
    if not args.no_host:
        for model in args.models:
            h = measure_host(model, args.inputs, args.seed, args.host_repeat)
            host_rows.append(h)
            print(f"{model} on the host: ours {h['ours_us']:,.1f} us, TFLM {h['tflm_us']:,.1f} us "
                  f"per inference, exact={h['exact']}", file=sys.stderr)
    text = (tables(rows) + NOTES) if rows else ""
    if host_rows:
        text += ("\n" if text else "") + host_table(host_rows)
    print(text)
    if not args.no_write and rows and args.optimize == "balanced":   # (host rows alone leave results.md as it is)
        md = REPO / "bench" / "results.md"
        head = "# eerie-c vs TFLM + CMSIS-NN (generated by bench/compare_tflm.py)\n\n"
        keep = ""
        if md.exists():   # keep the hand-written notes below the generated table
            old = md.read_text()
            marker = "\n<!-- notes -->\n"
            if marker in old:
                keep = marker + old.split(marker, 1)[1]
        md.write_text(head + text + keep)
        sync_readme(text)
    return 0 if all(r["exact"] for r in rows + host_rows) and all(r["tflm"].exact for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
