"""Run a compiled model: build it for the host or a board, feed it the inputs, read the outputs
back (with a board, in QEMU, with the board's measurements in the report)."""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from .dynamic_io import record, shapes_at, sizes_of
from .emit import render
from .emit.c import io_info
from .errors import EerieError
from .ir import DTYPE_NP
from .names import merge_files
from .output import write_files
from .pipeline import DEFAULT_PATCH, CompileResult, _load_and_compile, add_firmware, report_files
from .progress import stage
from .toolchain.build import build_host
from .toolchain.arch import arch_of
from .toolchain.firmware import (INPUTS_FILE, OUTPUTS_FILE, build_firmware, elf_sizes, pack_records,
                                 run_on_board, unpack_records)
from .toolchain.qemu import DEFAULT_TIMEOUT, run_qemu
from .toolchain.targets import get_target
from .version import __version__


def load_inputs(g_inputs: list[dict], arrays: list[np.ndarray]) -> tuple[list[np.ndarray], bool]:
    """Check user arrays against the model's inputs. An array may carry one extra leading
    batch dimension (several inferences). Returns the arrays batched, and whether they were."""
    if len(arrays) != len(g_inputs):
        raise EerieError(f"the model has {len(g_inputs)} input(s) but {len(arrays)} were given")
    batched, out = None, []
    for k, (spec, a) in enumerate(zip(g_inputs, arrays)):
        shape, dtype = tuple(spec["shape"]), np.dtype(DTYPE_NP[spec["dtype"]])
        if a.dtype != dtype:
            raise EerieError(f"input {k}: dtype {a.dtype}, the model wants {dtype}")
        if tuple(a.shape) == shape:
            is_b = False
            a = a.reshape((1, *shape))
        elif a.ndim == len(shape) + 1 and tuple(a.shape[1:]) == shape:
            is_b = True
        else:
            raise EerieError(f"input {k}: shape {list(a.shape)}, the model wants {list(shape)} "
                             f"(or [N, {', '.join(map(str, shape))}] for N inferences)")
        if batched is not None and is_b != batched:
            raise EerieError("either all inputs carry a batch dimension or none does")
        batched = is_b
        out.append(a)
    if len({a.shape[0] for a in out}) > 1:
        raise EerieError("inputs disagree on the number of inferences (first dimension)")
    if out and out[0].shape[0] == 0:
        raise EerieError("the inputs hold zero inferences (first dimension is 0)")
    return out, bool(batched)


def run_model(model, inputs: list[np.ndarray], target: str | None = None, out_dir=None,
              name: str | None = None, board=None, timeout: float | None = None,
              arena_budget: int | None = None, stack_budget: int | None = None,
              max_iterations: int | None = None, inputs_in_arena: bool | None = None,
              patch: str = DEFAULT_PATCH, max_recompute: float = 20.0,
              optimize: str = "balanced", input_mode: str = "whole") -> tuple[list[np.ndarray], dict]:
    """Compile, build and run on `target` (the host), or on `board` in QEMU; returns outputs
    (batched like the inputs) and the report (with the board's measurements). inputs_in_arena
    as for compile_model (on a board the harness then reads the inputs into the arena)."""
    if out_dir is not None:   # the builds and runs below happen with cwd set to it
        out_dir = Path(out_dir).resolve()
    res, brd = _load_and_compile(model, target, name, board, arena_budget, stack_budget,
                                 max_iterations, inputs_in_arena, patch=patch, max_recompute=max_recompute,
                                 optimize=optimize, input_mode=input_mode)
    if getattr(res.graph, "dynamic_dims", None) is not None:
        # torch dynamic sizes: one inference at the sizes of the given arrays
        outs, report = run_dynamic(res, [[np.asarray(a) for a in inputs]], brd, out_dir, timeout)
        return outs[0], report
    arrays, batched = load_inputs(res.report["inputs"], [np.asarray(a) for a in inputs])
    keep = out_dir is not None
    work = Path(out_dir) if keep else Path(tempfile.mkdtemp(prefix="eerie-run-"))
    try:
        outputs = run_compiled(res, brd, arrays, work, timeout)
        if not batched:
            outputs = [o[0] for o in outputs]
        if keep:   # report.json/.md and the picture, now with the run's measurements
            write_files(work, report_files(res))
        return outputs, res.report
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def run_compiled(res: CompileResult, brd, arrays: list[np.ndarray], work: Path,
                 timeout=None) -> list[np.ndarray]:
    """Build a compiled model in `work` and run every inference of the batched `arrays` (checked
    by load_inputs) in one run: the host build, or one QEMU boot of `brd`. The outputs, batched."""
    if brd is not None:
        return _run_board(res, brd, arrays, work, timeout)
    return _run_host(res, arrays, work)


def _run_host(res: CompileResult, arrays: list[np.ndarray], work: Path) -> list[np.ndarray]:
    """Write the model with a host harness (host_main.c) into `work`, build it and run every
    inference; the outputs, batched."""
    name = res.name
    ctx = {"name": name, "version": __version__,
           "inputs": io_info(res.graph, res.graph.inputs), "outputs": io_info(res.graph, res.graph.outputs)}
    merge_files(res.files, {"host_main.c": render("host_main.c.j2", **ctx)}, "host harness")
    write_files(work, merge_files(dict(res.files), {
        "report.json": json.dumps(res.report, indent=2, sort_keys=True) + "\n"}, "host run"))
    with stage(f"host build and run: {arrays[0].shape[0]} inference(s)"):
        exe = build_host(work, name, get_target("host"), ["host_main.c"])
        (work / "inputs.bin").write_bytes(pack_records(arrays))
        p = subprocess.run([str(exe), "inputs.bin", "outputs.bin"], cwd=work, capture_output=True,
                           text=True, timeout=600)
        if p.returncode != 0:
            raise EerieError(f"the host build of {name} failed to run: {p.stderr.strip()}")
        return unpack_records((work / "outputs.bin").read_bytes(), res.report["outputs"],
                              arrays[0].shape[0], "the host run")


def _run_board(res: CompileResult, brd, arrays: list[np.ndarray], work: Path,
               timeout) -> list[np.ndarray]:
    """Write the firmware project into `work`, build it and run every inference in QEMU; the
    outputs, batched (the board's measurements go into the report)."""
    add_firmware(res, brd)
    write_files(work, res.files)
    outputs, measured = run_on_board(work, res, brd, arrays, timeout or DEFAULT_TIMEOUT)
    res.report.update(measured)
    return outputs


def run_dynamic(res, inferences, board=None, out_dir=None, timeout=None):
    """Run a compiled program with dynamic sizes: one NAME_invoke per inference (a list of
    arrays at any sizes up to the maxima), on the host or on a board in QEMU, all in one run.
    Returns (outputs per inference, report)."""
    g = res.graph
    dyn = g.dynamic_dims
    records, sizes_all = [], []
    for k, arrays in enumerate(inferences):
        sizes = sizes_of(g, arrays, k)
        sizes_all.append(sizes)
        records.append(record(g, sizes, arrays))
    keep = out_dir is not None
    work = Path(out_dir) if keep else Path(tempfile.mkdtemp(prefix="eerie-run-"))
    try:
        report = {"report.json": json.dumps(res.report, indent=2, sort_keys=True) + "\n"}
        if board is None:
            files = merge_files(dict(res.files), report, "host run")
            merge_files(files, {"host_main.c": render(
                "host_main_dyn.c.j2", name=res.name, version=__version__,
                inputs=io_info(g, g.inputs), outputs=io_info(g, g.outputs), dyn=dyn)}, "host harness")
            write_files(work, files)
            exe = build_host(work, res.name, get_target("host"), ["host_main.c"])
            (work / "inputs.bin").write_bytes(b"".join(records))
            p = subprocess.run([str(exe), "inputs.bin", "outputs.bin"], cwd=work, capture_output=True,
                               text=True, timeout=600)
            if p.returncode != 0:
                raise EerieError(f"the host build of {res.name} failed to run: {p.stderr.strip()}")
            raw = (work / "outputs.bin").read_bytes()
        else:
            add_firmware(res, board)
            write_files(work, merge_files(dict(res.files), report, "firmware run"))
            project = work.resolve()
            arch = arch_of(board)
            elf = build_firmware(project, res.name, arch=arch)
            sizes = elf_sizes(elf, arch.cross)
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
            for tid, shape in zip(g.outputs, shapes_at(dyn["outputs"], dyn["syms"], sizes)):
                dt = np.dtype(DTYPE_NP[g.t(tid).dtype])
                n = int(np.prod(shape)) * dt.itemsize
                got.append(np.frombuffer(raw[pos:pos + n], dtype=dt).reshape(shape))
                pos += n
            results.append(got)
        if pos != len(raw):
            raise EerieError(f"the run wrote {len(raw)} bytes of outputs, expected {pos}")
        if keep:   # report.json/.md and the picture, now with the run's measurements
            write_files(work, report_files(res))
        return results, res.report
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
