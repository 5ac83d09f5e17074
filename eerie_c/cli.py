"""Command line: parses arguments, calls the API, and turns an EerieError into one line on
stderr with exit status 2. Nothing else lives here."""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from . import __version__
from .errors import EerieError

EXAMPLES = """examples:
  eerie-c model.tflite -o build/kws                 compile for the host (model.c/.h/.mk, report.json)
  eerie-c run model.tflite --input x.npy --output y.npy
  eerie-c ops                                        list supported operators and dtypes
"""


def _compile_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="eerie-c", description="Compile a neural network into one standalone C file.",
                                epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="a .tflite model")
    p.add_argument("-o", "--out", default=None, help="output directory (default: ./NAME)")
    p.add_argument("--target", default="host", help="code generation target (default: host)")
    p.add_argument("--name", default=None, help="C name prefix (default: from the file name)")
    p.add_argument("--version", action="version", version=f"eerie-c {__version__}")
    return p


def _run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="eerie-c run", description="Compile, build, run, and save the outputs.",
                                epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model")
    p.add_argument("--input", action="append", default=[], help=".npy input, once per model input in order")
    p.add_argument("--output", action="append", default=[], help=".npy output path, once per model output")
    p.add_argument("--target", default="host")
    p.add_argument("--name", default=None)
    p.add_argument("-o", "--out", default=None, help="keep the build directory here")
    return p


def _load_npy(path: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise EerieError(f"{path}: no such file") from None
    except Exception as e:
        raise EerieError(f"{path}: not a valid .npy file ({e})") from None


def cmd_compile(argv):
    from .api import compile_model, default_name
    a = _compile_parser().parse_args(argv)
    out = a.out or (a.name or default_name(a.model))
    res = compile_model(a.model, out, target=a.target, name=a.name)
    r = res.report
    print(f"eerie-c: wrote {out}/{res.name}.c, .h, .mk, report.json "
          f"(arena {r['arena_bytes']} B, constants {r['flash_bytes']} B, {r['macs']} MACs)")


def cmd_run(argv):
    from .api import run_model
    a = _run_parser().parse_args(argv)
    if not a.input:
        raise EerieError("eerie-c run needs at least one --input")
    arrays = [_load_npy(p) for p in a.input]
    outputs, report = run_model(a.model, arrays, target=a.target, out_dir=a.out, name=a.name)
    if a.output and len(a.output) != len(outputs):
        raise EerieError(f"the model has {len(outputs)} output(s) but {len(a.output)} --output paths were given")
    for k, o in enumerate(outputs):
        if a.output:
            np.save(a.output[k], o)
        print(f"output {k}: {np.array2string(o, threshold=64)}")
    keys = ("arena_bytes", "flash_bytes", "instructions", "stack_high_water_bytes")
    print(json.dumps({k: report[k] for k in keys if k in report}))


def cmd_ops(argv):
    from .kernels import load_all
    reg = load_all()
    dtypes = sorted({d for k in reg.values() for d in k.dtypes})
    print("op".ljust(28) + " ".join(d.ljust(8) for d in dtypes))
    for kind in sorted(reg):
        print(kind.ljust(28) + " ".join(("yes" if d in reg[kind].dtypes else "-").ljust(8) for d in dtypes))


COMMANDS = {"run": cmd_run, "ops": cmd_ops}


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] in COMMANDS:
            COMMANDS[argv[0]](argv[1:])
        else:
            cmd_compile(argv)
        return 0
    except EerieError as e:
        _say(f"eerie-c: error: {e}")
        return 2
    except KeyboardInterrupt:
        _say("eerie-c: interrupted")
        return 130
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
    print(line.encode("utf-8", "backslashreplace").decode("utf-8"), file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
