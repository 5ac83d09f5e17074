"""A differential-testing campaign (docs/testing.md): random valid programs from each frontend's
generator, compiled by eerie-c and compared with their reference, on the host and (every k-th
case) also on mps2-an386 and riscv-virt in QEMU. Failures shrink themselves and land in
OUT/failures/<frontend>-<flavour>-<seed>-<case>/ as reproducers.

    python -m tests.fuzz.campaign --count 1000 --seed 7 --frontend tflite --jobs 2
    python -m tests.fuzz.campaign --seed 7 --case 123              # case 123 of seed 7 alone
    python -m tests.fuzz.campaign --reproduce OUT/failures/tflite-int8-7-123 --target host

Exit status 1 when any case mismatched or crashed, 2 on bad arguments, else 0.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sys
import time
from collections import Counter, defaultdict
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for p in (str(HERE), str(HERE.parent), str(ROOT)):   # difftest, the tests' helpers, eerie_c
    if p not in sys.path:
        sys.path.insert(0, p)
os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])

from difftest import core  # noqa: E402

BOARDS = ("mps2-an386", "riscv-virt")
CASE_SECONDS = 600           # a case (all its targets, without shrinking) longer than this is a hang


def combos(frontends: list[str], flavours: list[str] | None) -> list[tuple[str, str]]:
    out = [(fe, fl) for fe in frontends for fl in core.GENERATORS[fe].flavours
           if not flavours or fl in flavours]
    if not out:
        raise SystemExit(f"campaign: no frontend has the flavour(s) {', '.join(flavours or [])}")
    return out


def case_plan(seed: int, index: int, pairs, board_every: int) -> tuple[str, str, list[str]]:
    fe, fl = pairs[index % len(pairs)]
    targets = ["host"] + (list(BOARDS) if board_every and index % board_every == board_every - 1 else [])
    return fe, fl, targets


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang(f"the case took longer than {CASE_SECONDS} s")


def run_case(seed: int, index: int, fe: str, fl: str, targets: list[str], out: str,
             shrink_s: float) -> dict:
    """Generate case `index`, check it on each target; shrink and write a failure."""
    core.load_generators([fe])
    work = Path(out) / "work" / str(index)
    t0 = time.monotonic()
    program = core.GENERATORS[fe].generate(random.Random(core.case_seed(seed, index)), fl)
    res = {"index": index, "frontend": fe, "flavour": fl, "program": program.describe(), "targets": {}}
    old = signal.signal(signal.SIGALRM, _alarm) if hasattr(signal, "SIGALRM") else None
    try:
        for t in targets:
            signal.alarm(CASE_SECONDS)
            try:
                o = core.safe_check(program, t, work / t)
            except _Hang as e:
                o = core.Outcome(core.CRASH, f"hang: {e}")
            finally:
                signal.alarm(0)
            res["targets"][t] = {"status": o.status, "detail": o.detail}
            if o.status == core.INVALID:
                break
            if o.failed:
                res["failure"] = str(_record_failure(program, o, t, fe, seed, index, Path(out), work, shrink_s))
                break
    finally:
        if old is not None:
            signal.signal(signal.SIGALRM, old)
        shutil.rmtree(work, ignore_errors=True)
    res["seconds"] = time.monotonic() - t0
    return res


def _record_failure(program, outcome, target, fe, seed, index, out: Path, work: Path, shrink_s) -> Path:
    shrunk = core.shrink(program, outcome, target, work / "shrink", budget_s=shrink_s)
    folder = out / "failures" / f"{fe}-{program.flavour}-{seed}-{index}"
    shrunk.program.write_reproducer(folder)
    (folder / "case.json").write_text(json.dumps({
        "frontend": fe, "flavour": program.flavour, "seed": seed, "case": index,
        "target": target, "status": shrunk.outcome.status, "detail": shrunk.outcome.detail,
        "original": program.describe(), "original_detail": outcome.detail,
        "shrunk": shrunk.program.describe(), "shrink_steps": shrunk.steps, "shrink_tried": shrunk.tried,
        "rerun_original": f"python -m tests.fuzz.campaign --seed {seed} --case {index} "
                          f"--frontend {fe} --flavour {program.flavour}",
    }, indent=1) + "\n")
    return folder


def status_of(res: dict) -> str:
    """A case's worst outcome over its targets."""
    order = [core.MISMATCH, core.CRASH, core.INVALID, core.REFUSED, core.MATCH]
    got = [v["status"] for v in res["targets"].values()]
    return next(s for s in order if s in got)


class Progress:
    def __init__(self, total: int):
        self.total, self.done, self.t0 = total, 0, time.monotonic()
        self.counts: Counter = Counter()
        self.tty = sys.stderr.isatty()

    def update(self, status: str):
        self.done += 1
        self.counts[status] += 1
        if not self.tty and self.done % max(1, self.total // 20) and self.done != self.total:
            return
        el = time.monotonic() - self.t0
        eta = el / self.done * (self.total - self.done)
        bar = "#" * int(30 * self.done / self.total)
        c = self.counts
        line = (f"[{bar:<30}] {self.done}/{self.total} match {c[core.MATCH]} mismatch {c[core.MISMATCH]} "
                f"crash {c[core.CRASH]} refused {c[core.REFUSED]} invalid {c[core.INVALID]} "
                f"{el:.0f}s eta {eta:.0f}s")
        print(("\r" + line) if self.tty else line, end="" if self.tty else "\n", file=sys.stderr, flush=True)
        if self.tty and self.done == self.total:
            print(file=sys.stderr)


def run_all(args, pairs, indices) -> list[dict]:
    results, prog = [], Progress(len(indices))
    log = (args.out / "results.jsonl").open("a")   # each case as it ends (a long run's partial view)

    def record(r):
        results.append(r)
        log.write(json.dumps(r) + "\n")
        log.flush()
        s = status_of(r)
        if s not in (core.MATCH,):
            bad = next(v for v in r["targets"].values() if v["status"] == s)
            print(f"\ncase {r['index']} {r['frontend']} {r['flavour']}: {s}: {bad['detail'][:200]}"
                  + (f" -> {r['failure']}" if r.get("failure") else ""), file=sys.stderr, flush=True)
        prog.update(s)

    plans = {i: case_plan(args.seed, i, pairs, args.board_every) for i in indices}

    def call(i):
        fe, fl, targets = plans[i]
        return (args.seed, i, fe, fl, targets, str(args.out), args.shrink_seconds)

    if args.jobs <= 1:
        for i in indices:
            record(run_case(*call(i)))
        log.close()
        return results
    todo = list(reversed(indices))
    while todo:
        with ProcessPoolExecutor(args.jobs, mp_context=get_context("spawn")) as ex:
            running = {}
            try:
                while todo or running:
                    while todo and len(running) < 2 * args.jobs:
                        i = todo.pop()
                        running[ex.submit(run_case, *call(i))] = i
                    done, _ = wait(running, return_when=FIRST_COMPLETED)
                    for f in done:
                        running.pop(f)
                        record(f.result())
            except BrokenProcessPool:   # a worker died (a segfault in a reference runtime?)
                for f, i in running.items():
                    fe, fl, _ = plans[i]
                    record({"index": i, "frontend": fe, "flavour": fl, "program": "?", "seconds": 0.0,
                            "targets": {"host": {"status": core.CRASH,
                                                 "detail": "a worker process died on this batch"}}})
    log.close()
    return results


def summary(results: list[dict], missing: dict[str, str]) -> str:
    rows = defaultdict(Counter)
    secs = defaultdict(float)
    refusals, crashes = Counter(), []
    for r in results:
        key = (r["frontend"], r["flavour"])
        s = status_of(r)
        rows[key]["cases"] += 1
        rows[key][s] += 1
        secs[key] += r["seconds"]
        for t, v in r["targets"].items():
            if v["status"] == core.REFUSED:
                refusals[f"{r['frontend']} {r['flavour']}: {v['detail']}"] += 1
            elif v["status"] in (core.MISMATCH, core.CRASH, core.INVALID):
                crashes.append(f"case {r['index']} {r['frontend']} {r['flavour']} on {t}: {v['status']}: "
                               f"{v['detail'][:200]}" + (f" -> {r['failure']}" if r.get("failure") else ""))
    cols = ["cases", core.MATCH, core.MISMATCH, core.CRASH, core.REFUSED, core.INVALID]
    lines = ["| frontend | flavour | " + " | ".join(cols) + " | time (s) |",
             "|---|---|" + "---:|" * (len(cols) + 1)]
    total = Counter()
    for key in sorted(rows):
        lines.append(f"| {key[0]} | {key[1]} | " + " | ".join(str(rows[key][c]) for c in cols) +
                     f" | {secs[key]:.0f} |")
        total.update(rows[key])
    lines.append("| **all** | | " + " | ".join(str(total[c]) for c in cols) + f" | {sum(secs.values()):.0f} |")
    if missing:
        lines += ["", "Frontends left out: " + "; ".join(f"{k} ({v})" for k, v in missing.items())]
    if refusals:
        lines += ["", "Refusals of valid programs (reason: count):"]
        lines += [f"- {reason}: {n}" for reason, n in refusals.most_common()]
    if crashes:
        lines += ["", "Failures and invalid programs:"] + [f"- {c}" for c in crashes[:200]]
    return "\n".join(lines)


def reproduce(folder: Path, target: str) -> int:
    case = json.loads((folder / "case.json").read_text()) if (folder / "case.json").exists() else {}
    fe = case.get("frontend", "tflite")
    missing = core.load_generators([fe])
    if fe in missing or core.GENERATORS[fe].load is None:
        print(f"campaign: cannot load a {fe} reproducer: {missing.get(fe, 'no loader')}", file=sys.stderr)
        return 2
    program = core.GENERATORS[fe].load(folder)
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"eerie-reproduce-{os.getpid()}"
    try:
        o = core.safe_check(program, target, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{program.describe()}\n{target}: {o.status} {o.detail}")
    return 1 if o.failed else 0


def parse(argv):
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz.campaign", description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=100, help="cases to run (default 100)")
    ap.add_argument("--seed", type=int, default=0, help="campaign seed (case i is seeded by case_seed(seed, i))")
    ap.add_argument("--frontend", default="all", help="tflite, torch or all (default)")
    ap.add_argument("--flavour", action="append", help="only these flavours (repeatable; e.g. int8)")
    ap.add_argument("--board-share", type=float, default=0.05,
                    help="share of cases also run on mps2-an386 and riscv-virt (default 0.05; 0: none)")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--out", type=Path, default=Path("campaign-out"), help="output folder (default campaign-out)")
    ap.add_argument("--case", type=int, help="run only case I of the seed")
    ap.add_argument("--start", type=int, default=0, help="first case index (default 0)")
    ap.add_argument("--shrink-seconds", type=float, default=300.0, help="time budget of one shrink")
    ap.add_argument("--reproduce", type=Path, help="rerun a failure folder's reproducer")
    ap.add_argument("--target", default="host", help="with --reproduce: host or a board name")
    ap.add_argument("--summarize", type=Path, help="print the summary of an output folder's results.jsonl "
                    "(a run stopped early)")
    args = ap.parse_args(argv)
    if not 0 <= args.board_share <= 1 or args.count < 1 or args.jobs < 1:
        ap.error("--board-share must be in [0, 1], --count and --jobs at least 1")
    args.board_every = round(1 / args.board_share) if args.board_share > 0 else 0
    return args


def main(argv=None) -> int:
    args = parse(argv)
    if args.reproduce:
        return reproduce(args.reproduce, args.target)
    if args.summarize:
        lines = (args.summarize / "results.jsonl").read_text().splitlines()
        results = sorted((json.loads(x) for x in lines if x.strip()), key=lambda r: r["index"])
        print(f"{len(results)} cases from {args.summarize}\n\n" + summary(results, {}))
        return 1 if any(status_of(r) in core.FAILURES for r in results) else 0
    frontends = list(core.GENERATOR_MODULES) if args.frontend == "all" else args.frontend.split(",")
    try:
        missing = core.load_generators(frontends)
    except ValueError as e:
        print(f"campaign: {e}", file=sys.stderr)
        return 2
    if args.frontend != "all" and missing:
        print(f"campaign: cannot load {', '.join(f'{k} ({v})' for k, v in missing.items())}", file=sys.stderr)
        return 2
    have = [fe for fe in frontends if fe in core.GENERATORS]
    pairs = combos(have, args.flavour)
    indices = [args.case] if args.case is not None else list(range(args.start, args.start + args.count))
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    results = sorted(run_all(args, pairs, indices), key=lambda r: r["index"])
    text = (f"Campaign seed {args.seed}, cases {indices[0]}..{indices[-1]}, "
            f"{', '.join(f'{a} {b}' for a, b in pairs)}, board share {args.board_share}, "
            f"{time.monotonic() - t0:.0f} s wall\n\n" + summary(results, missing))
    print(text)
    (args.out / "summary.md").write_text(text + "\n")
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    return 1 if any(status_of(r) in core.FAILURES for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
