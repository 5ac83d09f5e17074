"""Firmware projects: the model files plus a test harness (main.c), the shared start-up and
runtime (runtime_c/), the board's linker script, a Makefile (`make`, `make run`) and the same
build for CMake (CMakeLists.txt with the shipped runtime/arm-none-eabi.cmake toolchain file).

RISC-V boards get the same project with their own start-up, runtime and toolchain file
(toolchain/arch.py). Also builds such a project and runs it in QEMU for `eerie-c run --board`.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np

from ..version import __version__
from ..templating import render
from ..emit.c import cmake_flags, io_info
from ..errors import CompilerBug, EerieError
from ..ir import DTYPE_NP
from ..progress import note, stage
from ..resources import resource_dir
from .arch import ARM, arch_of
from .boards import Board
from .build import run_cmd
from .targets import get_target
from .qemu import DEFAULT_TIMEOUT, run_qemu

RUNTIME_FILES = tuple(ARM.runtime)   # Arm's; each architecture's are in toolchain/arch.py
INPUTS_FILE = "inputs.bin"
OUTPUTS_FILE = "outputs.bin"
CROSS = ARM.cross


def firmware_files(res, board: Board) -> dict[str, str | bytes]:
    """The files a firmware project adds to the model's own (NAME.c/.h/.mk)."""
    g = res.graph
    ipt = board.insns_per_tick
    arch = arch_of(board)
    ctx = {"name": res.name, "NAME": res.name.upper(), "version": __version__, "board": board,
           "arch": arch, "qemu": board.qemu_system, "qemu_args": " ".join(board.qemu_args),
           "target": res.target, "inputs": io_info(g, g.inputs), "outputs": io_info(g, g.outputs),
           "inputs_file": INPUTS_FILE, "outputs_file": OUTPUTS_FILE,
           "ldscript": board.linker_script.name, "ipt_num": ipt.numerator, "ipt_den": ipt.denominator,
           "ipt_text": f"{float(ipt):g}"}
    files: dict[str, str | bytes] = {
        "main.c": render("firmware/main.c.j2", **ctx),
        "Makefile": render("firmware/Makefile.j2", **ctx),
        "CMakeLists.txt": render("firmware/CMakeLists.txt.j2", **ctx, **cmake_flags(get_target(res.target).cflags)),
        board.linker_script.name: board.linker_script.read_text(),
    }
    rt = resource_dir("runtime_c")
    for f, src in arch.runtime.items():   # RUNTIME_FILES on Arm; RISC-V: its own start-up
        files[f"runtime/{f}"] = (rt / src).read_text()
    # One record of zero bytes, so that `make run` works out of the box.
    files[INPUTS_FILE] = bytes(sum(t["bytes"] for t in ctx["inputs"]))
    return files


def require_toolchain(arch=ARM):
    for tool in (arch.cross + "gcc", arch.cross + "size", "make"):
        if shutil.which(tool) is None:
            raise EerieError(f"'{tool}' is not installed (Debian: apt-get install {arch.apt} make)")


def build_firmware(project: Path, name: str, arch=ARM) -> Path:
    """`make` in the project directory; returns the ELF."""
    require_toolchain(arch)
    run_cmd(["make", "--no-print-directory", "-B", f"{name}.elf"], project, "firmware build")
    return project / f"{name}.elf"


def firmware_stack(project: Path, target_name: str, arch=ARM) -> dict:
    """The whole firmware's proven stack bound (start-up, harness, runtime, model, plus one
    interrupt), from `make stack`'s per-file call graphs: what the stack high-water mark
    measured in QEMU must stay under."""
    from ..verify import EXCEPTION_FRAME
    from ..verify.stack import program_stack_bound
    run_cmd(["make", "--no-print-directory", "-B", "stack"], project, "firmware stack usage")
    cis = sorted((Path(project) / "stack").glob("*.ci"))
    if arch is ARM:
        r = program_stack_bound(cis, "Reset_Handler", ["SysTick_Handler"],
                                EXCEPTION_FRAME[get_target(target_name).has_fpu])
    else:   # the trap handler's register saves are in its own frame (Arch.exception_frame)
        r = program_stack_bound(cis, "Reset_Handler", list(arch.handlers),
                                arch.exception_frame[get_target(target_name).has_fpu], family=arch.family)
    return {"firmware_stack_bound_bytes": r["stack_bound_bytes"],
            "firmware_stack": {k: r[k] for k in ("thread_bytes", "exception_frame_bytes",
                                                 "handler_bytes", "path", "handler_path")}}


def prove_firmware_stack(res, board: Board, files: dict[str, str | bytes]) -> dict:
    """At compile time: the whole firmware's stack bound (firmware_stack on the project
    written to a scratch directory), which must fit the stack reserve the linker script
    gives it; else a one-line error, before anything is written."""
    import tempfile
    require_toolchain(arch_of(board))
    with tempfile.TemporaryDirectory(prefix="eerie-stack-") as d:
        for rel, data in files.items():
            p = Path(d) / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(data, bytes):
                p.write_bytes(data)
            else:
                p.write_text(data, encoding="utf-8", errors="backslashreplace")
        fs = firmware_stack(Path(d), res.target, arch_of(board))
    need = fs["firmware_stack_bound_bytes"]
    if need > board.stack_bytes:
        raise EerieError(f"model {res.name} does not fit board {board.name}: the firmware's proven "
                         f"stack bound is {need} bytes (start-up, harness, model, one interrupt) but "
                         f"the board reserves {board.stack_bytes}, {need - board.stack_bytes} bytes too many")
    return fs


def elf_sizes(elf: Path, cross: str = CROSS) -> dict[str, int]:
    """Berkeley sizes: text (code + read-only data, all in flash), data, bss."""
    elf = Path(elf).resolve()
    p = run_cmd([cross + "size", "-B", elf.name], elf.parent, cross + "size")
    nums = re.findall(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s", p.stdout, re.M)
    if not nums:
        raise CompilerBug(f"cannot read {cross}size output: {p.stdout!r}")
    text, data, bss = map(int, nums[0])
    return {"text": text, "data": data, "bss": bss}


def pack_records(arrays: list[np.ndarray]) -> bytes:
    n = arrays[0].shape[0]
    return b"".join(b"".join(np.ascontiguousarray(a[i]).tobytes() for a in arrays) for i in range(n))


def unpack_records(raw: bytes, specs: list[dict], n: int, where: str) -> list[np.ndarray]:
    per = sum(s["bytes"] for s in specs)
    if len(raw) != per * n:
        raise CompilerBug(f"{where} wrote {len(raw)} bytes of outputs, expected {per * n}")
    outs = [[] for _ in specs]
    for i in range(n):
        pos = i * per
        for k, s in enumerate(specs):
            outs[k].append(np.frombuffer(raw[pos:pos + s["bytes"]], dtype=DTYPE_NP[s["dtype"]])
                           .reshape(s["shape"]))
            pos += s["bytes"]
    return [np.stack(o) for o in outs]


def run_on_board(project: Path, res, board: Board, arrays: list[np.ndarray],
                 timeout: float = DEFAULT_TIMEOUT) -> tuple[list[np.ndarray], dict]:
    """Build the project, run all records in one QEMU boot, return outputs and measurements."""
    project = Path(project).resolve()
    arch = arch_of(board)
    with stage(f"firmware build (make, {arch.cross}gcc) for {board.name}"):
        elf = build_firmware(project, res.name, arch)
    sizes = elf_sizes(elf, arch.cross)
    n = arrays[0].shape[0]
    (project / INPUTS_FILE).write_bytes(pack_records(arrays))
    out_path = project / OUTPUTS_FILE
    if out_path.exists():
        out_path.unlink()
    with stage(f"QEMU run on {board.name} ({board.qemu_machine}): {n} inference(s)"):
        run = run_qemu(board, elf, project, timeout)
    note(f"measured: {max(run.instructions):,} instructions per inference (worst of {n}), "
         f"stack high-water {run.values.get('stack_high_water_bytes')} B", detail=True)
    if run.values.get("inferences") != n or len(run.instructions) != n:
        raise CompilerBug(f"the firmware on {board.name} ran {run.values.get('inferences')} of {n} "
                          f"inferences:\n{run.stdout[-2000:]}")
    outputs = unpack_records(out_path.read_bytes(), res.report["outputs"], n, f"the firmware on {board.name}")
    hw, reserve = run.values["stack_high_water_bytes"], run.values["stack_reserve_bytes"]
    measured = {
        "board": board.name, "cpu": board.cpu, "qemu_machine": board.qemu_machine,
        # Worst case over the inferences run; all of them are listed too.
        "instructions": max(run.instructions),
        "instructions_per_inference": run.instructions,
        "flash_bytes": sizes["text"], "ram_static_bytes": sizes["data"] + sizes["bss"],
        "elf_sizes": sizes,
        "stack_high_water_bytes": hw, "stack_reserve_bytes": reserve,
        # What NAME_invoke itself used below its caller's stack pointer (worst inference),
        # interrupts taken during it included: the figure the proven bound must cover.
        "invoke_stack_bytes": run.values["invoke_stack_bytes"],
    }
    if hw >= reserve:
        raise EerieError(f"the stack overflowed its {reserve}-byte reserve on {board.name}")
    return outputs, measured
