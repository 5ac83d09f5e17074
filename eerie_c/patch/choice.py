"""The planner's choice of a patch stage (patch/stage.py): which prefix, which grid, or none.

The bound (--max-recompute PCT) is on the estimated instructions of the whole model: the stage's
per-tile kernel costs more per MAC than the layer-by-layer kernels on most targets (far more on
Helium cores), on top of its recomputed halos, so the pipeline passes growth(plan), that
estimate's growth in percent (estimate.py); without an estimate for the target the bound falls
back to the halo's extra MACs in percent of the model's.

Each candidate (a prefix length with its smallest-buffer grid within the bound) is
planned in full, with the stage as one op owning its patch buffers as scratch; the smallest
arena wins, and patches are used only when that arena is smaller than the layer-by-layer one.
"""
from __future__ import annotations

import copy
import dataclasses
import functools

from ..ir import Op
from ..plan.arena import Plan, live_bytes, plan_memory
from ..plan.lifetimes import buffers
from ..errors import EerieError
from .stage import MAX_GRID, PatchPlan, candidates, chain_prefix, closed, make_plan, summary
from .cache import make_cached_plan, summary as cache_summary

STAGE = "PATCH_STAGE"
# How much larger than the smallest an arena may be and still win by fewer instructions.
ARENA_SLACK = 1.02


def collapse(g, stage: PatchPlan):
    """A copy of g whose first len(stage.ops) ops are replaced by one PATCH_STAGE op."""
    n = len(stage.ops)
    first = stage.ops[0]
    attrs = {"patch": stage}
    if stage.shift is not None:   # what lowering will say too (patch/kernel.py)
        attrs["inplace_of_input"] = "shift"
    op = Op(STAGE, [stage.tensors[0]], [stage.tensors[-1]], attrs,
            name=f"patch_stage_{first.index}_{stage.ops[-1].index}", index=first.index,
            subgraph=first.subgraph)
    g2 = copy.copy(g)
    g2.ops = [op] + list(g.ops[n:])
    return g2


def _shifted(scratch: dict[int, tuple[str, int]], n: int, stage: PatchPlan) -> dict:
    out = {s - (n - 1): v for s, v in scratch.items() if s >= n}
    out[0] = ("patch_stage", stage.scratch_bytes)
    return out


def choose_patches(g, scratch: dict[int, tuple[str, int]], base: Plan, inputs_in_arena: bool,
                   max_recompute: float, total_macs: int, forced=None, growth=None,
                   est_before: int | None = None, band_scratch=None, adapt=None,
                   max_grid: int = MAX_GRID) -> tuple[PatchPlan | None, dict]:
    """(the chosen stage or None, what report.json shows of the choice). `scratch` is the
    layer-by-layer graph's (step -> (name, bytes)), `base` its plan. forced: (layers, grid)
    to use exactly that stage whatever it costs (tests, experiments). growth(plan): the
    estimated instruction growth in percent of est_before, the model's estimate layer by layer
    (None for a target without an estimate). band_scratch(plan): per layer, the scratch its
    kernels over the plan's row bands need (patch/band_kernels.py); a candidate planned with
    less (the layer-by-layer kernel's) is planned again with it. adapt(plan): the candidate as
    it will run (patch/rows.py with_rows: a ring of input rows in its scratch), before
    planning."""
    tried, refused = [], []
    best = None
    arena_of = functools.partial(_arena, g, scratch, inputs_in_arena, {})
    lows = {}   # id(candidate) -> its low-scratch layers and why (_low_scratch)
    # the layers' own kernels' scratch, which they need over a row band too (make_plan)
    ks = [scratch.get(k, ("", 0))[1] for k in range(len(g.ops))]
    if forced is not None:
        ops, layers = chain_prefix(g)
        n, grid, *how = forced   # (layers, grid[, "cached"])
        if not 2 <= n <= len(ops) or not closed(g, ops[:n]):
            raise EerieError(f"a patch stage of {n} layers: the graph starts with {len(ops)} "
                             f"layers that can run in patches (and whose intermediates are read "
                             f"inside the stage alone)")
        if how == ["cached"]:
            cands = [make_cached_plan(ops[:n], layers[:n], grid[0], ks[:n]) if grid[1] == 1 else None]
            if cands[0] is None:
                raise EerieError(f"a patch stage of {n} layers with cached halos in {grid[0]}x{grid[1]}: "
                                 f"needs row bands (N x 1)")
        else:
            cands = [make_plan(ops[:n], layers[:n], tuple(grid), ks[:n])]
        if cands[0] is None:
            raise EerieError(f"a patch stage of {n} layers in a {grid[0]}x{grid[1]} grid: a fused ADD, "
                             f"pool, PAD or element-wise layer needs row bands (a grid N x 1), each "
                             f"with a row of every layer to compute (a band wholly in a PAD's "
                             f"padding: cached halos only), and a skip input may not keep three "
                             f"patch buffers live at once (a layer after the one reading it)")
        if adapt is not None:
            cands = [adapt(c) for c in cands]
    else:   # candidates() adapts them itself
        cands, refused = candidates(g, total_macs, max_recompute, growth, ks, adapt, max_grid,
                                    cached=make_cached_plan)
    low_ok = growth is not None and forced is None   # _low_scratch may shrink a cached stage
    at_least = []
    for i, cand in enumerate(cands):
        if cand.bands and band_scratch is not None:
            need = band_scratch(cand)
            if cand.cache is not None and need != [have for _, have in cand.kernel_scratch]:
                # cached halos: exactly what the kernels over the steps' rows need, which is
                # often far less than the whole layer's kernel (vww's 24x24x32 depthwise on
                # the M4: 5,376 B whole, less over a few rows)
                cand = cands[i] = make_cached_plan(cand.ops, cand.layers, cand.cache.steps, need)
                cand = cands[i] = adapt(cand) if adapt is not None else cand
            elif any(b > have for b, (_, have) in zip(need, cand.kernel_scratch)):
                more = [max(b, have) for b, (_, have) in zip(need, cand.kernel_scratch)]
                cand = make_plan(cand.ops, cand.layers, cand.grid, more)
                cand = cands[i] = adapt(cand) if adapt is not None else cand   # the ring again
        at_least.append(_at_least(g, scratch, inputs_in_arena, cand, adapt if low_ok else False))
    # Cheapest bound first, so that a good arena is known early and the candidates that cannot
    # beat it (nor the layer-by-layer plan) are not planned: the same choice as planning all
    # of them (ties go to the earlier candidate, as in candidate order), for less compile time.
    done, smallest = {}, None
    for i in sorted(range(len(cands)), key=lambda j: (at_least[j], j)):
        if forced is None and (at_least[i] >= base.arena_bytes or
                               (smallest is not None and at_least[i] > smallest * ARENA_SLACK)):
            break
        cand, arena = cands[i], None    # arena: planned by _low_scratch already, or below
        if cand.cache is not None and cand.bands and band_scratch is not None and low_ok:
            # the largest kernel scratch sets the stage's: a variant with less (_low_scratch)
            cand, why, arena = _low_scratch(arena_of, cand, band_scratch(cand), band_scratch, adapt,
                                            growth, max_recompute)
            cands[i] = cand
            lows.update({id(cand): why} if why else {})
        if arena is None:
            arena = arena_of(cand)
        done[i] = arena
        smallest = arena if smallest is None else min(smallest, arena)
    if done:
        # Within ARENA_SLACK of the smallest arena, the fewest estimated instructions (a
        # recomputing 4x6 grid beat a cached row-band stage of the same layers by 576 of 40,896
        # bytes, Edge Impulse FOMO, at 20% estimated growth against 7%, and measured 1.76x);
        # equal growth, the smaller arena (the person detector with row-band input at 110%: a
        # cached stage with a low-scratch depthwise ties a recomputing 6x4 grid).
        near = [i for i in done if done[i] <= smallest * ARENA_SLACK]
        i = min(near, key=lambda j: (_pct(growth, cands[j]) or 0.0, done[j], j))
        best = (done[i], cands[i])
    for i, cand in enumerate(cands):
        tried.append({"layers": len(cand.ops), "grid": list(cand.grid), "arena_bytes": done.get(i),
                      "patch_buffer_bytes": cand.scratch_bytes, "extra_macs": cand.extra_macs,
                      "halo": "cached" if cand.cache is not None else "recomputed",
                      "est_growth_percent": _pct(growth, cand)})
        if i not in done:   # not planned: its arena is at least this, no better than the choice
            tried[-1]["arena_bytes_at_least"] = at_least[i]
    info = {"mode": "auto", "max_recompute_percent": max_recompute, "arena_bytes_before": base.arena_bytes,
            "bound_on": "estimated instructions" if est_before is not None and growth is not None else "MACs",
            "model_macs_before": total_macs, "est_instructions_before": est_before,
            "candidates": tried, "refused": refused, "chosen": None}
    if forced is not None:
        info["mode"] = "forced"
    elif best is None or best[0] >= base.arena_bytes:
        info["arena_bytes_after"] = base.arena_bytes
        return None, info
    info["chosen"] = summary(best[1])
    if best[1].bands:   # row bands: halos recomputed or cached
        info["chosen"].update(cache_summary(best[1]))
        if id(best[1]) in lows:
            info["chosen"]["low_scratch"] = lows[id(best[1])]
    info["arena_bytes_after"] = best[0]
    info["extra_macs_percent"] = round(100.0 * best[1].extra_macs / max(total_macs, 1), 2)
    pct = _pct(growth, best[1])
    info["est_growth_percent"] = pct
    if pct is not None and est_before:
        info["est_instructions_after"] = int(round(est_before * (1 + pct / 100.0)))
        info["est_instruction_ratio"] = round(1 + pct / 100.0, 3)
    return best[1], info


def _arena(g, scratch, inputs_in_arena: bool, memo: dict, cand: PatchPlan) -> int:
    """The arena of g with cand as its first op. The plan sees of the stage only its length,
    its scratch bytes and its output's shift (collapse, _shifted, lifetimes.py), so stages
    alike in those share one plan (memo)."""
    key = (len(cand.ops), cand.scratch_bytes, cand.shift)
    if key not in memo:
        memo[key] = plan_memory(collapse(g, cand), _shifted(scratch, len(cand.ops), cand),
                                inputs_in_arena=inputs_in_arena).arena_bytes
    return memo[key]


def _at_least(g, scratch, inputs_in_arena: bool, cand: PatchPlan, adapt) -> int:
    """A lower bound on the arena with cand as the first op, without placing anything: the
    bytes live at the stage's step (its scratch, its output, its input in the arena unless the
    output is shifted over it), which no placement can share. adapt (not False): cand may get
    a low-scratch variant (_low_scratch), so the bound takes its cached plan with no kernel
    scratch at all (adapted as the planner adapts it, None for no adaptation)."""
    if adapt is not False and cand.cache is not None:
        bare = make_cached_plan(cand.ops, cand.layers, cand.cache.steps, [0] * len(cand.ops))
        if bare is not None:
            bare = adapt(bare) if adapt is not None else bare
            cand = bare if bare.scratch_bytes < cand.scratch_bytes else cand
    return live_bytes(buffers(collapse(g, cand), _shifted(scratch, len(cand.ops), cand),
                              inputs_in_arena, frozenset()), 0)


def _low_scratch(arena_of, cand: PatchPlan, need: list[int], band_scratch,
                 adapt, growth, max_recompute: float) -> tuple[PatchPlan, list[dict], int]:
    """A cached stage's scratch block ends with the largest of its layers' kernel scratch (one
    kernel runs at a time). While that largest user is a depthwise layer, try its low-scratch
    variant (kernels/depthwise.py "low_scratch": no sign-extended rows, more instructions);
    keep it when the whole arena shrinks and the estimated growth stays within the bound.
    Returns (the stage, per layer switched: what it saved and cost, for report.md, the
    stage's arena). arena_of(stage): the whole arena with that stage (_arena)."""
    why = []
    arena = arena_of(cand)
    while True:
        k = max(range(len(need)), key=lambda j: need[j])
        if need[k] == 0 or cand.layers[k].kind != "DEPTHWISE_CONV_2D" or k in cand.low_scratch:
            return cand, why, arena
        low = cand.low_scratch | {k}
        need2 = band_scratch(dataclasses.replace(cand, low_scratch=low))
        if need2[k] >= need[k]:   # the kernel has no variant with less scratch here
            return cand, why, arena
        var = make_cached_plan(cand.ops, cand.layers, cand.cache.steps, need2)
        var = dataclasses.replace(var, low_scratch=low)
        var = adapt(var) if adapt is not None else var
        pct = growth(var)
        arena2 = arena_of(var)
        if arena2 >= arena or pct > max_recompute:
            return cand, why, arena
        why.append({"layer": cand.ops[k].name.split(";")[0], "index": k,
                    "scratch_bytes": [need[k], need2[k]], "arena_bytes": [arena, arena2],
                    "est_growth_percent": [round(growth(cand), 2), round(pct, 2)]})
        cand, need, arena = var, need2, arena2


def _pct(growth, cand: PatchPlan) -> float | None:
    est = growth(cand) if growth is not None else None
    return None if est is None else round(est, 2)


def placed_overlap(g, plan: Plan, stage: PatchPlan) -> int:
    """Bytes the stage output shares with the stage input in the final plan (the "shift"
    layout, patch/stage.py out_shift), 0 when the planner kept them apart."""
    a, b = plan.tensors[stage.tensors[0]], plan.tensors[stage.tensors[-1]]
    if a.base != "arena" or b.base != "arena":
        return 0
    lo, hi = max(a.offset, b.offset), min(a.offset + a.size, b.offset + b.size)
    return max(hi - lo, 0)
