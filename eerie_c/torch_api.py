"""`eerie_c.compile` / `eerie_c.run` for in-memory programs: an `nn.Module` (exported here with
torch.export), a `torch.export.ExportedProgram`, or a model file path (.tflite, .pt2), which
goes through api.compile_model / api.run_model unchanged."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

from .errors import EerieError
from .frontend.torch import DEFAULT_MAX_ITERATIONS


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
            dynamic_shapes=None, arena_budget: int | None = None, stack_budget: int | None = None):
    """Compile to C. Returns an api.CompileResult (files, report, graph); with out_dir, writes
    NAME.c / .h / .mk, report.json, report.md and memory.svg there (and a firmware project
    with a board). dynamic_shapes (as torch.export takes them): dims declared with
    `torch.export.Dim(name, max=N)` compile for the maximum; NAME_invoke takes the actual sizes
    as int arguments (a Dim on dim 0 of every input runs sample by sample: `int batch`).
    arena_budget / stack_budget (bytes): as for model files, a compile whose arena or proven
    stack bound exceeds one fails with a one-line error before anything is written."""
    from . import api
    if _is_path(model):
        if example_args is not None:
            raise EerieError("example_args is only for nn.Module programs, not model files")
        return api.compile_model(model, out_dir, target=target, name=name, board=board,
                                 max_iterations=max_iterations, arena_budget=arena_budget,
                                 stack_budget=stack_budget)
    from .frontend.torch import load_torch
    brd, target = api._board_and_target(board, target)
    name = _name(model, name, brd)
    g = load_torch(model, example_args, name, max_iterations or DEFAULT_MAX_ITERATIONS,
                   dynamic_shapes)
    res = api.compile_graph(g, name, target, source=f"{type(model).__name__} (torch.export)",
                            inputs_in_arena=brd is not None,   # as for a .pt2 (api._load_and_compile)
                            arena_budget=arena_budget, stack_budget=stack_budget)
    note_dynamic(res)
    if brd is not None:
        api._add_firmware(res, brd)
    if out_dir is not None:
        api.merge_files(res.files, api.report_files(res), "report")
        api.write_files(Path(out_dir), res.files)
        res.out_dir = Path(out_dir)
    return res


def note_dynamic(res):
    """The dynamic sizes in the report (JSON-able)."""
    g = res.graph
    batch = getattr(g, "dynamic_batch", None)
    if batch is not None:
        res.report["dynamic_batch"] = {"dim": 0, "max": batch,
                                       "note": "inputs/outputs shapes are per sample"}
    dyn = getattr(g, "dynamic_dims", None)
    if dyn is not None:
        res.report["dynamic_sizes"] = {
            "parameters": [dict(p) for p in dyn["params"]],
            "inputs": [i["shape_text"] for i in dyn["inputs"]],
            "outputs": [o["shape_text"] for o in dyn["outputs"]],
            "note": "code, arena and shapes are for the maximum sizes; NAME_invoke takes the actual sizes"}


def dynamic_firmware(res, brd) -> dict:
    """Firmware project files for a program with dynamic sizes: the usual project with a
    harness that reads the sizes of each inference before its inputs."""
    from .emit import render
    from .emit.c import io_info
    from .toolchain.firmware import INPUTS_FILE, OUTPUTS_FILE, firmware_files
    import numpy as np
    files = firmware_files(res, brd)
    g = res.graph
    ipt = brd.insns_per_tick
    files["main.c"] = render(
        "firmware/main_dynamic.c.j2", name=res.name, NAME=res.name.upper(),
        version=__import__("eerie_c").__version__, board=brd, target=res.target,
        inputs=io_info(g, g.inputs), outputs=io_info(g, g.outputs), inputs_file=INPUTS_FILE,
        outputs_file=OUTPUTS_FILE, ldscript=brd.linker_script.name, ipt_num=ipt.numerator,
        ipt_den=ipt.denominator, ipt_text=f"{float(ipt):g}", dyn=g.dynamic_dims)
    # One record at the maximum sizes (zero inputs), so that `make run` works out of the box.
    sizes = [p["max"] for p in g.dynamic_dims["params"]]
    files[INPUTS_FILE] = _record(g, sizes, None)
    del np
    return files


def _sizes_of(g, arrays, k=0) -> list[int]:
    """The size arguments of one inference, read off its input arrays' shapes."""
    import numpy as np
    dyn = g.dynamic_dims
    syms = dyn["syms"]
    found = {}
    if len(arrays) != len(dyn["inputs"]):
        raise EerieError(f"inference {k}: {len(arrays)} inputs, the model has {len(dyn['inputs'])}")
    for a, spec in zip(arrays, dyn["inputs"]):
        shape = spec["shape"]
        a = np.asarray(a)
        if a.ndim != len(shape):
            raise EerieError(f"inference {k}: input of shape {list(a.shape)}, the model wants {spec['shape_text']}")
        for d, e in zip(a.shape, shape):
            if isinstance(e, int):
                if d != e:
                    raise EerieError(f"inference {k}: input of shape {list(a.shape)}, the model wants "
                                     f"{spec['shape_text']}")
            elif e in syms:
                if found.setdefault(e, d) != d:
                    raise EerieError(f"inference {k}: inputs disagree on a dynamic size ({found[e]} vs {d})")
    sizes = []
    for p, s in zip(dyn["params"], syms):
        if s not in found:
            raise EerieError(f"inference {k}: the inputs give no size for {p['name']}")
        if not p["min"] <= found[s] <= p["max"]:
            raise EerieError(f"inference {k}: {p['name']} = {found[s]} is outside {p['min']}..{p['max']}")
        sizes.append(int(found[s]))
    return sizes


def _shapes(specs, syms, sizes):
    vals = dict(zip(syms, sizes))
    return [[e if isinstance(e, int) else int(e.subs(vals)) for e in s["shape"]] for s in specs]


def _record(g, sizes, arrays) -> bytes:
    import numpy as np
    from .ir import DTYPE_NP
    dyn = g.dynamic_dims
    parts = [np.asarray(sizes, np.int32).tobytes()]
    shapes = _shapes(dyn["inputs"], dyn["syms"], sizes)
    for k, (tid, shape) in enumerate(zip(g.inputs, shapes)):
        dt = np.dtype(DTYPE_NP[g.t(tid).dtype])
        if arrays is None:
            parts.append(np.zeros(shape, dt).tobytes())
        else:
            a = np.ascontiguousarray(arrays[k])
            if a.dtype != dt:
                raise EerieError(f"input {k}: dtype {a.dtype}, the model wants {dt}")
            parts.append(a.tobytes())
    return b"".join(parts)


def run_dynamic(res, inferences, board=None, out_dir=None, timeout=None):
    """Run a compiled program with dynamic sizes: one NAME_invoke per inference (a list of
    arrays at any sizes up to the maxima), on the host or on a board in QEMU, all in one run.
    Returns (outputs per inference, report)."""
    import shutil
    import subprocess
    import numpy as np
    from . import api
    from .emit import render
    from .emit.c import io_info
    from .ir import DTYPE_NP
    from .toolchain.build import build_host
    from .toolchain.targets import get_target
    g = res.graph
    dyn = g.dynamic_dims
    records, sizes_all = [], []
    for k, arrays in enumerate(inferences):
        sizes = _sizes_of(g, arrays, k)
        sizes_all.append(sizes)
        records.append(_record(g, sizes, arrays))
    keep = out_dir is not None
    work = Path(out_dir) if keep else Path(tempfile.mkdtemp(prefix="eerie-run-"))
    try:
        report = {"report.json": json.dumps(res.report, indent=2, sort_keys=True) + "\n"}
        if board is None:
            files = api.merge_files(dict(res.files), report, "host run")
            api.merge_files(files, {"host_main.c": render(
                "host_main_dyn.c.j2", name=res.name, version=__import__("eerie_c").__version__,
                inputs=io_info(g, g.inputs), outputs=io_info(g, g.outputs), dyn=dyn)}, "host harness")
            api.write_files(work, files)
            exe = build_host(work, res.name, get_target("host"), ["host_main.c"])
            (work / "inputs.bin").write_bytes(b"".join(records))
            p = subprocess.run([str(exe), "inputs.bin", "outputs.bin"], cwd=work, capture_output=True,
                               text=True, timeout=600)
            if p.returncode != 0:
                raise EerieError(f"the host build of {res.name} failed to run: {p.stderr.strip()}")
            raw = (work / "outputs.bin").read_bytes()
        else:
            from .toolchain.firmware import INPUTS_FILE, OUTPUTS_FILE, build_firmware, elf_sizes
            from .toolchain.qemu import DEFAULT_TIMEOUT, run_qemu
            api._add_firmware(res, board)
            api.write_files(work, api.merge_files(dict(res.files), report, "firmware run"))
            project = work.resolve()
            elf = build_firmware(project, res.name)
            sizes = elf_sizes(elf)
            (project / INPUTS_FILE).write_bytes(b"".join(records))
            if (project / OUTPUTS_FILE).exists():
                (project / OUTPUTS_FILE).unlink()
            run = run_qemu(board, elf, project, timeout or DEFAULT_TIMEOUT)
            if run.values.get("inferences") != len(records):
                raise EerieError(f"the firmware on {board.name} ran {run.values.get('inferences')} of "
                                 f"{len(records)} inferences:\n{run.stdout[-2000:]}")
            raw = (project / OUTPUTS_FILE).read_bytes()
            res.report.update({
                "board": board.name, "cpu": board.cpu, "instructions": max(run.instructions),
                "instructions_per_inference": run.instructions, "elf_sizes": sizes,
                "flash_bytes": sizes["text"], "ram_static_bytes": sizes["data"] + sizes["bss"],
                "stack_high_water_bytes": run.values["stack_high_water_bytes"],
                "invoke_stack_bytes": run.values["invoke_stack_bytes"]})
        pos, results = 0, []
        for sizes in sizes_all:
            got = []
            for tid, shape in zip(g.outputs, _shapes(dyn["outputs"], dyn["syms"], sizes)):
                dt = np.dtype(DTYPE_NP[g.t(tid).dtype])
                n = int(np.prod(shape)) * dt.itemsize
                got.append(np.frombuffer(raw[pos:pos + n], dtype=dt).reshape(shape))
                pos += n
            results.append(got)
        if pos != len(raw):
            raise EerieError(f"the run wrote {len(raw)} bytes of outputs, expected {pos}")
        if keep:   # report.json/.md and the picture, now with the run's measurements
            api.write_files(work, api.report_files(res))
        return results, res.report
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


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
        arena_budget: int | None = None, stack_budget: int | None = None):
    """Compile, build and run (host, or a board in QEMU); returns (outputs, report). An in-memory
    program is exported and saved as a .pt2 first, then run like a file. With dynamic sizes
    (dynamic_shapes, or an ExportedProgram exported with them), `inputs` is a list of
    inferences, each a list of arrays at that inference's sizes (any up to the maxima); outputs
    come back the same way, from one compile. An ExportedProgram takes no example_args."""
    from . import api
    ep_dynamic = _has_dynamic_inputs(model)
    if dynamic_shapes is not None or ep_dynamic:
        if _is_path(model):
            raise EerieError("dynamic_shapes is for nn.Module programs; a .pt2 file keeps its own")
        brd, target = api._board_and_target(board, target)
        res = compile(model, example_args, target=target, name=name, max_iterations=max_iterations,
                      dynamic_shapes=dynamic_shapes, arena_budget=arena_budget, stack_budget=stack_budget)
        if getattr(res.graph, "dynamic_dims", None) is None:
            raise EerieError("dynamic_shapes gave no dynamic dimension")
        return run_dynamic(res, inputs, brd, out_dir, timeout)
    if _is_path(model):
        return api.run_model(model, inputs, target=target, out_dir=out_dir, name=name, board=board,
                             timeout=timeout, max_iterations=max_iterations,
                             arena_budget=arena_budget, stack_budget=stack_budget)
    from .frontend.torch import export_program
    import torch
    ep = export_program(model, example_args)
    name = _name(model, name, board)
    with tempfile.TemporaryDirectory(prefix="eerie-pt2-") as d:
        path = Path(d) / f"{name}.pt2"
        torch.export.save(ep, str(path))
        return api.run_model(path, inputs, target=target, out_dir=out_dir, name=name,
                             board=board, timeout=timeout,
                             max_iterations=max_iterations or DEFAULT_MAX_ITERATIONS,
                             arena_budget=arena_budget, stack_budget=stack_budget)
