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
            name: str | None = None, max_iterations: int = DEFAULT_MAX_ITERATIONS,
            dynamic_shapes=None):
    """Compile to C. Returns an api.CompileResult (files, report, graph); with out_dir, writes
    NAME.c / .h / .mk and report.json there (and a firmware project with a board).
    dynamic_shapes (as torch.export takes them): a `torch.export.Dim("batch", max=N)` on dim 0
    of every input gives NAME_invoke(..., int batch) for 0..N samples."""
    from . import api
    if _is_path(model):
        if example_args is not None:
            raise EerieError("example_args is only for nn.Module programs, not model files")
        return api.compile_model(model, out_dir, target=target, name=name, board=board)
    from .frontend.torch import load_torch
    name = api.check_name(name) if name else _object_name(model)
    brd, target = api._board_and_target(board, target)
    g = load_torch(model, example_args, name, max_iterations, dynamic_shapes)
    batch = getattr(g, "dynamic_batch", None)
    if batch is not None and brd is not None:
        raise EerieError("firmware projects for a dynamic batch are not supported yet (compile "
                         "without --board and call NAME_invoke(..., batch) from your own firmware)")
    res = api.compile_graph(g, name, target, source=f"{type(model).__name__} (torch.export)")
    if batch is not None:
        res.report["dynamic_batch"] = {"dim": 0, "max": batch,
                                       "note": "inputs/outputs shapes are per sample"}
    if brd is not None:
        api._add_firmware(res, brd)
    if out_dir is not None:
        res.files["report.json"] = json.dumps(res.report, indent=2, sort_keys=True) + "\n"
        api.write_files(Path(out_dir), res.files)
        res.out_dir = Path(out_dir)
    return res


def run(model, inputs, example_args=None, target: str | None = None, board=None, out_dir=None,
        name: str | None = None, timeout: float | None = None,
        max_iterations: int = DEFAULT_MAX_ITERATIONS, dynamic_shapes=None):
    """Compile, build and run (host, or a board in QEMU); returns (outputs, report). An in-memory
    program is exported and saved as a .pt2 first, then run like a file. With a dynamic batch
    (dynamic_shapes), `inputs` is a list of inferences, each a list of arrays whose dim 0 is
    that inference's batch (any size up to the maximum); outputs come back the same way."""
    from . import api
    if dynamic_shapes is not None:
        return _run_batched(model, inputs, example_args, target, board, out_dir, name,
                            max_iterations, dynamic_shapes)
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


def _run_batched(model, inferences, example_args, target, board, out_dir, name, max_iterations,
                 dynamic_shapes):
    """Host run of a dynamic-batch program: one compile, one NAME_invoke(..., n) per inference."""
    import shutil
    import subprocess
    import numpy as np
    from . import api
    from .emit import render
    from .emit.c import io_info
    from .ir import DTYPE_NP
    from .toolchain.build import build_host
    from .toolchain.targets import get_target
    if board is not None or (target not in (None, "host")):
        raise EerieError("a dynamic batch runs on the host only (for now)")
    res = compile(model, example_args, name=name, max_iterations=max_iterations,
                  dynamic_shapes=dynamic_shapes)
    batch = getattr(res.graph, "dynamic_batch", None)
    if batch is None:
        raise EerieError("dynamic_shapes gave no dynamic batch dimension")
    ins, outs = io_info(res.graph, res.graph.inputs), io_info(res.graph, res.graph.outputs)
    records = []
    for k, arrays in enumerate(inferences):
        arrays = [np.ascontiguousarray(a) for a in arrays]
        if len(arrays) != len(ins):
            raise EerieError(f"inference {k}: {len(arrays)} inputs, the model has {len(ins)}")
        n = arrays[0].shape[0] if arrays and arrays[0].ndim else -1
        if not 0 <= n <= batch:
            raise EerieError(f"inference {k}: batch {n} is outside 0..{batch}")
        rec = [np.int32(n).tobytes()]
        for a, spec in zip(arrays, ins):
            if a.dtype != np.dtype(DTYPE_NP[spec["dtype"]]) or list(a.shape[1:]) != spec["shape"][1:] \
                    or a.shape[0] != n:
                raise EerieError(f"inference {k}: input {a.dtype} {list(a.shape)}, the model wants "
                                 f"{spec['dtype']} [{n}, {', '.join(map(str, spec['shape'][1:]))}]")
            rec.append(a.tobytes())
        records.append((n, b"".join(rec)))
    keep = out_dir is not None
    work = Path(out_dir) if keep else Path(tempfile.mkdtemp(prefix="eerie-run-"))
    try:
        files = dict(res.files)
        files["host_main.c"] = render("host_main_batch.c.j2", name=res.name, version=__import__("eerie_c").__version__,
                                      inputs=ins, outputs=outs, batch_max=batch)
        files["report.json"] = json.dumps(res.report, indent=2, sort_keys=True) + "\n"
        api.write_files(work, files)
        exe = build_host(work, res.name, get_target("host"), ["host_main.c"])
        (work / "inputs.bin").write_bytes(b"".join(r for _, r in records))
        p = subprocess.run([str(exe), "inputs.bin", "outputs.bin"], cwd=work, capture_output=True,
                           text=True, timeout=600)
        if p.returncode != 0:
            raise EerieError(f"the host build of {res.name} failed to run: {p.stderr.strip()}")
        raw, pos, results = (work / "outputs.bin").read_bytes(), 0, []
        for n, _ in records:
            got = []
            for spec in outs:
                size = n * spec["bytes"]
                got.append(np.frombuffer(raw[pos:pos + size], dtype=DTYPE_NP[spec["dtype"]])
                           .reshape([n, *spec["shape"][1:]]))
                pos += size
            results.append(got)
        return results, res.report
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
