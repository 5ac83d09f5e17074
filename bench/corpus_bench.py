#!/usr/bin/env python3
"""eerie-c over the public corpus (models/public_corpus): speed, size and bit-exactness per model.

For each model of the corpus table in models/public_corpus/README.md and each board: compiles
it as `eerie-c MODEL --board BOARD` does (api.run_model, every default), builds the firmware,
runs a few random input records in QEMU (-icount shift=0, SysTick), checks every output
bit-exact against the host TFLM runtime (the `tflite-micro` package, TFLM's reference kernels)
and prints a table: MACs, instructions per inference, instructions per MAC, arena, flash,
bit-exact; beside it TFLM + CMSIS-NN measured on the same model and board by bench/tflm_baseline
when that harness is built (the column stays empty otherwise: nothing is typed in). Then the
figures issue 28's targets are stated in: median and worst instructions per MAC over the models
with at least 100 k MACs, median and worst ratio to TFLM where it was measured. A model that
eerie-c refuses, that crashes the compiler or whose outputs differ from TFLM's is listed with
the error or the mismatch. Writes bench/corpus_results.md.

    python3 bench/corpus_bench.py                              # every model, mps2-an386 (M4)
    python3 bench/corpus_bench.py --boards mps2-an386 mps3-an547
    python3 bench/corpus_bench.py --models tflm_micro_speech ei_fomo_balloon --no-write

Measurement only: nothing here asserts a speed. Exit status 1 when any model was refused,
failed or was not bit-exact.
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(1, str(REPO / "tests"))   # conftest: random_inputs, tflm_run (the TFLM oracle)

CORPUS_DIR = REPO / "models" / "public_corpus"
README = CORPUS_DIR / "README.md"
RESULTS = REPO / "bench" / "corpus_results.md"
BOARDS = ("mps2-an386", "mps3-an547")
BIG_MACS = 100_000          # issue 28's instructions-per-MAC target covers models this large
TFLM_NOT_BUILT = "TFLM: not measured (bench/tflm_baseline not built)"


@dataclass(frozen=True)
class CorpusModel:
    """One row of the corpus table in models/public_corpus/README.md."""
    name: str
    file: str            # relative to the repository root
    what: str
    input: str
    macs: str            # as eerie-c counts them ("-" where it does not compile the model)
    repo: str
    path: str
    commit: str
    licence: str
    licence_file: str    # relative to models/public_corpus
    sha256: str

    @property
    def file_path(self) -> Path:
        return REPO / self.file


TABLE_HEAD = ("name", "file", "what", "input", "MACs", "source repository", "path there", "commit",
              "licence", "licence text", "sha256")


def _cell(text: str) -> str:
    """A table cell without its markdown decoration (backticks, a link's brackets)."""
    text = text.strip().strip("`")
    m = re.fullmatch(r"\[([^\]]*)\]\([^)]*\)", text)
    return (m.group(1) if m else text).strip("`")


def corpus_models(readme: Path = README) -> list[CorpusModel]:
    """The corpus table of the README: the rows under the header naming TABLE_HEAD."""
    lines = readme.read_text().splitlines()
    for i, line in enumerate(lines):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if tuple(cells) == TABLE_HEAD:
            break
    else:
        raise SystemExit(f"{readme}: no corpus table (a header | {' | '.join(TABLE_HEAD)} |)")
    rows = []
    for line in lines[i + 2:]:
        if not line.startswith("|"):
            break
        cells = [_cell(c) for c in line.strip().strip("|").split("|")]
        if len(cells) != len(TABLE_HEAD):
            raise SystemExit(f"{readme}: a corpus row has {len(cells)} cells, not "
                             f"{len(TABLE_HEAD)}: {line[:80]}")
        rows.append(CorpusModel(*cells))
    return rows


def model_inputs(path: Path, n: int, seed: int) -> list[np.ndarray]:
    """n random records per graph input, by the input's dtype (tests/conftest.random_inputs:
    the full int8 / int16 range, standard normal floats)."""
    import tflite
    from conftest import random_inputs
    names = {v: k.lower() for k, v in vars(tflite.TensorType).items() if not k.startswith("_")}
    sg = tflite.Model.GetRootAs(path.read_bytes(), 0).Subgraphs(0)
    xs = []
    for k in range(sg.InputsLength()):
        t = sg.Tensors(sg.Inputs(k))
        xs.append(random_inputs([int(d) for d in t.ShapeAsNumpy()], names[t.Type()], n, seed=seed + k))
    return xs


def mismatch(got: list[np.ndarray], ref: list[np.ndarray]) -> str:
    """'' when every output equals TFLM's, else what differs (the first output that does)."""
    if len(got) != len(ref):
        return f"{len(got)} outputs, TFLM gives {len(ref)}"
    for k, (g, r) in enumerate(zip(got, ref)):
        g = np.asarray(g)
        if g.size != r.size:
            return f"output {k}: {g.size} values, TFLM gives {r.size}"
        g = g.reshape(r.shape)
        if not np.array_equal(g, r):
            bad = g != r
            diff = np.abs(g.astype(np.float64) - r.astype(np.float64))
            return (f"output {k}: {int(bad.sum())} of {r.size} values differ, max |diff| "
                    f"{float(diff.max()):g}")
    return ""


def _one_line(e: Exception) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"


def measure_ours(m: CorpusModel, board: str, n_inputs: int, seed: int) -> dict:
    """eerie-c on one model and board: the report's figures and the comparison with TFLM, or
    the refusal (an EerieError, the one-line message users get) or the crash."""
    from conftest import tflm_run

    from eerie_c import api
    from eerie_c.errors import EerieError
    xs = model_inputs(m.file_path, n_inputs, seed)
    try:
        got, rep = api.run_model(m.file_path, xs, board=board)
    except EerieError as e:
        return {"status": "refused", "error": str(e).splitlines()[0]}
    except Exception as e:    # a compiler or harness bug: reported, the bench goes on
        return {"status": "crashed", "error": _one_line(e)}
    diff = mismatch(got, tflm_run(m.file_path, xs))
    sizes = rep["elf_sizes"]
    return {"status": "wrong" if diff else "ok", "error": diff, "macs": rep["macs"],
            "instructions": rep["instructions"], "arena": rep["arena_bytes"],
            "flash": sizes["text"] + sizes["data"]}


class TflmBaseline:
    """bench/tflm_baseline's measure(model_path, board), if that harness is in the checkout and
    its TFLM library is built; `note` says why not otherwise (printed once, column left empty)."""

    def __init__(self):
        self.mod, self.note = None, ""
        import eerie_c.api  # noqa: F401  (this checkout's, imported before the harness adds paths)
        sys.path.insert(0, str(REPO / "bench"))
        try:
            import tflm_baseline
        except ModuleNotFoundError as e:
            if e.name != "tflm_baseline":
                raise
            self.note = TFLM_NOT_BUILT
            return
        self.mod = tflm_baseline

    def measure(self, path: Path, board: str) -> dict | None:
        """The harness's dict, {"error": ...} if it cannot run this model, None if not built."""
        if self.mod is None:
            return None
        not_built = getattr(self.mod, "BaselineNotBuilt", ())
        try:
            return self.mod.measure(path, board)
        except not_built as e:
            self.mod, self.note = None, f"{TFLM_NOT_BUILT}: {str(e).splitlines()[0]}"
            return None
        except Exception as e:    # e.g. an op the harness cannot register: noted per model
            return {"error": _one_line(e)}


def _num(v) -> str:
    return f"{v:,}" if isinstance(v, int) else "-"


def row_line(r: dict) -> str:
    ours, tflm = r["ours"], r.get("tflm") or {}
    ok = ours["status"] in ("ok", "wrong")
    ipm = f"{ours['instructions'] / ours['macs']:.2f}" if ok and ours["macs"] else "-"
    exact = {"ok": "yes", "wrong": "**NO**", "refused": "refused", "crashed": "**crashed**"}[ours["status"]]
    t_ins = tflm.get("instructions")
    t_cell = f"{t_ins:,}{'' if tflm.get('bit_exact', True) else ' (not exact)'}" if t_ins else (
        "failed" if "error" in tflm else "")
    ratio = f"{ours['instructions'] / t_ins:.2f}x" if ok and t_ins else ""
    return (f"| {r['model']} | {r['board']} | {_num(ours.get('macs'))} | {_num(ours.get('instructions'))} | "
            f"{ipm} | {_num(ours.get('arena'))} | {_num(ours.get('flash'))} | {exact} | {t_cell} | {ratio} |")


HEADER = ("| model | board | MACs | instructions | instr/MAC | arena B | flash B | bit-exact | "
          "TFLM + CMSIS-NN instructions | ours / TFLM |")


def _median_worst(pairs: list[tuple[str, float]], unit: str = "") -> str:
    if not pairs:
        return "none measured"
    worst = max(pairs, key=lambda p: p[1])
    return (f"median {statistics.median(v for _, v in pairs):.2f}{unit}, worst {worst[1]:.2f}{unit} "
            f"({worst[0]}), over {len(pairs)} models")


def summary(rows: list[dict], tflm_note: str) -> str:
    out = []
    for board in dict.fromkeys(r["board"] for r in rows):
        rs = [r for r in rows if r["board"] == board]
        ran = [r for r in rs if r["ours"]["status"] == "ok"]
        big = [(r["model"], r["ours"]["instructions"] / r["ours"]["macs"]) for r in ran
               if r["ours"]["macs"] >= BIG_MACS]
        ratios = [(r["model"], r["ours"]["instructions"] / r["tflm"]["instructions"]) for r in ran
                  if (r.get("tflm") or {}).get("instructions")]
        counts = {s: sum(r["ours"]["status"] == s for r in rs) for s in ("ok", "wrong", "refused", "crashed")}
        out.append(f"**{board}**: {len(rs)} models; {counts['ok']} bit-exact, {counts['wrong']} not "
                   f"bit-exact, {counts['refused']} refused, {counts['crashed']} crashed.")
        out.append(f"- instructions per MAC, bit-exact models with >= {BIG_MACS:,} MACs: "
                   f"{_median_worst(big)} (issue 28 target: <= 1.4 on mps2-an386)")
        out.append("- ours / TFLM + CMSIS-NN instructions: " + (
            _median_worst(ratios, 'x') + " (issue 28 target: median <= 0.33x, worst <= 0.55x)"
            if ratios else (tflm_note or "TFLM: not measured for any model")))
    problems = [r for r in rows if r["ours"]["status"] != "ok"]
    if problems:
        out.append("")
        out.append("Models eerie-c did not run bit-exact (reproduce: `python3 -m eerie_c.cli "
                   "FILE --board BOARD -o /tmp/o` for a refusal or crash, `python3 "
                   "bench/corpus_bench.py --models NAME --boards BOARD --no-write` for a mismatch):")
        for r in problems:
            out.append(f"- {r['model']} on {r['board']}: {r['ours']['status']}: {r['ours']['error']}")
    failed_tflm = [r for r in rows if "error" in (r.get("tflm") or {})]
    for r in failed_tflm:
        out.append(f"- TFLM baseline could not run {r['model']} on {r['board']}: {r['tflm']['error']}")
    return "\n".join(out) + "\n"


NOTES = """
Columns: MACs as eerie-c counts them (the report's `macs`); instructions per inference, the
worst of the records run (QEMU -icount shift=0, SysTick); instr/MAC = instructions / MACs;
arena = the planned arena; flash = text + data of the whole firmware ELF (harness and start-up
included); bit-exact: every output equals the host TFLM runtime's on the same random records
(int8/int16 inputs over their whole range, float inputs standard normal). TFLM + CMSIS-NN:
bench/tflm_baseline's measure(model, board) on the same model and board (its own random
records), empty when that harness is not built. Every model is compiled with the defaults a
user gets (`eerie-c MODEL --board BOARD`).
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    models = corpus_models()
    names = [m.name for m in models]
    ap.add_argument("--models", nargs="+", default=names, choices=names, metavar="NAME",
                    help="a subset of the corpus (default: all of it)")
    ap.add_argument("--boards", nargs="+", default=["mps2-an386"], choices=BOARDS)
    ap.add_argument("--inputs", type=int, default=2, help="random input records per model (default 2)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-write", action="store_true", help=f"do not write {RESULTS.relative_to(REPO)}")
    a = ap.parse_args(argv)
    chosen = [m for m in models if m.name in a.models]
    missing = [m.file for m in chosen if not m.file_path.is_file()]
    if missing:
        raise SystemExit(f"corpus files missing ({len(missing)}): {', '.join(missing[:4])}"
                         f"{' ...' if len(missing) > 4 else ''} (models/public_corpus/README.md)")
    tflm = TflmBaseline()
    rows = []
    for board in a.boards:
        for m in chosen:
            r = {"model": m.name, "board": board, "ours": measure_ours(m, board, a.inputs, a.seed)}
            r["tflm"] = tflm.measure(m.file_path, board)
            rows.append(r)
            print(row_line(r), file=sys.stderr, flush=True)
    if tflm.note:
        print(tflm.note)
    text = "\n".join([HEADER, "|---|---|---:|---:|---:|---:|---:|---|---:|---:|"] +
                     [row_line(r) for r in rows]) + "\n\n" + summary(rows, tflm.note) + NOTES
    print(text)
    if not a.no_write:
        RESULTS.write_text("# eerie-c over the public corpus (generated by bench/corpus_bench.py)\n\n" + text)
    return 0 if all(r["ours"]["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
