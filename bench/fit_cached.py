"""bench/fit_patch_cost.py --cached: the costs of a stage with cached halos (patch/cache.py)
beyond its layers' own estimates, fitted on one board (eerie_c/estimate.py _bands):

1. per layer of forced stages (bench/profile_stage.py, the stage's kernels and moves counted
   apart): MOVE_COST, newlib's memmove of the kept rows (instructions = per byte x bytes + per
   call x moves, non-negative least squares over every layer's moves), and DW_HALO, what a
   stride-1 depthwise kernel over a step's rows costs beyond its share of the whole layer
   measured layer by layer, per halo input element (the rows the previous step extended
   too; least squares through 0 over those layers);
2. whole models (QEMU totals, forced stages against the layer-by-layer build, which is what
   the planner bounds): CACHED_STEP per kernel call and, on DSP cores, the low-scratch
   depthwise's extra per MAC (DEPTHWISE_CONV_2D_LOW's per MAC minus DEPTHWISE_CONV_2D's),
   non-negative least squares of (measured growth - the estimate's growth without them) on the calls and
   the low-scratch MACs. Held-out stages are estimated with the fit and shown, not fitted.
"""
from __future__ import annotations

import numpy as np

import profile_layers
import profile_stage
from fit_patch_cost import _run


def _profiles(paths, board, samples):
    """Rows of per-layer measurements: (model, layer, kind, stride, measured kernel minus the
    layer measured whole, halo elements, moved bytes, moves, measured moves)."""
    rows = []
    for model, n, steps in samples:
        profile_layers.PATCH = "off"
        _, whole, _ = profile_layers.measure(paths[model], board)
        got = profile_stage.measure(paths[model], board, (n, (steps, 1), "cached"))
        est = profile_stage.estimates(got["stage"], board)
        for k, (lay, m, e) in enumerate(zip(got["stage"].layers, got["layers"], est)):
            rows.append((f"{model} {n}/{steps}", k, lay.kind, lay.sh, m["kernel"] - whole[k],
                         e["halo"], e["bytes"], e["moves"], m["move"]))
    return rows


def _whole(paths, board, sample, off):
    """(measured growth, estimated growth without CACHED_STEP and the low-scratch extra,
    kernel calls, low-scratch MACs, the stage's estimate as compiled) of one forced stage."""
    from eerie_c import estimate
    model, n, steps, low = sample
    if model not in off:
        off[model] = _run(paths[model], board, "off")
    count0, rep0 = off[model]
    mod, orig, make = profile_stage._forcing_low(frozenset(low))
    mod.make_cached_plan = make
    try:
        count, rep = _run(paths[model], board, (n, (steps, 1), "cached"))
    finally:
        mod.make_cached_plan = orig
    work = next(op for op in rep["ops"] if op["kind"] == "PATCH_STAGE")["stage_bands"]
    prefix = sum(op["est_instructions"] for op in rep0["ops"][:n])
    fam = estimate.FAMILY[board.cpu]
    table = estimate.COSTS[(fam, False)]
    saved = (estimate.CACHED_STEP.get(fam), table.get("DEPTHWISE_CONV_2D_LOW"))
    estimate.CACHED_STEP[fam] = 0
    if saved[1] is not None:
        table["DEPTHWISE_CONV_2D_LOW"] = table["DEPTHWISE_CONV_2D"]
    try:
        bare = estimate._bands(work, board.cpu) - prefix
    finally:
        estimate.CACHED_STEP[fam] = saved[0]
        if saved[1] is not None:
            table["DEPTHWISE_CONV_2D_LOW"] = saved[1]
    calls = sum(1 for w in work if w[0] != "MOVE")
    low_macs = sum(w[1] for w in work if w[0].endswith("_LOW"))
    return count - count0, bare, calls, low_macs, estimate._bands(work, board.cpu) - prefix, count0


def fit(paths, board, samples, held_out, profiles) -> None:
    from scipy.optimize import nnls
    from eerie_c.estimate import CACHED_STEP, COSTS, DW_HALO, FAMILY, MOVE_COST
    fam = FAMILY[board.cpu]
    print(f"## {board.name} ({fam})")
    rows = _profiles(paths, board, profiles)
    mv = [r for r in rows if r[7]]
    A = np.asarray([[r[6], r[7]] for r in mv], float)
    y = np.asarray([r[8] for r in mv], float)
    move, _ = nnls(A, y)
    dw = [r for r in rows if r[2] == "DEPTHWISE_CONV_2D" and r[3] == 1 and r[5] > 0]
    h = np.asarray([r[5] for r in dw], float)
    d = np.asarray([r[4] for r in dw], float)
    halo = max(0.0, float(h @ d / (h @ h))) if len(dw) else 0.0
    print("| stage | layer | moved bytes | moves | measured | fit |")
    print("|---|---:|---:|---:|---:|---:|")
    for r, a in zip(mv, A):
        print(f"| {r[0]} | {r[1]} | {r[6]:,} | {r[7]} | {r[8]:,.0f} | {float(a @ move):,.0f} |")
    print("| stage | stride-1 depthwise layer | halo elements | measured over whole | fit |")
    print("|---|---:|---:|---:|---:|")
    for r in dw:
        print(f"| {r[0]} | {r[1]} | {r[5]:,.0f} | {r[4]:,.0f} | {halo * r[5]:,.0f} |")
    print(f'MOVE_COST["{fam}"] = ({move[0]:.2f}, {int(round(move[1]))})   # was {MOVE_COST.get(fam)}')
    print(f'DW_HALO["{fam}"] = {halo:.2f}   # was {DW_HALO.get(fam)}')
    # whole models, with the fitted moves and halo in the estimate
    import eerie_c.estimate as est
    est.MOVE_COST[fam], est.DW_HALO[fam] = (float(move[0]), float(move[1])), halo
    has_low = "DEPTHWISE_CONV_2D_LOW" in COSTS[(fam, False)]
    off, got = {}, []
    for sample in samples + held_out:
        if sample[3] and not has_low:   # no low-scratch kernel on this family: nothing to fit
            continue
        got.append((sample, *_whole(paths, board, sample, off)))
    fitted = [g for g in got if g[0] in samples]
    A = np.asarray([[g[3], g[4]] if has_low else [g[3]] for g in fitted], float)
    r = np.asarray([g[1] - g[2] for g in fitted], float)
    coef, _ = nnls(A, r)   # non-negative, as the other fits: a call costs, never saves
    step, low = float(coef[0]), float(coef[1]) if has_low else 0.0
    print("| stage | low-scratch | calls | measured growth | estimated (fit) | |")
    print("|---|---|---:|---:|---:|---|")
    for (model, n, steps, lows), meas, bare, calls, lmacs, _, base in got:
        e = bare + step * calls + low * lmacs
        print(f"| {model} {n} layers {steps} steps | {list(lows)} | {calls} | {meas:,} "
              f"({100 * meas / base:.2f}%) | {e:,.0f} ({100 * e / base:.2f}%) | {'held out' if (model, n, steps, lows) in held_out else 'fit'} |")
    print(f'CACHED_STEP["{fam}"] = {int(round(step, -1))}   # was {CACHED_STEP.get(fam)}')
    if has_low:
        base = COSTS[(fam, False)]["DEPTHWISE_CONV_2D"]
        print(f'"DEPTHWISE_CONV_2D_LOW": ({base[0] + low:.3f}, {base[1]}, {base[2]}, {base[3]}),   '
              f'# {low:.2f} per MAC over DEPTHWISE_CONV_2D; was {COSTS[(fam, False)]["DEPTHWISE_CONV_2D_LOW"]}')
