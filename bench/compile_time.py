#!/usr/bin/env python3
"""Wall time of `eerie-c MODEL --board BOARD -o DIR` (every verification included), with the
time of each stage the compiler reports under -v.

Each compile runs as its own process (interpreter start-up and imports count, as they do for
a user), several times; the table shows the fastest run of each model, since other load on
the machine only ever adds time. Stages overlap (the target compiler's build of the model and
the firmware stack bound's compiles of the harness and runtime run beside the C-source proof),
so they need not sum to the wall time; "other" is the wall time
outside every reported stage (start-up, imports, writing files). "cpu s" is the user + system
time of the compile's whole process tree (the least over the runs): what the compile costs a
loaded machine, where the wall time also depends on what else runs.

    python bench/compile_time.py                      # the four MLPerf Tiny models, mps2-an386
    python bench/compile_time.py --models kws_ref_model --repeat 5 --board mps3-an547
    python bench/compile_time.py --baseline /path/to/other/checkout   # before/after rows

With --baseline, the other checkout's compiles alternate with this one's, so both see the
same load.
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODELS_DIR = REPO / "models" / "mlperf_tiny"
MODELS = ["kws_ref_model", "vww_96_int8", "pretrainedResnet_quant", "ad01_int8"]
# stage label (the start of eerie-c's -v line) -> column
STAGES = [("frontend", "frontend"), ("passes and kernel lowering", "lower"),
          ("memory plan and its proof", "plan"), ("C emission", "emit"),
          ("verification", "verify"), ("firmware stack bound", "fw stack"),
          ("report.md and the memory-plan picture", "report+picture")]
_LINE = re.compile(r"^eerie-c: (.*) \((\d+\.\d+) s\)$")


def compile_once(model: Path, board: str, out: Path, repo: Path = REPO) -> tuple[float, dict[str, float]]:
    """One compile in a fresh process with eerie_c from `repo`: (wall s, {column: s}); the
    columns include "cpu": user + system time of the whole process tree (the target
    compiler's processes included), which the machine's other load changes little."""
    env = dict(os.environ, PYTHONPATH=str(repo) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "eerie_c.cli", str(model), "--board", board,
                        "-o", str(out), "-v"], capture_output=True, text=True, env=env,
                       cwd=out.parent)   # not this checkout: `python -m` puts the cwd first on sys.path
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)   # descendants reaped by now
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if p.returncode != 0:
        raise SystemExit(f"compile of {model.name} failed:\n{p.stderr}")
    stages: dict[str, float] = {}
    for line in p.stderr.splitlines():
        m = _LINE.match(line)
        if m:
            for label, col in STAGES:
                if m.group(1).startswith(label):
                    stages[col] = stages.get(col, 0.0) + float(m.group(2))
    stages["cpu"] = cpu
    return wall, stages


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=MODELS)
    ap.add_argument("--board", default="mps2-an386")
    ap.add_argument("--repeat", type=int, default=3, help="compiles per model (the fastest is shown)")
    ap.add_argument("--models-dir", type=Path, default=MODELS_DIR)
    ap.add_argument("--baseline", type=Path, help="another checkout of eerie-c to time alongside")
    args = ap.parse_args(argv)
    repos = [(args.baseline.resolve(), " (baseline)")] if args.baseline else []
    repos.append((REPO, ""))
    cols = [c for _, c in STAGES]
    print(f"Compile wall time on {args.board}, fastest of {args.repeat} (s; {os.cpu_count()} cores)\n")
    print("| model | wall s | cpu s | " + " | ".join(cols) + " | other |")
    print("|---|---:|---:|" + "---:|" * (len(cols) + 1))
    for name in args.models:
        path = (Path(name) if name.endswith((".tflite", ".pt2")) else args.models_dir / f"{name}.tflite").resolve()
        best: dict[Path, tuple] = {}
        cpu: dict[Path, float] = {}   # the least CPU of any run (not necessarily the fastest's)
        with tempfile.TemporaryDirectory(prefix="eerie-ctime-") as tmp:
            for k in range(args.repeat):
                for j, (repo, _) in enumerate(repos):
                    run = compile_once(path, args.board, Path(tmp) / f"o{k}-{j}", repo)
                    if repo not in best or run[0] < best[repo][0]:
                        best[repo] = run
                    cpu[repo] = min(cpu.get(repo, run[1]["cpu"]), run[1]["cpu"])
        for repo, tag in repos:
            wall, stages = best[repo]
            other = max(wall - sum(v for c, v in stages.items() if c != "cpu"), 0.0)
            cells = [f"{stages[c]:.2f}" if c in stages else "" for c in cols]
            print(f"| {path.stem}{tag} | {wall:.2f} | {cpu[repo]:.2f} | " + " | ".join(cells) + f" | {other:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
