"""`eerie_c.compile` / `eerie_c.run` for in-memory programs: an `nn.Module` (exported here with
torch.export), a `torch.export.ExportedProgram`, or a model file path (.tflite, .pt2), which
goes through api.compile_model / api.run_model unchanged."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

from .errors import EerieError
from .frontend.torch import DEFAULT_MAX_ITERATIONS, max_iterations_for


def _is_path(model) -> bool:
    return isinstance(model, (str, Path))


def _object_name(model) -> str:
    import re
    if hasattr(model, "graph_signature"):   # an ExportedProgram
        return "program"
    s = re.sub(r"(?<!^)(?=[A-Z])", "_", type(model).__name__).lower()
    s = re.sub(r"[^0-9a-z_]+", "_", s).strip("_") or "model"
    return ("m_" + s) if s[0].isdigit() else s


def compile(model, example_args=None, target: str | None = None, board=None, out_dir=None,
            name: str | None = None, max_iterations: int = DEFAULT_MAX_ITERATIONS):
    """Compile to C. Returns an api.CompileResult (files, report, graph); with out_dir, writes
    NAME.c / .h / .mk and report.json there (and a firmware project with a board)."""
    from . import api
    if _is_path(model):
        if example_args is not None:
            raise EerieError("example_args is only for nn.Module programs, not model files")
        return api.compile_model(model, out_dir, target=target, name=name, board=board)
    from .frontend.torch import load_torch
    name = api.check_name(name) if name else _object_name(model)
    brd, target = api._board_and_target(board, target)
    g = load_torch(model, example_args, name, max_iterations)
    res = api.compile_graph(g, name, target, source=f"{type(model).__name__} (torch.export)")
    if brd is not None:
        api._add_firmware(res, brd)
    if out_dir is not None:
        res.files["report.json"] = json.dumps(res.report, indent=2, sort_keys=True) + "\n"
        api.write_files(Path(out_dir), res.files)
        res.out_dir = Path(out_dir)
    return res


def run(model, inputs, example_args=None, target: str | None = None, board=None, out_dir=None,
        name: str | None = None, timeout: float | None = None,
        max_iterations: int = DEFAULT_MAX_ITERATIONS):
    """Compile, build and run (host, or a board in QEMU); returns (outputs, report). An in-memory
    program is exported and saved as a .pt2 first, then run like a file."""
    from . import api
    if _is_path(model):
        return api.run_model(model, inputs, target=target, out_dir=out_dir, name=name, board=board,
                             timeout=timeout)
    from .frontend.torch import export_program
    import torch
    ep = export_program(model, example_args)
    name = api.check_name(name) if name else _object_name(model)
    with tempfile.TemporaryDirectory(prefix="eerie-pt2-") as d:
        path = Path(d) / f"{name}.pt2"
        torch.export.save(ep, str(path))
        with max_iterations_for(max_iterations):
            return api.run_model(path, inputs, target=target, out_dir=out_dir, name=name,
                                 board=board, timeout=timeout)
