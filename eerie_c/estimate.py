"""Compile-time estimate of the instructions each layer executes on a Cortex-M or RISC-V
target: instructions = per_mac x MACs + per_out x output elements (+ per_in x input elements)
+ a fixed call cost, with coefficients fitted to QEMU counts (estimate_costs.py says on what,
and how close they come); pools from their kernels' own loads and stores (estimate_pools.py);
patch stages from their tiles, bands or cached steps. An estimate, not a measurement; the host
target has none.
"""
from __future__ import annotations

import math

# the tables, also read as estimate.X by the planner's tests and bench/'s fitting scripts
from .estimate_costs import (BAND_SCALAR, BAND_STEP, CACHED_STEP, COSTS, DW_HALO,  # noqa: F401
                             FAMILY, GENERIC, MOVE_COST, RV32_FPU, STAGE_FEATURES, STAGE_FIT,
                             V6M_SCALE)
from .estimate_pools import pool_cost


def stage_features(stage) -> list[float]:
    """The per-tile work of a patch stage (patch/stage.py PatchPlan, duck-typed), in the order
    of STAGE_FEATURES."""
    f = [0.0] * len(STAGE_FEATURES)
    for regions in stage.tiles:
        for lay, (_, _, rows, cols) in zip(stage.layers, regions):
            pix = rows * cols
            base = 3 if lay.kind == "DEPTHWISE_CONV_2D" else 0
            f[base] += pix * lay.macs_per_pixel
            f[base + 1] += pix * lay.out_c
            f[base + 2] += pix
            f[6] += 1
    return f


def estimate_stage(stage, in_elements: int, out_elements: int, target: str) -> int | None:
    """A patch stage as run (halos included): the per-layer fit where there is one, else the
    family's cost per patched MAC."""
    if getattr(stage, "bands", False):   # each layer's own kernel per row band (patch/band_kernels.py)
        return _bands(band_work(stage), target)
    fit = _stage_fit(stage_features(stage), target)
    if fit is None:
        return estimate_layer("PATCH_STAGE", stage.patched_macs, in_elements, out_elements, False, target)
    return fit


def band_work(stage) -> list[list]:
    """A stage of row bands as the layer kernels run it: per band, its moves of kept rows
    (cached halos) and per layer one kernel call (_band_call; report.json keeps the list, so
    the report's estimate is the planner's)."""
    work = []
    cache = getattr(stage, "cache", None)
    for b, regions in enumerate(stage.tiles):
        if cache is not None:   # cached halos: the moves of the kept rows (patch/cache.py)
            work += [["MOVE", 0, 0, nbytes] for _, nbytes in cache.moves[b] if nbytes]
        for k, region in enumerate(regions):
            if region[2]:   # a band that computes no row of this layer skips its kernel
                work.append(_band_call(stage, k, region))
    return work


def layer_band_work(stage, k: int) -> list[list]:
    """band_work's kernel calls of layer k alone (bench/profile_stage.py)."""
    return [_band_call(stage, k, regions[k]) for regions in stage.tiles if regions[k][2]]


def _band_call(stage, k: int, region) -> list:
    """[kind, MACs, output elements, input elements (the rows its window reads, and a skip
    operand's region)] of one kernel call; with cached halos [kind, MACs, outputs, the whole
    layer's input elements times share, share, halo input elements], share the call's part of
    the layer's output rows (see _bands)."""
    lay = stage.layers[k]
    _, _, rows, cols = region
    outs = rows * cols * lay.out_c
    low = getattr(stage, "low_scratch", frozenset())
    kind = lay.kind + "_LOW" if k in low and lay.kind == "DEPTHWISE_CONV_2D" else lay.kind
    macs = rows * cols * lay.macs_per_pixel
    _, _, in_rows, in_cols = lay.needs(region)
    skip = (getattr(stage, "skips", None) or [None] * len(stage.layers))[k] is not None
    if getattr(stage, "cache", None) is not None:
        share = rows / lay.out_h
        whole = lay.in_h * lay.in_w * lay.in_c + (lay.out_h * lay.out_w * lay.out_c if skip else 0)
        ins = round(whole * share, 3)
        # a stride-1 depthwise kernel on DSP cores sign-extends every input row it reads, so
        # a call pays again for the halo rows the previous call extended (DW_HALO)
        halo = in_rows * in_cols * lay.in_c - ins if kind == "DEPTHWISE_CONV_2D" and lay.sh == 1 else 0
        return [kind, macs, outs, ins, round(share, 6), round(halo, 3)]
    ins = in_rows * in_cols * lay.in_c + (outs if skip else 0)   # a fused ADD's or binary op's skip
    return [kind, macs, outs, ins]


def _bands(work: list, target: str) -> int | None:
    """Row bands, per band and layer: halos recomputed, the layer's estimate over the band's
    rows (its MACs, outputs, the input rows its window reads and its fixed cost: the call) plus
    BAND_STEP[family] for what a call over a band costs beyond that. Halos cached (entries with
    a share and a halo): the layer's whole estimate in proportion to the rows the call
    computes, its fixed cost included, plus CACHED_STEP[family] per call, DW_HALO per halo
    input element of a stride-1 depthwise, the kept rows' moves (MOVE_COST) and, for a
    low-scratch depthwise, its kernel's own costs (DEPTHWISE_CONV_2D_LOW). Both: BAND_SCALAR
    per output of a clamp that runs scalar over a band."""
    total = 200
    fam = FAMILY.get(target)
    cached = any(len(w) == 6 for w in work)
    step = (CACHED_STEP if cached else BAND_STEP).get(fam, 0)
    per_byte, per_move = MOVE_COST.get(fam, MOVE_COST["dsp"])
    scalar = BAND_SCALAR.get(fam, {})
    for kind, macs, outs, *ins in work:   # older reports: no input elements
        if kind == "MOVE":   # memmove of kept halo rows: per byte, and the call
            total += ins[0] * per_byte + per_move
            continue
        share, halo = (ins[1], ins[2]) if len(ins) > 2 else (1.0, 0)
        n = estimate_layer(kind, macs, ins[0] if ins else 0, outs, False, target, share)
        if n is None:
            return None
        total += n + step + DW_HALO.get(fam, 0) * halo + scalar.get(kind, 0) * outs
    return int(round(total, -1))


def _stage_fit(features: list[float], target: str) -> int | None:
    fit = STAGE_FIT.get(FAMILY.get(target))
    if fit is None:
        return None
    return int(round(sum(c * v for c, v in zip(fit, features)) + 200, -1))


def _elements(tensors: list[dict]) -> int:
    return sum(math.prod(t["shape"]) for t in tensors)


def estimate_op(op: dict, target: str) -> int | None:
    """One layer of report.json's "ops" on `target`; None where there is no calibration."""
    is_float = any(str(t.get("dtype", "")).startswith("float") for t in op["inputs"] + op["outputs"])
    if op.get("stage_bands") is not None:   # a patch stage of row bands
        return _bands(op["stage_bands"], target)
    if op.get("stage_features") is not None:   # a patch stage: the per-layer fit where there is one
        fit = _stage_fit(op["stage_features"], target)
        if fit is not None:
            return fit
    return estimate_layer(op["kind"], op["macs"], _elements(op["inputs"]), _elements(op["outputs"]),
                          is_float, target, work=op)


def _pool(kind: str, pool: dict, target: str) -> int | None:
    """A pool from its kernel's vector loads and stores (estimate_pools.py)."""
    fam = FAMILY.get(target)
    scale = V6M_SCALE if fam == "v6m" else 1.0
    n = pool_cost("v7m" if fam == "v6m" else fam, kind, pool)
    return None if n is None else int(round(n * scale, -1))


def estimate_layer(kind: str, macs: int, in_elements: float, out_elements: int, is_float: bool,
                   target: str, share: float = 1.0, work: dict | None = None) -> int | None:
    """One layer from its kind, MACs and element counts (all inputs, all outputs); share: the
    part of the layer a call computes (a cached stage's step), which takes that part of the
    fixed cost too; work: the kernel's own counts (Lowered.work: a pool's "pool")."""
    fam = FAMILY.get(target)
    if fam is None:
        return None
    if work and work.get("pool") and not is_float and share == 1.0:
        n = _pool(kind, work["pool"], target)
        if n is not None:
            return n
    scale = V6M_SCALE if fam == "v6m" else 1.0
    fam = "v7m" if fam == "v6m" else fam
    if fam == "rv32":
        key = (("rv32f" if target in RV32_FPU else "rv32soft"), True) if is_float else (fam, False)
    else:
        key = (("soft" if fam == "v7m" else "fpu"), True) if is_float else (fam, False)
    if kind.endswith("_LOW") and kind not in COSTS[key]:   # no low-scratch variant there:
        kind = kind[:-4]                                    # the layer's own kernel runs
    per_mac, per_out, per_in, fixed = COSTS[key].get(kind, GENERIC[key])
    n = per_mac * macs + per_out * out_elements + per_in * in_elements + fixed * share
    return int(round(n * scale, -1))


def add_estimates(report: dict) -> None:
    """Fill "est_instructions" per layer and in total (None for an uncalibrated target)."""
    total = 0
    for op in report["ops"]:
        op["est_instructions"] = estimate_op(op, report["target"])
        total = None if total is None or op["est_instructions"] is None else total + op["est_instructions"]
    report["est_instructions"] = total if report["ops"] else None


def core_specific(report: dict) -> dict | None:
    """With the generic --target cortex-m (ARMv7-M code for any M3 or later: no DSP, soft
    float), the same layers estimated for cortex-m4, whose DSP kernels and FPU an M4 / M7 / M33
    also runs: what the core-specific target would save (report.md and the CLI say it). None
    for any other target, or where a layer has no estimate."""
    if report.get("target") != "cortex-m" or not report.get("est_instructions"):
        return None
    per_op = [estimate_op(op, "cortex-m4") for op in report["ops"]]
    if any(n is None for n in per_op) or not sum(per_op):
        return None
    return {"target": "cortex-m4", "est_instructions": sum(per_op),
            "times_fewer": round(report["est_instructions"] / sum(per_op), 1)}


def stage_growth(g, lowered, target: str):
    """(growth, estimate of the model layer by layer) for the patch planner (patch/choice.py):
    growth(stage) is the estimated instruction growth of the whole model, in percent, when the
    stage replaces its prefix: the stage as run (per-tile kernel, halos included) minus the
    prefix's layer-by-layer layers. (None, None) for a target without an estimate."""
    def elements(tids):
        return sum(math.prod(g.t(t).shape) for t in tids if t is not None)

    def is_float(low):
        return any(str(g.t(t).dtype).startswith("float") for t in list(low.inputs) + list(low.outputs)
                   if t is not None)
    step_of = {id(op): k for k, op in enumerate(g.ops)}
    per_step = {}
    for low in lowered:
        per_step[step_of[id(low.op)]] = estimate_layer(low.op.kind, low.macs, elements(low.inputs),
                                                       elements(low.outputs), is_float(low), target,
                                                       work=low.work)
    if not per_step or any(v is None for v in per_step.values()):
        return None, None
    before = sum(per_step.values())

    def growth(stage) -> float:
        n = len(stage.ops)
        prefix = sum(per_step.get(k, 0) for k in range(n))
        run = estimate_stage(stage, elements(stage.tensors[:1]), elements(stage.tensors[-1:]), target)
        return 100.0 * (run - prefix) / max(before, 1)
    return growth, before
