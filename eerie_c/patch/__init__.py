"""Patch-based execution (MCUNetV2's idea, docs/patches.md): run a prefix of the graph tile by
tile, so that its high-resolution intermediates never exist whole, when that makes the arena
smaller. One feature with one entry point for the pipeline, apply_patches; the rest of it:

  stage.py         a stage's geometry (PatchPlan: prefix, grid, tiles, patch buffers) and the
                   candidate stages of a graph
  ops.py           the window geometry of the layers without weights a stage takes (pools, PAD,
                   element-wise)
  cache.py         row bands with cached halos: every row of every layer computed once
  rows.py          --input-rows: the stage input arrives in row bands into a ring of rows
  choice.py        which stage, if any: each candidate planned in full, the smallest arena wins
  kernel.py        the C of a stage (the lowering of PATCH_STAGE): the per-tile kernel
  band_kernels.py  a stage of row bands run by each layer's own kernel
  proof.py         the independent check of a planned stage; cache_proof.py and rows_proof.py
                   check the cached-halo steps and the ring of input rows for it

Imports go one way, into plan/ and kernels/: the planner compares whole arenas with the arena
planner (plan/arena.py) and lowers stages with the kernels. The arena proof (plan/proof.py) calls
proof.py's prove_shift for a stage whose output overlaps its input; proof.py, cache_proof.py and
rows_proof.py import nothing of eerie_c but errors.py (an independent check must not use the
planner anyway), so that call brings no cycle.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import EerieError
from ..estimate import stage_growth
from ..kernels import LowerCtx, Lowered, lower_graph
from ..ir import Graph
from ..plan.arena import Plan, plan_memory, scratch_by_step
from .band_kernels import band_scratch
from .choice import choose_patches, collapse, placed_overlap
from .kernel import lower_patch_stage
from .proof import prove_patches  # noqa: F401 (the pipeline proves every planned stage)
from .rows import MAX_GRID_ROWS, MODES as INPUT_MODES, check_graph as check_rows_graph, summary as rows_summary, with_rows

# --patch: "auto" unless the caller says "off" (docs/patches.md: every stage the planner takes on
# the bench models costs 1.00-1.07x the instructions for up to 0.40x less arena)
PATCH_MODES = ("auto", "off")
DEFAULT_PATCH = "auto"


def check_options(patch, max_recompute: float, input_mode: str) -> None:
    """--patch, --max-recompute and the input mode, before any work. patch may also be a
    forced stage, a (layers, (rows, cols)[, halo]) tuple (tests, experiments)."""
    if not isinstance(patch, tuple) and patch not in PATCH_MODES:
        raise EerieError(f"--patch must be auto or off, not {patch!r}")
    if not 0 <= max_recompute <= 1000:
        raise EerieError(f"--max-recompute must be a percentage between 0 and 1000, not {max_recompute}")
    if input_mode not in INPUT_MODES:
        raise EerieError(f"input_mode must be one of {', '.join(INPUT_MODES)}, not {input_mode!r}")
    if input_mode == "rows" and patch == "off":
        raise EerieError("--input-rows needs a patch stage: not with --patch off")


def check_rows_input(g: Graph) -> None:
    """--input-rows on the graph after the passes: fixed input sizes and one image input whose
    rows a stage can stream (rows.py check_graph)."""
    if getattr(g, "dynamic_batch", None) or getattr(g, "dynamic_dims", None) is not None:
        raise EerieError("--input-rows needs fixed input sizes (no dynamic batch or dimensions)")
    check_rows_graph(g)


@dataclass
class PatchOutcome:
    """The compile after apply_patches: with a stage chosen, the graph with its prefix collapsed
    into one PATCH_STAGE op, lowered and planned again; else what was passed in."""
    graph: Graph
    lowered: list[Lowered]
    ctx: LowerCtx
    scratch: dict[int, tuple[str, int]]   # op step -> (kernel function, scratch bytes)
    plan: Plan
    patches: dict                          # report.json's "patches"


def apply_patches(g: Graph, lowered: list[Lowered], ctx: LowerCtx, scratch: dict[int, tuple[str, int]],
                  plan: Plan, *, target: str, optimize: str, patch, max_recompute: float,
                  inputs_in_arena: bool, rows: bool) -> PatchOutcome:
    """Choose a patch stage for the lowered, layer-by-layer planned graph (choice.py) within
    --max-recompute percent more estimated instructions (estimate.py stage_growth), and if one
    wins, collapse its prefix, lower the stage (kernel.py) and plan the arena again. patch:
    "auto", "off", or a forced stage tuple; rows: --input-rows (a stage must be chosen, with a
    ring of input rows in its scratch). No stage for a dynamic batch or dimensions."""
    patching = None
    if patch != "off" and not getattr(g, "dynamic_batch", None) \
            and getattr(g, "dynamic_dims", None) is None:
        forced = patch if isinstance(patch, tuple) else None
        growth, est_before = stage_growth(g, lowered, target)   # the bound is on instructions
        memo = {}   # band kernels' scratch, shared by every stage the planner considers
        chosen, patching = choose_patches(g, scratch, plan, inputs_in_arena, max_recompute,
                                          int(sum(low.macs for low in lowered)), forced,
                                          growth, est_before,
                                          lambda st, g=g: band_scratch(st, g, target, optimize, memo),
                                          adapt=with_rows if rows else None,
                                          **({"max_grid": MAX_GRID_ROWS} if rows else {}))
        if rows and chosen is None:
            raise EerieError("--input-rows: no patch stage was chosen for this model ("
                             + ("none beats the layer-by-layer arena" if patching["candidates"]
                                else "no prefix fits --max-recompute") + "), so rows cannot stream")
        if chosen is not None:   # the prefix becomes one op, lowered and planned again
            g = collapse(g, chosen)
            lowered, ctx = lower_graph(g, target, {"PATCH_STAGE": lower_patch_stage}, optimize)
            scratch = scratch_by_step(g, lowered)
            plan = plan_memory(g, scratch, inputs_in_arena=inputs_in_arena)
            patching["chosen"]["output_over_input_bytes"] = placed_overlap(g, plan, chosen)
            if rows:
                patching["input_rows"] = rows_summary(chosen)
    return PatchOutcome(g, lowered, ctx, scratch, plan, patching or {"mode": patch, "chosen": None})
