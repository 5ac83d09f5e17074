"""`eerie-c validate` / `eerie_c.validate(...)`: does the compiled model behave like the
original, on the user's data? One compile, then every input through ONE build (the host) or
ONE QEMU boot (a board), the same inputs through the reference (validation_reference.py), and a
table per output (validation_metrics.py). Exit status: 0 every output within its contract, 1
not, 2 bad input (nothing written then)."""
from __future__ import annotations

import argparse
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import EerieError
from .validation_inputs import match_inputs, random_inputs, read_inputs, read_labels
from .validation_metrics import Contract, OutputStats, compare_output, is_single_classifier, \
    stats_markdown, stats_text
from .validation_reference import reference_name, require_reference, run_reference

DEFAULT_COUNT = 20

EXAMPLES = """examples:
  eerie-c validate model.tflite                           20 random inputs, host build vs TFLM
  eerie-c validate model.tflite --inputs data.npz --labels y.npy --board mps2-an386 -o val
  eerie-c validate model.pt2 --count 100                  vs the program run by PyTorch

inputs: a .npy (one input: [N, ...shape] or one inference), a .npz (arrays named after the
model's inputs, else one per input in order), or a directory of .npy files (one input; each
file one inference or a batch, in name order).

exit status: 0 every output within the contract (bit-exact for integer TFLite outputs; the
documented tolerance for float and PT2E int8), 1 outside it, 2 bad input or usage.
"""


@dataclass
class ValidationResult:
    model: str
    where: str                       # "host" or the board's name
    reference: str
    inputs: str                      # where the inputs came from
    count: int
    measured: str = ""               # a board's run: instructions, flash, RAM
    outputs: list[OutputStats] = field(default_factory=list)
    report: dict = field(default_factory=dict)   # the compile's report (with "validation")

    @property
    def ok(self) -> bool:
        return all(st.ok for st in self.outputs)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def heading(self) -> str:
        return (f"validation of {self.model} on {self.where}: {self.count} input(s) ({self.inputs}), "
                f"reference {self.reference}")

    def verdict(self) -> str:
        bad = [st for st in self.outputs if not st.ok]
        if not bad:
            return "PASS: every output within its contract"
        return "FAIL: " + "; ".join(f"output {st.index}: {st.compared - st.within} of {st.compared} "
                                    f"inputs outside {st.contract}" for st in bad)

    def text(self) -> str:
        board = f"{self.measured}\n" if self.measured else ""
        return f"{self.heading()}\n{board}{stats_text(self.outputs)}\n{self.verdict()}"

    def markdown(self) -> str:
        board = f"\n{self.measured}\n" if self.measured else ""
        return (f"## Validation\n\n{self.heading()}\n{board}{stats_markdown(self.outputs)}\n\n"
                f"{self.verdict()}\n")

    def to_json(self) -> dict:
        return {"model": self.model, "where": self.where, "reference": self.reference,
                "inputs": self.inputs, "count": self.count, "ok": self.ok, "measured": self.measured,
                "outputs": [st.to_json() for st in self.outputs]}


def validate(model, inputs=None, board=None, target: str | None = None, count: int | None = None,
             labels=None, out_dir=None, seed: int = 0, timeout: float | None = None,
             name: str | None = None, example_args=None, **compile_options) -> ValidationResult:
    """Compile `model`, run `inputs` through it (host, or `board` in one QEMU boot) and through
    the reference, and compare. `model`: a .tflite or .pt2 path, or an nn.Module (with
    example_args) / ExportedProgram, saved as a .pt2 first (the reference then runs that
    program). `inputs`: a file or directory path (see EXAMPLES), a list of arrays (one per
    model input, [N, ...shape]), a dict by input name, or None for `count` random inputs
    (default 20; with `inputs`, `count` takes the first N). `labels`: a .npy path or an array of N class indices. compile_options:
    arena_budget, stack_budget, max_iterations, patch, optimize, ... as for compile_model.
    With out_dir, the build, report.json (section "validation") and report.md stay there. Bad
    input raises EerieError before anything is written."""
    run = dict(inputs=inputs, board=board, target=target, count=count, labels=labels,
               out_dir=out_dir, seed=seed, timeout=timeout)
    if isinstance(model, (str, Path)):
        if example_args is not None:
            raise EerieError("example_args is only for nn.Module programs, not model files")
        return _validate_file(Path(model), str(model), name, run, compile_options)
    import torch
    from .frontend.torch.capture import export_program
    from .python_api import _name
    ep = export_program(model, example_args)
    name = _name(model, name, board)
    with tempfile.TemporaryDirectory(prefix="eerie-validate-pt2-") as d:
        path = Path(d) / f"{name}.pt2"
        torch.export.save(ep, str(path))
        return _validate_file(path, f"{type(model).__name__} (torch.export)", name, run, compile_options)


def _validate_file(path: Path, shown: str, name, run: dict, options: dict) -> ValidationResult:
    """validate() for a model file; `shown`: what the table calls the model."""
    from .pipeline import _load_and_compile, report_files
    from .output import write_files
    from .runner import run_compiled
    if not path.is_file():
        raise EerieError(f"{shown}: no such file")
    require_reference(path)
    given, source = _given(run["inputs"])
    opts = dict(options)
    res, brd = _load_and_compile(path, run["target"], name, run["board"], opts.pop("arena_budget", None),
                                 opts.pop("stack_budget", None), opts.pop("max_iterations", None), None, **opts)
    if getattr(res.graph, "dynamic_dims", None) is not None:
        raise EerieError(f"{shown}: validate does not support programs with dynamic sizes")
    specs = res.report["inputs"]
    if given is None:
        n = DEFAULT_COUNT if run["count"] is None else run["count"]
        arrays = random_inputs(specs, _float_ranges(res.graph), n, run["seed"])
        source = f"random, seed {run['seed']}"
    else:
        arrays = match_inputs(specs, given, source)
        if run["count"] is not None:   # the first N of them
            if not 1 <= run["count"] <= len(arrays[0]):
                raise EerieError(f"--count {run['count']}: {source} holds {len(arrays[0])} input(s)")
            arrays = [a[:run["count"]] for a in arrays]
            source += f", the first {run['count']}"
    n = len(arrays[0])
    label_arr = _labels(run["labels"], n)
    out_specs = res.report["outputs"]
    if label_arr is not None and not any(_classifier(s) for s in out_specs):
        raise EerieError("--labels: no output of the model is a classifier (one score vector per input)")
    refs = run_reference(path, arrays, len(out_specs))
    keep = run["out_dir"] is not None
    work = Path(run["out_dir"]).resolve() if keep else Path(tempfile.mkdtemp(prefix="eerie-validate-"))
    try:
        got = run_compiled(res, brd, arrays, work, run["timeout"])
        where = brd.name if brd is not None else "host" if res.target == "host" else \
            f"host (C generated for {res.target})"
        result = ValidationResult(shown, where, reference_name(path), source, n,
                                  measured=_measured(res.report, brd))
        for k, (spec, g, r) in enumerate(zip(out_specs, got, refs)):
            if g.shape != r.shape or g.dtype != r.dtype:
                raise EerieError(f"output {k}: the compiled model gives {g.dtype} {list(g.shape[1:])}, "
                                 f"the reference {r.dtype} {list(r.shape[1:])}")
            result.outputs.append(compare_output(k, spec, g, r, _contract(path, res.report, k, r),
                                                 label_arr if _classifier(spec) else None))
        res.report["validation"] = result.to_json()
        result.report = res.report
        if keep:
            files = report_files(res)
            files["report.md"] = files["report.md"].rstrip("\n") + "\n\n" + result.markdown()
            write_files(work, files)
        return result
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def _measured(report: dict, brd) -> str:
    """One line of the board run's measurements (all inputs ran in one boot)."""
    if brd is None:
        return ""
    per = report.get("instructions_per_inference") or []
    most = report.get("instructions")
    insns = f"{most:,} instructions per inference (most)" if most else "instructions not measured"
    if per:
        insns = f"{max(per):,} instructions per inference (most; least {min(per):,})"
    return (f"{brd.name}: one QEMU boot, {insns}, flash {report.get('flash_bytes', 0):,} B, "
            f"static RAM {report.get('ram_static_bytes', 0):,} B")


def _given(inputs):
    """(key, array) pairs and where they came from, or (None, None) for random inputs."""
    if inputs is None:
        return None, None
    if isinstance(inputs, (str, Path)):
        return read_inputs(inputs), str(inputs)
    if isinstance(inputs, dict):
        return [(str(k), np.asarray(v)) for k, v in inputs.items()], "the arrays given"
    if isinstance(inputs, np.ndarray):
        return [("", inputs)], "the array given"
    return [("", np.asarray(v)) for v in inputs], "the arrays given"


def _labels(labels, n: int):
    if labels is None:
        return None
    if isinstance(labels, (str, Path)):
        return read_labels(labels, n)
    a = np.asarray(labels)
    if a.shape != (n,) or not np.issubdtype(a.dtype, np.integer):
        raise EerieError(f"labels: {a.dtype} {list(a.shape)}; want {n} integer classes")
    return a.astype(np.int64)


def _classifier(spec: dict) -> bool:
    return is_single_classifier(np.empty((1, *spec["shape"]), np.uint8))


def _float_ranges(g) -> list:
    """Per model input: the float range its QUANTIZE can represent (a quantized program's float
    input; random values beyond it only test clamping), else None."""
    ranges = []
    for tid in g.inputs:
        q = next((op for op in g.consumers(tid) if op.kind == "QUANTIZE"), None)
        t = g.t(q.outputs[0]) if q is not None else None
        if g.t(tid).dtype == "float32" and t is not None and t.quant is not None and t.dtype == "int8":
            s, zp = float(t.scale), int(t.zero_point)
            ranges.append(((-128 - zp) * s, (127 - zp) * s))
        else:
            ranges.append(None)
    return ranges


def _contract(path: Path, report: dict, k: int, ref: np.ndarray) -> Contract:
    if not np.issubdtype(ref.dtype, np.floating):
        return Contract("exact")
    if path.suffix != ".pt2":
        return Contract("float")
    steps = (report.get("quantization") or {}).get("output_steps") or []
    step = steps[k] if k < len(steps) else 0.0
    return Contract("steps", step) if step else Contract("absolute")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="eerie-c validate", epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run the same inputs through the compiled model (host build, or one QEMU boot of a "
                    "board) and through the reference (TFLM for .tflite, PyTorch for .pt2); a table "
                    "of errors per output.")
    p.add_argument("model", help="a .tflite model or a .pt2 program")
    p.add_argument("--board", default=None, help="run on this board in QEMU (see `eerie-c boards`)")
    p.add_argument("--target", default=None, help="code generation target (default: host, or the board's CPU)")
    p.add_argument("--inputs", default=None, metavar="FILE.npz|FILE.npy|DIR",
                   help="the inputs (default: random ones of the right dtype and range)")
    p.add_argument("--count", type=int, default=None, metavar="N",
                   help=f"number of random inputs (default {DEFAULT_COUNT}); with --inputs, use the first N")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--labels", default=None, metavar="FILE.npy",
                   help="one integer class per input: accuracy of the compiled model and the reference")
    p.add_argument("-o", "--out", default=None,
                   help="keep the build here, with report.json (\"validation\") and report.md")
    p.add_argument("--timeout", type=float, default=None, help="QEMU time limit in seconds")
    p.add_argument("--name", default=None, help="C name prefix (default: from the file name)")
    p.add_argument("--patch", choices=("auto", "off"), default=None,
                   help="as for a compile (default: the compiler's)")
    p.add_argument("--optimize", choices=("balanced", "speed", "size"), default=None,
                   help="as for a compile (default: balanced)")
    p.add_argument("--max-iterations", type=int, default=None, metavar="N", help="as for a compile")
    return p


def cmd_validate(argv) -> int:
    a = _parser().parse_args(argv)
    opts = {k: v for k, v in (("patch", a.patch), ("optimize", a.optimize),
                               ("max_iterations", a.max_iterations)) if v is not None}
    res = validate(a.model, inputs=a.inputs, board=a.board, target=a.target, count=a.count,
                   labels=a.labels, out_dir=a.out, seed=a.seed, timeout=a.timeout, name=a.name, **opts)
    print(res.text())
    if a.out:
        print(f"eerie-c: wrote {a.out}/ (report.md and report.json have the validation)")
    return res.exit_code
