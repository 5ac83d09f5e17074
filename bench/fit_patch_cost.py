#!/usr/bin/env python3
"""Fit the patch stage's instruction estimate (eerie_c/estimate.py stage_features /
STAGE_FIT) to QEMU counts: forced stages (prefix length, grid) of vww_96_int8 and issue 19's
person detector, each profiled with bench/profile_layers.py (SysTick after every layer,
-icount shift=0); the stage's count is regressed on its per-tile work (estimate.py
stage_features: patched MACs and output elements per layer kind, window gathers, tile x
layer steps) by non-negative least squares. Prints the fit and each stage's estimate against
its measurement.

    python bench/fit_patch_cost.py [--board mps2-an386]
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


def models(tmp: Path) -> dict[str, Path]:
    from compare_patches import person_detector
    return {"vww": Path("/work/shared/models/vww_96_int8.tflite") if not (REPO.parent / "shared").exists()
            else REPO.parent / "shared" / "models" / "vww_96_int8.tflite", "pd": person_detector(tmp)}


def measure_stage(path: Path, board, layers: int, grid) -> tuple[int, dict]:
    profile_layers.PATCH = (layers, grid)
    ops, counts, _ = profile_layers.measure(path, board)
    k = next(i for i, op in enumerate(ops) if op["kind"] == "PATCH_STAGE")
    return counts[k], ops[k]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--board", default="mps2-an386")
    a = ap.parse_args(argv)
    from scipy.optimize import nnls
    from eerie_c.frontend import load_model   # the stage's features from the plan itself
    from eerie_c.passes import run_passes
    from eerie_c.plan.patch import chain_prefix, make_plan
    board = get_board(a.board)
    tmp = Path(tempfile.mkdtemp(prefix="eerie-fit-"))
    paths = models(tmp)
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
