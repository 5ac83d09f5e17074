"""The compile pipeline: frontend -> passes -> kernel lowering -> memory plan and its proof ->
C emission -> verification of the C, then the report, and with a board the firmware project
(runner.py builds and runs what this makes)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .version import __version__
from .emit import emit_model
from .emit.c import io_info
from .frontend import load_model
from .ir import Graph, verify_graph
from .kernels import const_bytes, lower_graph
from .passes import run_passes
from .patch import DEFAULT_PATCH, apply_patches, check_options, check_rows_input, prove_patches
from .plan import plan_memory, prove_plan, scratch_by_step
from .plan.memory_map import memory_map
from .toolchain.targets import get_target
from .verify import verify_generated
from .budgets import check_budgets, check_limits, record_board_budget
from .estimate import add_estimates, band_work, core_specific, stage_features
from .progress import stage
from .dynamic_io import dynamic_firmware, note_dynamic
from .names import check_sources, merge_files, model_name
from .output import write_files


@dataclass
class CompileResult:
    name: str
    target: str
    files: dict[str, str]
    report: dict
    graph: Graph
    out_dir: Path | None = None
    extra: dict = field(default_factory=dict)


def compile_graph(g: Graph, name: str, target: str = "host", source: str = "model",
                  arena_budget: int | None = None, stack_budget: int | None = None,
                  inputs_in_arena: bool = False, before_verify=None, patch: str = DEFAULT_PATCH,
                  max_recompute: float = 20.0, optimize: str = "balanced",
                  input_mode: str = "whole") -> CompileResult:
    """Frontend output -> verified C files and report. Every compile proves the arena plan,
    the generated C (no allocation, VLAs, recursion, function pointers, unbounded loops) and
    a worst-case stack bound from the target compiler's own frame sizes. before_verify:
    called with the result so far (files and arena known, nothing verified) as the
    verification starts; what it returns is kept in the result's extra["before_verify"].
    patch: "auto" lets the planner run a prefix of the graph tile by tile when that makes the
    arena smaller, growing the model's estimated instructions (per-tile kernel and recomputed
    halos, estimate.py) by at most max_recompute percent (patch/choice.py); a (layers, (rows, cols)) tuple forces that stage (tests, experiments).
    input_mode "rows": the input arrives in row bands (NAME_input_rows) into a ring of rows inside
    the patch stage's scratch, never whole in RAM (patch/rows.py); needs a patch stage."""
    check_options(patch, max_recompute, input_mode)
    rows = input_mode == "rows"
    tgt = get_target(target)
    with stage(f"passes and kernel lowering: {len(g.ops)} ops"):
        g = run_passes(g)
        lowered, ctx = lower_graph(g, target, optimize=optimize)
    scratch = scratch_by_step(g, lowered)
    with stage("memory plan and its proof"):
        # inputs_in_arena: the inputs get arena slots (NAME_inputK_buffer()), not caller
        # buffers; not for a dynamic batch, whose arena holds one sample
        if rows:
            check_rows_input(g)
        in_arena = bool(inputs_in_arena and not rows and not getattr(g, "dynamic_batch", None)
                        and getattr(g, "dynamic_dims", None) is None)
        plan = plan_memory(g, scratch, inputs_in_arena=in_arena)
        # patch-based execution (patch/): maybe the first layers as one stage, planned again
        patched = apply_patches(g, lowered, ctx, scratch, plan, target=target, optimize=optimize,
                                patch=patch, max_recompute=max_recompute, inputs_in_arena=in_arena,
                                rows=rows)
        g, lowered, ctx, scratch, plan = (patched.graph, patched.lowered, patched.ctx,
                                          patched.scratch, patched.plan)
        flash_consts = sum(const_bytes(c) for c in ctx.consts)
        check_limits(name, tgt, plan.arena_bytes, flash_consts, plan.state_bytes)
        proof = prove_plan(g, plan, {n: s for s, (n, _) in scratch.items()})
        patch_proof = prove_patches(g, plan, {n: s for s, (n, _) in scratch.items()})
        verify_graph(g, "planning")
    step_of = {id(op): k for k, op in enumerate(g.ops)}
    with stage("C emission"):
        files = emit_model(g, lowered, ctx.consts, plan, name, target, source, tgt.cflags,
                           rows=rows)
    report = {
        "eerie_c_version": __version__, "model": source, "name": name, "target": target,
        "optimize": optimize,
        "arena_bytes": plan.arena_bytes, "flash_bytes": flash_consts, "constant_bytes": flash_consts,
        "inputs_in_arena": plan.inputs_in_arena,
        "state_bytes": plan.state_bytes,   # variable tensors: static, outside the arena
        "macs": int(sum(low.macs for low in lowered)),
        "inputs": _io_report(g, g.inputs, plan), "outputs": _io_report(g, g.outputs, plan),
        "ops": [_op_report(g, low, plan, step_of[id(low.op)]) for low in lowered],
        "memory_plan": memory_map(g, plan),
        "verified": [proof] + ([patch_proof] if patch_proof else []),
    }
    report["patches"] = patched.patches
    if g.quantized_from:   # a PT2E program: int8 / float ops and its float islands
        from .passes.fold_qdq import quantization_report
        report["quantization"] = quantization_report(g)
    if g.notes:   # what the frontend normalised in the file instead of refusing it
        report["notes"] = list(g.notes)
    add_estimates(report)   # compile-time instruction estimate per layer (estimate.py)
    cs = core_specific(report)   # --target cortex-m: what cortex-m4 would save
    if cs is not None:
        report["core_specific"] = cs
    early = None
    if before_verify is not None:   # e.g. the firmware's other compiles (firmware_early.py)
        early = before_verify(CompileResult(name, target, files, {"arena_bytes": plan.arena_bytes}, g))
    with stage(f"verification: C source proof, stack bound with {tgt.cc}"):
        checks, figures = verify_generated(name, files, tgt)
    report["verified"] += checks
    report.update(figures)
    sizes = figures.get("model_object_sizes")
    if sizes:
        # The model object holds code + constants (text) and the arena (bss).
        report["flash_bytes"] = sizes["text"] + sizes["data"]
        report["code_bytes"] = max(sizes["text"] - flash_consts, 0)
        report["static_data_bytes"] = max(sizes["data"] + sizes["bss"] - plan.arena_bytes, 0)
    else:
        report["static_data_bytes"] = plan.state_bytes
    # flash_bytes becomes the whole firmware's after a board run; this stays the model's
    report["model_flash_bytes"] = report["flash_bytes"]
    report["ram_bytes"] = plan.arena_bytes + report["static_data_bytes"] + report["stack_bound_bytes"]
    budgets = check_budgets(report, arena_budget, stack_budget)
    if budgets is not None:
        report["verified"].append(budgets)
    res = CompileResult(name, target, files, report, g)
    res.extra["plan"] = plan
    if early is not None:
        res.extra["before_verify"] = early
    return res


def _io_report(g, tids, plan):
    out = []
    for info, tid in zip(io_info(g, tids), tids):
        t = g.t(tid)
        out.append({"name": t.label, "dtype": t.dtype, "shape": list(t.shape), "bytes": t.nbytes,
                    "scale": float(t.scale) if t.quant is not None else None,
                    "zero_point": t.zero_point if t.quant is not None else None})
    return out


def _op_report(g, low, plan, step):
    def where(tid):
        p = plan.tensors[tid]
        return {"tensor": g.t(tid).label, "shape": list(g.t(tid).shape), "bytes": g.t(tid).nbytes,
                "dtype": g.t(tid).dtype,
                "storage": p.base if p.base == "arena" else f"{p.base}{p.index}", "offset": p.offset}
    scratch = plan.scratch.get(low.fn_name) if low.scratch_bytes else None
    extra = dict(low.work)   # what the estimate reads beyond MACs (kernels' Lowered.work)
    if low.op.kind == "PATCH_STAGE":   # its estimate counts the per-tile work (estimate.py)
        stage = low.op.attrs["patch"]
        extra["stage_bands" if stage.bands else "stage_features"] = (
            band_work(stage) if stage.bands else stage_features(stage))
    return {**extra, "index": low.op.index, "step": step, "kind": low.op.kind, "name": low.op.name.split(";")[0],
            "function": low.fn_name, "macs": low.macs, "weight_bytes": low.const_bytes,
            "inputs": [where(t) for t in low.inputs], "outputs": [where(t) for t in low.outputs],
            "scratch_bytes": low.scratch_bytes,
            "scratch_offset": None if scratch is None else scratch.offset, "choice": low.choice}


def compile_model(model, out_dir=None, target: str | None = None, name: str | None = None,
                  board=None, arena_budget: int | None = None, stack_budget: int | None = None,
                  max_iterations: int | None = None, inputs_in_arena: bool | None = None,
                  patch: str = DEFAULT_PATCH, max_recompute: float = 20.0,
                  optimize: str = "balanced", input_mode: str = "whole") -> CompileResult:
    """Compile a model file; with out_dir, write NAME.c/.h/.mk and report.json there. With a
    board (name or .json path), also a firmware project (main.c, runtime/, linker script,
    Makefile) after checking that the model fits the board's flash and RAM. max_iterations
    bounds loops whose trip count is not proved at compile time (TFLite WHILE, torch
    while_loop; a run that needs more returns 1 from NAME_invoke). inputs_in_arena (default:
    on with a board, off without) plans the inputs inside the arena, where the application
    writes them through NAME_inputK_buffer() (docs/integration.md). patch / max_recompute:
    patch-based execution of the first layers (compile_graph). optimize (balanced, speed,
    size): what layers with a choice of kernel or weight format trade between instructions and
    flash (report.md shows each layer's choice)."""
    res, brd = _load_and_compile(model, target, name, board, arena_budget, stack_budget,
                                 max_iterations, inputs_in_arena, patch=patch, max_recompute=max_recompute,
                                 optimize=optimize, input_mode=input_mode)
    return finish(res, brd, out_dir)


def finish(res: CompileResult, brd, out_dir) -> CompileResult:
    """The end of every compile: the firmware project with a board, then the files written
    (with the reports) when there is an output directory."""
    if brd is not None:
        add_firmware(res, brd)
    if out_dir is not None:
        merge_files(res.files, report_files(res), "report")
        write_files(Path(out_dir), res.files)
        res.out_dir = Path(out_dir)
    return res


def _load_and_compile(model, target, name, board, arena_budget, stack_budget, max_iterations,
                      inputs_in_arena, patch: str = DEFAULT_PATCH,
                      max_recompute: float = 20.0, optimize: str = "balanced",
                      input_mode: str = "whole") -> tuple[CompileResult, object]:
    """What compile_model and run_model both start with: read the model file and compile it
    for `target` (by default the board's, else the host). Returns the result and the Board
    (None without one)."""
    path = Path(model)
    brd, target = board_and_target(board, target)
    name = model_name(path, name, brd)
    with stage(f"frontend: read {path.name}"):
        g = load_model(path, name, max_iterations)
    res = compile_graph(g, name, target, source=path.name, arena_budget=arena_budget,
                        stack_budget=stack_budget, patch=patch, max_recompute=max_recompute,
                        optimize=optimize, input_mode=input_mode,
                        inputs_in_arena=brd is not None if inputs_in_arena is None else inputs_in_arena,
                        before_verify=None if brd is None else _firmware_early(brd))
    if getattr(g, "dynamic_dims", None) is not None:
        note_dynamic(res)
    return res, brd


def _firmware_early(brd):
    """before_verify for a board compile: start the firmware stack bound's compiles of the
    sources other than the model, to run beside the verification (firmware_early.py)."""
    def start(partial: CompileResult):
        from .toolchain import firmware_early
        from .toolchain.firmware import firmware_files
        if getattr(partial.graph, "dynamic_dims", None) is not None:
            return None   # its project is made after the compile (dynamic_io.py)
        try:
            files = dict(partial.files)
            merge_files(files, firmware_files(partial, brd), "firmware project")
        except Exception:   # add_firmware reports it
            return None
        return firmware_early.start(files, partial.name)
    return start


def report_files(res: CompileResult) -> dict[str, str | bytes]:
    """report.json, report.md and the memory-plan picture (memory.svg, memory.png)."""
    from .memory_picture import memory_files
    from .report import render_markdown
    from .progress import note, stage
    mp = res.report["memory_plan"]
    note(f"memory plan: arena {mp['arena_bytes']:,} B in {len(mp['buffers'])} buffers, peak "
         f"{mp['peak_bytes']:,} B at step {mp['peak_step']}", detail=True)
    files: dict[str, str | bytes] = {
        "report.json": json.dumps(res.report, indent=2, sort_keys=True) + "\n",
        "report.md": render_markdown(res.report),
    }
    with stage("report.md and the memory-plan picture (memory.svg, memory.png)"):
        files.update(memory_files(mp, res.name))
    return files


def board_and_target(board, target: str | None) -> tuple:
    """(Board or None, target name): a board implies its own target unless told otherwise."""
    if board is None:
        return None, target or "host"
    from .toolchain.boards import Board, get_board, resolve_target
    brd = board if isinstance(board, Board) else get_board(board)
    return brd, resolve_target(brd, target).name


def add_firmware(res: CompileResult, brd) -> None:
    """Budget check (raises before anything is written), then the firmware project files and
    the proof that the whole firmware's stack fits the board's reserve."""
    from .toolchain.boards import check_budget
    from .toolchain.firmware import firmware_files, prove_firmware_stack
    res.report["board"] = brd.name
    res.report["budget"] = check_budget(brd, res.name, res.report)
    if getattr(res.graph, "dynamic_dims", None) is not None:
        merge_files(res.files, dynamic_firmware(res, brd), "firmware project")
    else:
        merge_files(res.files, firmware_files(res, brd), "firmware project")
    check_sources(res.files)   # make's stack/<stem>.o and implicit rules: no clashes
    with stage(f"firmware stack bound on {brd.name}"):
        res.report.update(prove_firmware_stack(res, brd, res.files, res.extra.pop("before_verify", None)))
    b = res.report["budget"]
    record_board_budget(res.report, brd.name, {
        "flash_bytes": b["board_flash_bytes"], "flash_needed_bytes": b["flash_bytes"],
        "ram_bytes": b["board_ram_bytes"], "ram_needed_bytes": b["ram_bytes"],
        "stack_reserve_bytes": b["stack_reserve_bytes"],
        "firmware_stack_bound_bytes": res.report["firmware_stack_bound_bytes"]})
