"""Command line: parses arguments, calls the API, and turns an EerieError into one line on
stderr with exit status 2. Nothing else lives here."""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np
from pathlib import Path

from .version import __version__
from .errors import EerieError

EXAMPLES = """options for every command: -q (no progress), -v (progress and timing of every stage)

examples:
  eerie-c model.tflite -o build/kws                 compile for the host (model.c/.h/.mk, report.json)
  eerie-c run model.tflite --input x.npy --output y.npy
  eerie-c model.tflite --board mps2-an386 -o fw     firmware project: `make`, `make run` (QEMU)
  eerie-c run model.tflite --board mps2-an386 --input x.npy --output y.npy
                                                     run in QEMU; prints instructions, flash, RAM, stack
  eerie-c run model.tflite --board mps2-an386 --input x.npy -o fw
                                                     keep the project; report.md has the measurements
  eerie-c model.tflite --board mps2-an386 --report   a summary: memory, budgets, est. instructions
  eerie-c ops                                        list supported operators and dtypes
  eerie-c boards                                     list boards (CPU, flash, RAM, QEMU machine)
  eerie-c check model.py:Net --shape 1,3,32,32      can this PyTorch program be compiled?
                                                     (exit 0 yes / 1 problems listed / 2 not loaded)
  eerie-c validate model.tflite --inputs x.npz --board mps2-an386
                                                     compiled model vs TFLM / PyTorch on your data
                                                     (exit 0 within contract / 1 not / 2 bad input)
"""


OPS_EXAMPLES = """examples:
  eerie-c ops                      the operator x dtype matrix (yes = supported)
  eerie-c ops --markdown           the same as a Markdown table (the README's)
  eerie-c ops --vs-tflm            what TFLM registers that eerie-c has, lacks, or adds
  eerie-c ops | grep CONV          is a convolution kind supported, and for which dtypes?
"""

BOARDS_EXAMPLES = """examples:
  eerie-c boards                                          every board: CPU, flash, RAM, QEMU machine
  eerie-c model.tflite --board mps2-an386 -o fw           firmware project for one of them
  eerie-c model.tflite --board my_board.json -o fw        or for your own board file (docs/boards.md)
"""

CHECK_EXAMPLES = """examples:
  eerie-c check model.py:Net --shape 1,3,32,32     an nn.Module class built with no arguments
  eerie-c check model.py:make                      a function returning (module, example_args)
  eerie-c check model.py:Net --shape 1,8 --shape 1,4   two inputs
"""


def _compile_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="eerie-c", description="Compile a neural network into one standalone C file.",
                                epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="a .tflite model, or a .pt2 program saved by torch.export.save")
    p.add_argument("-o", "--out", default=None, help="output directory (default: ./NAME)")
    p.add_argument("--target", default=None,
                   help="code generation target: host, cortex-m, cortex-m0|m3|m4|m7|m33|m55, "
                        "riscv, riscv32imc|riscv32imac|riscv32imafc "
                        "(default: host, or the board's CPU with --board)")
    p.add_argument("--board", default=None,
                   help="also write a firmware project for this board (see `eerie-c boards`)")
    p.add_argument("--name", default=None, help="C name prefix (default: from the file name)")
    p.add_argument("--sources-only", action="store_true",
                   help="drop-in sources for an existing firmware: write only NAME.c, NAME.h, "
                        "NAME.mk, NAME.cmake and NAME_README.md (the exact compiler flags); no "
                        "reports, no harness, start-up or linker script")
    _budget_args(p)
    _loop_arg(p)
    _patch_args(p)
    p.add_argument("--report", action="store_true",
                   help="print a short summary of the report (memory, budgets, verification)")
    p.add_argument("--version", action="version", version=f"eerie-c {__version__}")
    return p


def _budget_args(p: argparse.ArgumentParser):
    p.add_argument("--arena-budget", default=None, metavar="BYTES",
                   help="fail if the activation arena needs more (e.g. 65536, 64k)")
    p.add_argument("--stack-budget", default=None, metavar="BYTES",
                   help="fail if the proven worst-case stack of NAME_invoke is larger")
    p.add_argument("--optimize", default="balanced", choices=("balanced", "speed", "size"),
                   help="what layers with a choice of kernel or weight format favour: fewer "
                        "instructions (speed), less flash (size) or the default trade-off "
                        "(balanced); report.md shows each layer's choice")


def _loop_arg(p: argparse.ArgumentParser):
    p.add_argument("--max-iterations", type=int, default=None, metavar="N",
                   help="most trips of a loop whose trip count is not proved at compile time "
                        "(TFLite WHILE: required then; .pt2: default 1000); a run that needs "
                        "more makes NAME_invoke return 1")


def _patch_args(p: argparse.ArgumentParser):
    from .patch import DEFAULT_PATCH, PATCH_MODES
    p.add_argument("--patch", choices=PATCH_MODES, default=DEFAULT_PATCH,
                   help="auto (default): run the first layers tile by tile (patch-based) when "
                        "that makes the arena smaller within --max-recompute; off: always "
                        "layer by layer")
    p.add_argument("--max-recompute", type=float, default=20.0, metavar="PCT",
                   help="with --patch auto: most growth of the model's estimated instructions "
                        "(per-tile kernel and recomputed halos), in percent; the halos' extra "
                        "MACs stay within it too (default 20)")
    p.add_argument("--input-rows", action="store_true",
                   help="the application pushes the input image in row bands (NAME_input_rows) "
                        "into a ring of rows, so the whole image never sits in RAM; not with "
                        "--patch off (NAME_invoke still takes a whole image)")


def _patching(a) -> dict:
    return {"patch": a.patch, "max_recompute": a.max_recompute, "input_mode": "rows" if a.input_rows else "whole"}


def _budgets(a) -> dict:
    from .budgets import parse_bytes
    return {"arena_budget": None if a.arena_budget is None else parse_bytes(a.arena_budget),
            "stack_budget": None if a.stack_budget is None else parse_bytes(a.stack_budget),
            "optimize": a.optimize}


def _run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="eerie-c run", description="Compile, build, run, and save the outputs.",
                                epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model")
    p.add_argument("--input", action="append", default=[], help=".npy input, once per model input in order")
    p.add_argument("--output", action="append", default=[], help=".npy output path, once per model output")
    p.add_argument("--target", default=None, help="default: host, or the board's CPU with --board")
    p.add_argument("--board", default=None, help="run on this board in QEMU (see `eerie-c boards`)")
    p.add_argument("--timeout", type=float, default=None, help="QEMU time limit in seconds")
    p.add_argument("--name", default=None)
    p.add_argument("-o", "--out", default=None,
                   help="keep the build directory here, with report.json, report.md (measurements "
                        "included) and memory.svg/.png")
    _budget_args(p)
    _loop_arg(p)
    _patch_args(p)
    return p


def _load_npy(path: str) -> np.ndarray:
    from .validation_inputs import load_array_file
    return load_array_file(path, ".npy")


def cmd_compile(argv):
    from .api import compile_model
    from .names import model_name
    a = _compile_parser().parse_args(argv)
    name = model_name(a.model, a.name, a.board)   # also the default output directory
    out = a.out or name
    if a.sources_only:
        return _sources_only(a, name, out)
    res = compile_model(a.model, out, target=a.target, name=name, board=a.board,
                        max_iterations=a.max_iterations, **_budgets(a), **_patching(a))
    r = res.report
    if a.board:
        print(f"eerie-c: wrote firmware project {out}/ for {r['board']} ({r['target']}): "
              f"`make -C {out}` builds {res.name}.elf, `make -C {out} run` runs it in QEMU")
    print(f"eerie-c: wrote {out}/{res.name}.c, .h, .mk, .cmake, report.json, report.md, memory.svg/.png "
          f"(arena {r['arena_bytes']} B, constants {r['constant_bytes']} B, "
          f"stack bound {r['stack_bound_bytes']} B, {r['macs']} MACs)" + _advice(r))
    if a.report:
        from .report import summary_text
        print(summary_text(r))


def _sources_only(a, name: str, out: str):
    """`--sources-only`: the model's own files and a README with the flags, nothing else."""
    from .api import compile_model
    from .output import write_files
    if a.board:
        raise EerieError("--sources-only writes the model's sources for your own firmware; "
                         "--board writes a whole firmware project: use one of them")
    res = compile_model(a.model, None, target=a.target, name=name,
                        max_iterations=a.max_iterations, **_budgets(a), **_patching(a))
    files = {f: res.files[f] for f in (f"{name}.c", f"{name}.h", f"{name}.mk", f"{name}.cmake")}
    files[f"{name}_README.md"] = _drop_in_readme(res)
    write_files(Path(out), files)
    r = res.report
    print(f"eerie-c: wrote {out}/{name}.c, .h, .mk, .cmake and {name}_README.md for {r['target']} "
          f"(arena {r['arena_bytes']} B, constants {r['constant_bytes']} B, "
          f"stack bound {r['stack_bound_bytes']} B)" + _advice(r))


def _advice(r: dict) -> str:
    """The summary line's end with the generic --target cortex-m (report_text.target_advice)."""
    from .report_text import target_advice
    return f"; {target_advice(r)}" if target_advice(r) else ""


def _drop_in_readme(res) -> str:
    from .toolchain.targets import get_target
    n, N = res.name, res.name.upper()
    r = res.report
    flags = get_target(res.target).cflags
    abi = "`-march` / `-mabi`" if get_target(res.target).family == "riscv" else "`-mcpu` / `-mfloat-abi`"
    return f"""# {n}: drop-in sources from eerie-c

Compiled for `{res.target}` from `{r.get('model', '?')}`. Activation arena {r['arena_bytes']:,} B
(static, inside {n}.c), constants {r['constant_bytes']:,} B (flash), proven worst-case stack of
`{n}_invoke` {r['stack_bound_bytes']:,} B with exactly these flags:

    {flags}

Compile `{n}.c` with them (at least the same {abi} as the rest of your image).

Make:

    include path/to/{n}.mk
    SRCS   += $({N}_SRCS)
    CFLAGS += $({N}_INCLUDES)

CMake (the library target `{n}` carries the flags; its CPU and float-ABI flags reach whatever
links it):

    include(path/to/{n}.cmake)
    target_link_libraries(app PRIVATE {n})

Then `#include "{n}.h"` and call `{n}_invoke(...)` (see the header for the inputs and outputs).
"""


def cmd_run(argv):
    from .api import run_model
    a = _run_parser().parse_args(argv)
    if not a.input:
        raise EerieError("eerie-c run needs at least one --input")
    arrays = [_load_npy(p) for p in a.input]
    outputs, report = run_model(a.model, arrays, target=a.target, out_dir=a.out, name=a.name,
                                board=a.board, timeout=a.timeout, max_iterations=a.max_iterations,
                                **_budgets(a), **_patching(a))
    if a.output and len(a.output) != len(outputs):
        raise EerieError(f"the model has {len(outputs)} output(s) but {len(a.output)} --output paths were given")
    for k, o in enumerate(outputs):
        if a.output:
            np.save(a.output[k], o)
        print(f"output {k}: {np.array2string(o, threshold=64)}")
    keys = ("board", "arena_bytes", "flash_bytes", "ram_static_bytes", "instructions",
            "stack_bound_bytes", "invoke_stack_bytes", "stack_high_water_bytes",
            "firmware_stack_bound_bytes")
    print(json.dumps({k: report[k] for k in keys if k in report}))


def cmd_ops(argv):
    p = argparse.ArgumentParser(prog="eerie-c ops", description="Supported operators and dtypes.",
                                epilog=OPS_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--markdown", action="store_true", help="as a Markdown table (the README's)")
    p.add_argument("--vs-tflm", action="store_true",
                   help="compare with the operators and dtypes TensorFlow Lite Micro registers")
    a = p.parse_args(argv)
    if a.vs_tflm:
        from .tflm_ops import vs_tflm_text
        print(vs_tflm_text())
        return
    from .ops_table import ops_table
    print(ops_table(a.markdown))


def cmd_boards(argv):
    from .toolchain.boards import format_size, list_boards
    argparse.ArgumentParser(prog="eerie-c boards", description="List the boards eerie-c knows.",
                            epilog=BOARDS_EXAMPLES,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    rows = [("board", "cpu", "flash", "ram", "qemu machine")]
    for b in list_boards():
        flash = format_size(b.flash.size) + (f" + {format_size(b.rodata.size)} rodata" if b.rodata else "")
        ram = format_size(b.ram.size) + (f" + {format_size(b.ccm.size)} CCM" if b.ccm else "")
        machine = b.qemu_machine + ("" if b.qemu_system == "qemu-system-arm" else f" ({b.qemu_system})")
        rows.append((b.name, b.cpu, flash, ram, machine))
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


def cmd_check(argv) -> int:
    p = argparse.ArgumentParser(
        prog="eerie-c check", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Traceability report for a PyTorch program: every graph break, export failure and\n"
                    "op eerie-c cannot lower, with file:line and the rewrite that fixes it.",
        epilog=CHECK_EXAMPLES + "\nexit status:\n"
               "  0  the program exports in one graph and compiles (warnings allowed)\n"
               "  1  problems found: each is listed with its file:line and the rewrite\n"
               "  2  the program could not be loaded, so nothing was checked: no such file or\n"
               "     NAME, importing the file failed, no example inputs, or a usage error")
    p.add_argument("target", metavar="FILE.py:NAME",
                   help="NAME: an nn.Module class (built with no arguments) or a function returning "
                        "(module, example_args[, dynamic_shapes])")
    p.add_argument("--shape", action="append", default=[],
                   help="example input shape, e.g. 1,3,32,32 (once per input; random float32 values); "
                        "default: the class's or the file's `example_args`")
    p.add_argument("--max-iterations", type=int, default=None, help="loop bound (default 1000)")
    a = p.parse_args(argv)
    from .checker import check, load_target
    module, args, dyn = load_target(a.target, a.shape)
    res = check(module, args, dynamic_shapes=dyn, max_iterations=a.max_iterations,
                name=a.target.rsplit(":", 1)[1])
    print(res.text())
    return res.exit_code


def cmd_validate(argv) -> int:
    from .validation import cmd_validate as validate_command   # its own module (validation.py)
    return validate_command(argv)


COMMANDS = {"run": cmd_run, "ops": cmd_ops, "boards": cmd_boards, "check": cmd_check,
            "validate": cmd_validate}


def _verbosity(argv: list[str]) -> list[str]:
    """-q / -v anywhere on the line set the progress level (see progress.py)."""
    from .progress import set_level
    rest = []
    for a in argv:
        if a in ("-q", "--quiet"):
            set_level(0)
        elif a in ("-v", "--verbose"):
            set_level(2)
        else:
            rest.append(a)
    return rest


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _signals_interrupt() -> dict:
    """SIGTERM and SIGHUP (a killed job, a closed terminal) raise KeyboardInterrupt like
    Ctrl-C, so that an interrupted write puts the previous output back (output.py) instead
    of dying between two files. A signal the caller ignores (nohup) stays ignored. Returns
    the previous handlers."""
    import signal
    old = {}
    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        try:
            if sig is not None and signal.getsignal(sig) is not signal.SIG_IGN:
                old[sig] = signal.signal(sig, _interrupt)
        except ValueError:   # not the main thread: leave the handlers alone
            pass
    return old


def main(argv=None) -> int:
    import signal
    old = _signals_interrupt()
    try:
        return _main(argv)
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def _main(argv) -> int:
    argv = _verbosity(list(sys.argv[1:] if argv is None else argv))
    try:
        if argv and argv[0] in COMMANDS:
            return COMMANDS[argv[0]](argv[1:]) or 0
        cmd_compile(argv)
        return 0
    except EerieError as e:
        _say(f"eerie-c: error: {e}")
        return 2
    except KeyboardInterrupt:
        _say("eerie-c: interrupted")
        return 130
    except BrokenPipeError:   # `eerie-c ops | head`: the reader left, nothing to report
        sys.stdout = open(os.devnull, "w")
        return 0
    except OSError as e:   # unreadable input, unwritable output directory, disk full
        _say(f"eerie-c: error: {e}")
        return 2
    except Exception as e:   # a compiler bug, never the user's fault: one line, exit 3
        if os.environ.get("EERIE_C_DEBUG"):
            raise
        _say(f"eerie-c: internal error: {type(e).__name__}: {str(e)[:300]} (please report; "
             f"EERIE_C_DEBUG=1 shows the traceback)")
        return 3


def _say(msg: str):
    """One line on stderr, whatever bytes the message carries (file names, model names)."""
    line = " ".join(msg.split())
    line = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in line)   # no escape codes
    print(line.encode("utf-8", "backslashreplace").decode("utf-8"), file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
