"""TFLM + CMSIS-NN measured on any .tflite, in QEMU: the baseline bench tables compare eerie-c with.

    from tflm_baseline import measure   # bench/ on sys.path (a bench script), or bench.tflm_baseline
    r = measure("models/mlperf_tiny/kws_ref_model.tflite", "mps2-an386")
    r["instructions"], r["arena_bytes"], r["flash_bytes"], r["ram_bytes"], r["bit_exact"]

The library comes from bench/tflm_baseline/build.py (TFLM's own Makefile, CMSIS-NN, the commits
of pins.toml); measure() raises BaselineNotBuilt, one line saying how to build it, when it is
missing. Per model and board: a firmware with the model as a C array and its operators in a
MicroMutableOpResolver (harness.py) runs n_inputs random records in one QEMU boot
(-icount shift=0, SysTick, like eerie-c's firmware); every output is compared with the host
tflite-micro runtime's on the same records. Figures:

  instructions   worst Invoke() of the records run
  arena_bytes    interpreter.arena_used_bytes()
  flash_bytes    text + data of the ELF (TFLM, CMSIS-NN, model, harness, start-up)
  ram_bytes      data + bss, the arena counted at arena_bytes (the harness's buffer is a
                 fixed 2 MiB), + the measured stack high-water mark
  bit_exact      every output equals the host tflite-micro runtime's

Results are cached per (model bytes, board, pins, harness, inputs) in the build folder
(cache=False measures again). Nothing in CI calls this: it needs the sources.
"""
from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from .harness import HarnessError, build_firmware, model_ops, random_records, run_records  # noqa: E402
from .pins import BOARD_ARCH, build_dir, library_info, load_pins, pins_key  # noqa: E402

__all__ = ["measure", "is_built", "check_built", "BaselineNotBuilt", "HarnessError", "BOARD_ARCH"]
BUILD_HINT = ("python bench/tflm_baseline/build.py --mirror DIR (git mirrors) or --tflm-src ... "
              "--cmsis-nn-src ... (docs/bench.md)")


class BaselineNotBuilt(RuntimeError):
    """The TFLM library for the board's core is not built (one line, with the command)."""


def is_built(board: str = "mps2-an386") -> bool:
    return board in BOARD_ARCH and library_info(BOARD_ARCH[board]).is_file()


def check_built(board: str) -> None:
    """Raise BaselineNotBuilt (or HarnessError for a board it does not support) unless built."""
    _library(board)


def _library(board: str) -> dict:
    if board not in BOARD_ARCH:
        raise HarnessError(f"board {board!r}: the TFLM baseline runs on {', '.join(BOARD_ARCH)}")
    info = library_info(BOARD_ARCH[board])
    if not info.is_file():
        raise BaselineNotBuilt(f"TFLM baseline not built for {board} ({BOARD_ARCH[board]}): run {BUILD_HINT}")
    data = json.loads(info.read_text())
    if not Path(data["library"]).is_file():
        raise BaselineNotBuilt(f"TFLM baseline library {data['library']} is missing: run {BUILD_HINT} --force")
    return data


def _host_reference(model: bytes, records: list[np.ndarray], n_outputs: int) -> list[np.ndarray]:
    from tflite_micro.python.tflite_micro import runtime
    it = runtime.Interpreter.from_bytes(model, arena_size=4 * 1024 * 1024)
    outs = [[] for _ in range(n_outputs)]
    for i in range(records[0].shape[0]):
        for k, x in enumerate(records):
            it.set_input(x[i], k)
        it.invoke()
        for k in range(n_outputs):
            outs[k].append(np.array(it.get_output(k)))
    return [np.stack(o) for o in outs]


def _io_details(model: bytes) -> tuple[list[dict], list[dict]]:
    import tflite
    from tflite_micro.python.tflite_micro import runtime
    sg = tflite.Model.GetRootAs(model, 0).Subgraphs(0)
    it = runtime.Interpreter.from_bytes(model, arena_size=4 * 1024 * 1024)
    ins = [it.get_input_details(i) for i in range(sg.InputsLength())]
    outs = [it.get_output_details(i) for i in range(sg.OutputsLength())]
    return ins, outs


def _cache_file(model: bytes, board: str, n_inputs: int, seed: int, info: dict) -> Path:
    """Keyed by everything the result depends on, the library build (rebuilt: new key) included."""
    h = hashlib.sha256(model)
    lib = Path(info["library"]).stat()
    h.update(f"{info['library']} {lib.st_size} {lib.st_mtime_ns} {info['gcc']}".encode())
    for f in ("harness.py", "main.cc.in", "__init__.py"):
        h.update((HERE / f).read_bytes())
    h.update(f"{board} {n_inputs} {seed}".encode())
    return build_dir() / "results" / f"{h.hexdigest()[:24]}.json"


def measure(model_path, board: str, n_inputs: int = 2, seed: int = 0, cache: bool = True) -> dict:
    """TFLM + CMSIS-NN on one .tflite and one board (mps2-an386 or mps3-an547): instructions,
    arena_bytes, flash_bytes, ram_bytes, bit_exact, and details (instructions_per_inference,
    stack_bytes, invoke_stack_bytes, data/bss, ops, pins). Raises BaselineNotBuilt if the
    library is missing, HarnessError if the model cannot run on it."""
    info = _library(board)   # first: the one-line error before any slow import
    from eerie_c.toolchain.boards import get_board
    from eerie_c.toolchain.firmware import elf_sizes, unpack_records
    path = Path(model_path)
    try:
        model = path.read_bytes()
    except OSError as e:
        raise HarnessError(f"{path}: {e.strerror}") from None
    cached = _cache_file(model, board, n_inputs, seed, info)
    if cache and cached.is_file():
        return json.loads(cached.read_text())
    ins, outs = _io_details(model)
    records = random_records(ins, n_inputs, seed)
    packed = b"".join(b"".join(np.ascontiguousarray(x[i]).tobytes() for x in records)
                      for i in range(n_inputs))
    b = get_board(board)
    with tempfile.TemporaryDirectory(prefix="tflm-baseline-") as tmp:
        work = Path(tmp)
        elf = build_firmware(work, info, b, model, path.stem)
        sizes = elf_sizes(elf)
        raw, run = run_records(work, b, elf, packed, n_inputs)
    specs = [{"bytes": int(np.prod(o["shape"])) * np.dtype(o["dtype"]).itemsize,
              "dtype": np.dtype(o["dtype"]).name, "shape": [int(s) for s in o["shape"]]} for o in outs]
    got = unpack_records(raw, specs, n_inputs, f"the TFLM firmware on {board}")
    ref = _host_reference(model, records, len(outs))
    exact = all(g.shape == r.shape and np.array_equal(g, r) for g, r in zip(got, ref))
    v = run.values
    arena = v["arena_used_bytes"]
    stack = v["stack_high_water_bytes"]
    result = {
        "model": path.stem, "board": board, "arch": info["arch"],
        "instructions": max(run.instructions),
        "arena_bytes": arena,
        "flash_bytes": sizes["text"] + sizes["data"],
        "ram_bytes": sizes["data"] + sizes["bss"] - v["arena_capacity_bytes"] + arena + stack,
        "bit_exact": bool(exact),
        "instructions_per_inference": run.instructions,
        "stack_bytes": stack, "invoke_stack_bytes": v["invoke_stack_bytes"],
        "elf_sizes": sizes, "ops": model_ops(model), "n_inputs": n_inputs, "seed": seed,
        "pins": pins_key(load_pins()), "gcc": info["gcc"],
    }
    if cache:
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(json.dumps(result, indent=1) + "\n")
    return result
