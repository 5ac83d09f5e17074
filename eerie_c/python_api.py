"""`eerie_c.compile` / `eerie_c.run` for in-memory programs: an `nn.Module` (exported here with
torch.export), a `torch.export.ExportedProgram`, or a model file path (.tflite, .pt2), which
goes through pipeline.compile_model / runner.run_model unchanged. `eerie_c.compile` and
`eerie_c.run` (the package's __init__) call these."""
from __future__ import annotations

import tempfile
from pathlib import Path

from .errors import EerieError
from .dynamic_io import note_dynamic
from .frontend.torch import DEFAULT_MAX_ITERATIONS, export_program, load_torch
from .pipeline import DEFAULT_PATCH, board_and_target, compile_graph, compile_model, finish
from .runner import run_dynamic, run_model


def _is_path(model) -> bool:
    return isinstance(model, (str, Path))


def _object_name(model) -> str:
    import re
    if hasattr(model, "graph_signature"):   # an ExportedProgram
        return "program"
    s = re.sub(r"(?<!^)(?=[A-Z])", "_", type(model).__name__).lower()
    return re.sub(r"[^0-9a-z_]+", "_", s).strip("_") or "model"   # made valid by names.pick_name


def _name(model, name, board) -> str:
    """--name as given (checked), else one made from the module's class name; neither may be
    a file name the generated project uses (names.py)."""
    from .names import board_ld_stem, check_name, pick_name
    ld = board_ld_stem(board)
    return check_name(name, ld) if name else pick_name(_object_name(model), ld)


def compile(model, example_args=None, target: str | None = None, board=None, out_dir=None,
            name: str | None = None, max_iterations: int | None = None,
            dynamic_shapes=None, arena_budget: int | None = None, stack_budget: int | None = None,
            patch: str = DEFAULT_PATCH, max_recompute: float = 20.0):
    """Compile to C. Returns a pipeline.CompileResult (files, report, graph); with out_dir, writes
    NAME.c / .h / .mk, report.json, report.md and memory.svg there (and a firmware project
    with a board). dynamic_shapes (as torch.export takes them): dims declared with
    `torch.export.Dim(name, max=N)` compile for the maximum; NAME_invoke takes the actual sizes
    as int arguments (a Dim on dim 0 of every input runs sample by sample: `int batch`).
    arena_budget / stack_budget (bytes): as for model files, a compile whose arena or proven
    stack bound exceeds one fails with a one-line error before anything is written.
    patch ("auto" or "off") / max_recompute: as --patch / --max-recompute (docs/patches.md)."""
    if _is_path(model):
        if example_args is not None:
            raise EerieError("example_args is only for nn.Module programs, not model files")
        return compile_model(model, out_dir, target=target, name=name, board=board,
                                 max_iterations=max_iterations, arena_budget=arena_budget,
                                 stack_budget=stack_budget, patch=patch, max_recompute=max_recompute)
    brd, target = board_and_target(board, target)
    name = _name(model, name, brd)
    g = load_torch(model, example_args, name, max_iterations or DEFAULT_MAX_ITERATIONS,
                   dynamic_shapes)
    res = compile_graph(g, name, target, source=f"{type(model).__name__} (torch.export)",
                        inputs_in_arena=brd is not None,   # as for a .pt2 (pipeline._load_and_compile)
                        arena_budget=arena_budget, stack_budget=stack_budget,
                        patch=patch, max_recompute=max_recompute)
    note_dynamic(res)
    return finish(res, brd, out_dir)


def _has_dynamic_inputs(model) -> bool:
    """An ExportedProgram with a symbolic size on an input (exported with dynamic_shapes): it
    runs like a module given dynamic_shapes (a list of inferences)."""
    if not hasattr(model, "graph_signature"):
        return False
    users = set(model.graph_signature.user_inputs)
    for n in model.graph_module.graph.nodes:
        if n.op == "placeholder" and n.name in users:
            if any(not isinstance(d, int) for d in getattr(n.meta.get("val"), "shape", ())):
                return True
    return False


def run(model, inputs, example_args=None, target: str | None = None, board=None, out_dir=None,
        name: str | None = None, timeout: float | None = None,
        max_iterations: int | None = None, dynamic_shapes=None,
        arena_budget: int | None = None, stack_budget: int | None = None,
        patch: str = DEFAULT_PATCH, max_recompute: float = 20.0):
    """Compile, build and run (host, or a board in QEMU); returns (outputs, report). An in-memory
    program is exported and saved as a .pt2 first, then run like a file. With dynamic sizes
    (dynamic_shapes, or an ExportedProgram exported with them), `inputs` is a list of
    inferences, each a list of arrays at that inference's sizes (any up to the maxima); outputs
    come back the same way, from one compile. An ExportedProgram takes no example_args."""
    ep_dynamic = _has_dynamic_inputs(model)
    if dynamic_shapes is not None or ep_dynamic:
        if _is_path(model):
            raise EerieError("dynamic_shapes is for nn.Module programs; a .pt2 file keeps its own")
        brd, target = board_and_target(board, target)
        res = compile(model, example_args, target=target, name=name, max_iterations=max_iterations,
                      dynamic_shapes=dynamic_shapes, arena_budget=arena_budget, stack_budget=stack_budget,
                      patch=patch, max_recompute=max_recompute)
        if getattr(res.graph, "dynamic_dims", None) is None:
            raise EerieError("dynamic_shapes gave no dynamic dimension")
        return run_dynamic(res, inputs, brd, out_dir, timeout)
    if _is_path(model):
        return run_model(model, inputs, target=target, out_dir=out_dir, name=name, board=board,
                             timeout=timeout, max_iterations=max_iterations,
                             arena_budget=arena_budget, stack_budget=stack_budget,
                             patch=patch, max_recompute=max_recompute)
    import torch
    ep = export_program(model, example_args)
    name = _name(model, name, board)
    with tempfile.TemporaryDirectory(prefix="eerie-pt2-") as d:
        path = Path(d) / f"{name}.pt2"
        torch.export.save(ep, str(path))
        return run_model(path, inputs, target=target, out_dir=out_dir, name=name,
                             board=board, timeout=timeout,
                             max_iterations=max_iterations or DEFAULT_MAX_ITERATIONS,
                             arena_budget=arena_budget, stack_budget=stack_budget,
                             patch=patch, max_recompute=max_recompute)
