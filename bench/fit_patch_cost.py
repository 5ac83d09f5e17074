#!/usr/bin/env python3
"""Fit the patch planner's instruction estimates to QEMU counts (-icount shift=0, SysTick
after every layer, bench/profile_layers.py) on one board. The planner's bound compares a
stage *as run* with the prefix's layers *layer by layer* (estimate.py stage_growth), so both
sides need refitting whenever kernels change speed:

- `--layers`: the layer-by-layer int8 costs (estimate_costs.py COSTS[(family, False)] for CONV_2D,
  CONV_2D_ADD, DEPTHWISE_CONV_2D): per kind, instructions = per_mac x MACs + per_out x output
  elements + per_in x input elements + fixed, non-negative least squares over every layer of vww_96_int8, kws_ref_model,
  pretrainedResnet_quant and issue 19's person detector;
- `--stages` (the default): the per-tile C's STAGE_FIT: forced stages (prefix length, grid) of
  vww_96_int8 and the person detector, regressed on their per-tile work (estimate.py
  stage_features) by non-negative least squares;
- `--bands`: BAND_STEP, the per kernel call cost of row-band stages with recomputed halos
  beyond the layer kernels' own estimate (run it after `--layers` has been pasted into
  estimate.py);
- `--cached`: stages with cached halos (bench/fit_cached.py): MOVE_COST, DW_HALO,
  CACHED_STEP and the low-scratch depthwise's DEPTHWISE_CONV_2D_LOW, on mps2-an386 and
  mps3-an547 (or the --board given), with held-out stages.

Each prints the fit to paste into eerie_c/estimate_costs.py and every sample's estimate against
its measurement. After a kernel gets faster or slower (issue 15's helpers), rerun

    python bench/fit_patch_cost.py --layers [--board mps2-an386]    # paste COSTS rows
    python bench/fit_patch_cost.py --bands                          # paste BAND_STEP
    python bench/fit_patch_cost.py --cached                         # MOVE_COST, DW_HALO, CACHED_STEP, _LOW
    python bench/fit_patch_cost.py                                  # STAGE_FIT (per-tile C)

then tests/patch/test_patch_estimate.py (measured against estimated growth, M4 and M55).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench")]

import profile_layers  # noqa: E402
from eerie_c.estimate import STAGE_FEATURES, stage_features  # noqa: E402
from eerie_c.toolchain.boards import get_board  # noqa: E402

# (model, layers, grid): a spread of layer kinds, halo shares and tile counts
STAGES = [("vww", 2, (4, 4)), ("vww", 4, (8, 8)), ("vww", 4, (2, 2)), ("vww", 5, (3, 4)),
          ("vww", 3, (6, 1)), ("pd", 2, (2, 2)), ("pd", 4, (8, 8)), ("pd", 4, (3, 3)),
          ("pd", 6, (2, 3)), ("pd", 8, (2, 3)), ("pd", 3, (1, 8))]


# row-band stages for BAND_STEP: (model, layers, bands)
BANDS = [("vww", 4, 12), ("vww", 4, 6), ("pd", 4, 12), ("pd", 3, 8), ("resnet", 3, 11)]
# cached-halo stages (patch/cache.py) for --cached: (model, layers, steps, low-scratch
# layers); the fit uses CACHED, HELD_OUT only reports its estimate against its measurement
CACHED = [("vww", 8, 48, ()), ("vww", 8, 48, (1, 5)), ("vww", 4, 24, ()), ("pd", 8, 48, ()),
          ("pd", 8, 48, (1, 5)), ("pd", 6, 16, ())]
HELD_OUT = [("pd", 8, 48, (5,)), ("vww", 6, 24, (1,)), ("vww", 6, 24, ())]
# per-layer profiles (bench/profile_stage.py) for MOVE_COST and DW_HALO
CACHED_PROFILES = [("vww", 8, 48), ("pd", 8, 48), ("vww", 4, 12)]
LAYER_KINDS = ("CONV_2D", "CONV_2D_ADD", "DEPTHWISE_CONV_2D")


def models(tmp: Path) -> dict[str, Path]:
    from compare_patches import person_detector
    shared = REPO / "models" / "mlperf_tiny"
    return {"vww": shared / "vww_96_int8.tflite", "kws": shared / "kws_ref_model.tflite",
            "resnet": shared / "pretrainedResnet_quant.tflite", "pd": person_detector(tmp)}


def measure_stage(path: Path, board, layers: int, grid) -> tuple[int, dict]:
    profile_layers.PATCH = (layers, grid)
    ops, counts, _ = profile_layers.measure(path, board)
    k = next(i for i, op in enumerate(ops) if op["kind"] == "PATCH_STAGE")
    return counts[k], ops[k]


def _elements(tensors) -> int:
    return sum(int(np.prod(t["shape"])) for t in tensors)


def fit_layers(paths, board) -> None:
    """Per kind: instructions ~ per_mac x MACs + per_out x outputs + per_in x inputs + fixed
    (NNLS on relative errors)."""
    from scipy.optimize import nnls
    from eerie_c.estimate import COSTS, FAMILY, estimate_layer
    samples = {k: [] for k in LAYER_KINDS}
    profile_layers.PATCH = "off"
    for model in ("vww", "kws", "resnet", "pd"):
        ops, counts, _ = profile_layers.measure(paths[model], board)
        for op, n in zip(ops, counts):
            # below 1 instruction per MAC a layer does not run its MACs (the person
            # detector's random-weight depthwise layers 7-25: not investigated, docs/patches.md)
            if op["kind"] in samples and n >= 1.0 * op["macs"] and not any(str(t.get("dtype", "")).startswith("float")
                                                 for t in op["inputs"]):
                samples[op["kind"]].append((model, op["index"], op["macs"], _elements(op["outputs"]),
                                             _elements(op["inputs"]), n))
    fam = FAMILY[board.cpu]
    for kind, rows in samples.items():
        if not rows:
            continue
        A = np.asarray([[m, o, i, 1.0] for _, _, m, o, i, _ in rows])
        y = np.asarray([n for *_, n in rows], float)
        # relative errors (rows divided by the measurement): the small layers count as much
        # as the big ones, and the planner's prefixes are small-channel first layers
        coef, _ = nnls(A / y[:, None], np.ones_like(y))
        print(f'"{kind}": ({coef[0]:.3f}, {coef[1]:.2f}, {coef[2]:.2f}, {int(round(coef[3], -1))}),   '
              f'# was {COSTS[(fam, False)].get(kind)}')
        for (model, idx, m, o, i, n), r in zip(rows, A):
            old = estimate_layer(kind, m, i, o, False, board.cpu)
            print(f"|   {model} #{idx} | {n:,} | fit {float(r @ coef) / n:.2f}x | now {old / n:.2f}x |")


def _run(path: Path, board, patch) -> tuple[int, dict]:
    """(instructions per inference measured in QEMU, report) of the whole model."""
    from eerie_c.api import run_model
    spec = None
    from eerie_c.api import compile_model
    with tempfile.TemporaryDirectory(prefix="eerie-fit-") as tmp:
        spec = compile_model(path, out_dir=Path(tmp), name="m").report["inputs"][0]
    x = np.random.default_rng(0).integers(-128, 128, size=(1, 1, *spec["shape"][1:]), dtype=np.int8)
    _, rep = run_model(path, [x], board=board.name, patch=patch)
    return rep["instructions"], rep


def _step_fit(paths, board, samples, off: dict) -> list[float]:
    """Per sample: (measured growth - estimated growth without the step) per kernel call, the
    growths those of whole models (QEMU totals against the layer-by-layer build, estimates
    against its estimate), which is what the planner bounds."""
    from eerie_c.estimate import BAND_STEP, FAMILY
    step = BAND_STEP.get(FAMILY[board.cpu], 0)
    steps = []
    for model, n, bands in samples:
        if model not in off:
            off[model] = _run(paths[model], board, "off")
        count0, rep0 = off[model]
        count, rep = _run(paths[model], board, (n, (bands, 1)))
        work = next(op for op in rep["ops"] if op["kind"] == "PATCH_STAGE")["stage_bands"]
        calls = sum(1 for w in work if w[0] != "MOVE")
        est = rep["est_instructions"] - step * calls - rep0["est_instructions"]
        steps.append(((count - count0) - est) / calls)
        print(f"| {model} {n} layers {bands} bands | growth measured {count - count0:,} | "
              f"estimated without steps {est:,} | {steps[-1]:,.0f} per kernel call |")
    return steps


def fit_bands(paths, board) -> None:
    """BAND_STEP (see _step_fit); cached stages: fit_cached."""
    from eerie_c.estimate import BAND_STEP, FAMILY
    fam = FAMILY[board.cpu]
    off = {}
    steps = _step_fit(paths, board, BANDS, off)
    print(f'BAND_STEP["{fam}"] = {int(round(float(np.median(steps)), -2))}   # median; was {BAND_STEP.get(fam)}')


def fit_stages(paths, board) -> None:
    from scipy.optimize import nnls
    from eerie_c.frontend import load_model   # the stage's features from the plan itself
    from eerie_c.passes import run_passes
    from eerie_c.patch.stage import chain_prefix, make_plan
    rows, ys, names = [], [], []
    for model, n, grid in STAGES:
        g = run_passes(load_model(str(paths[model])))
        ops, lays = chain_prefix(g)
        plan = make_plan(ops[:n], lays[:n], grid)
        feats = stage_features(plan)
        count, _ = measure_stage(paths[model], board, n, grid)
        rows.append(feats)
        ys.append(count)
        names.append(f"{model} {n} layers {grid[0]}x{grid[1]}")
        print(f"{names[-1]}: {count:,} instructions, features {dict(zip(STAGE_FEATURES, feats))}",
              file=sys.stderr)
    A, y = np.asarray(rows, float), np.asarray(ys, float)
    coef, _ = nnls(A, y)
    print("fit:", ", ".join(f"{f} {c:.3f}" for f, c in zip(STAGE_FEATURES, coef)))
    for name, r, m in zip(names, A, y):
        e = float(r @ coef)
        print(f"| {name} | {int(m):,} | {int(e):,} | {e / m:.3f} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--board", default="mps2-an386")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--layers", action="store_true", help="fit the layer-by-layer COSTS")
    mode.add_argument("--bands", action="store_true", help="fit BAND_STEP")
    mode.add_argument("--cached", action="store_true",
                      help="fit the cached-halo stages' costs (bench/fit_cached.py), on "
                           "mps2-an386 and mps3-an547 unless --board is given")
    a = ap.parse_args(argv)
    paths = models(Path(tempfile.mkdtemp(prefix="eerie-fit-")))
    if a.cached:
        import fit_cached
        given = "--board" in " ".join(argv if argv is not None else sys.argv)
        for name in ([a.board] if given else ["mps2-an386", "mps3-an547"]):
            fit_cached.fit(paths, get_board(name), CACHED, HELD_OUT, CACHED_PROFILES)
        return 0
    board = get_board(a.board)
    if a.layers:
        fit_layers(paths, board)
    elif a.bands:
        fit_bands(paths, board)
    else:
        fit_stages(paths, board)
    return 0


if __name__ == "__main__":
    sys.exit(main())
