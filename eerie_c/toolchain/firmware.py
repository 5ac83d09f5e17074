"""Firmware projects: the model files plus a test harness (main.c), the shared start-up and
runtime (runtime_c/), the board's linker script, a Makefile (`make`, `make run`) and the same
build for CMake (CMakeLists.txt with the shipped runtime/arm-none-eabi.cmake toolchain file).
Boards with output "uart" get the UART harness, the part's runtime files and the host-side
runner runtime/eerie_serial.py (toolchain/serial_link.py) instead of semihosting.

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
from . import serial_link
from .arch import ARCHES, ARM, arch_of
from .boards import Board, placement
from .build import run_cmd
from .targets import get_target
from .qemu import DEFAULT_TIMEOUT, INPUTS_FILE, OUTPUTS_FILE, QEMU, run_qemu

RUNTIME_FILES = tuple(ARM.runtime)   # Arm's; each architecture's are in toolchain/arch.py
CROSS = ARM.cross


def firmware_files(res, board: Board) -> dict[str, str | bytes]:
    """The files a firmware project adds to the model's own (NAME.c/.h/.mk)."""
    g = res.graph
    uart = board.output == "uart"
    if uart and getattr(g, "dynamic_dims", None) is not None:
        raise EerieError(f"board {board.name} talks over its UART, and the UART harness does not yet "
                         f"pass dynamic sizes: use a semihosting board (e.g. mps2-an386)")
    ipt = board.insns_per_tick
    arena = int(res.report.get("arena_bytes", 0))
    where = placement(board, arena)
    arch = arch_of(board)
    ctx = {"name": res.name, "NAME": res.name.upper(), "version": __version__, "board": board,
           "arch": arch, "qemu": board.qemu_system, "qemu_args": " ".join(board.qemu_args),
           "target": res.target, "inputs": io_info(g, g.inputs), "outputs": io_info(g, g.outputs),
           "inputs_file": INPUTS_FILE, "outputs_file": OUTPUTS_FILE,
           "ldscript": board.linker_script.name, "ipt_num": ipt.numerator, "ipt_den": ipt.denominator,
           "ipt_text": f"{float(ipt):g}", "arena_bytes": arena,
           "placement_ccm": {k: int(v == "ccm") for k, v in where.items()}}
    files: dict[str, str | bytes] = {
        "main.c": render("firmware/main_uart.c.j2" if uart else "firmware/main.c.j2", **ctx),
        "Makefile": render("firmware/Makefile.j2", **ctx),
        "CMakeLists.txt": render("firmware/CMakeLists.txt.j2", **ctx, **cmake_flags(get_target(res.target).cflags)),
        board.linker_script.name: board.linker_script.read_text(),
    }
    rt = resource_dir("runtime_c")
    for f, src in arch.runtime.items():   # RUNTIME_FILES on Arm; RISC-V: its own start-up
        files[f"runtime/{f}"] = (rt / src).read_text()
    for f in (("eerie_uart.h",) if uart else ()) + board.runtime_sources:
        files[f"runtime/{f}"] = (rt / f).read_text()
    if arch.family == "riscv":   # `make run` ends at a misaligned access, as eerie-c's runs do
        files["runtime/qemu_align_plugin.c"] = (rt / "qemu_align_plugin.c").read_text()
    if uart:   # the host side, to run the image without eerie-c (`make run`, `make run-board`)
        files["runtime/eerie_serial.py"] = Path(serial_link.__file__).read_text()
    # One record of zero bytes, so that `make run` works out of the box.
    files[INPUTS_FILE] = bytes(sum(t["bytes"] for t in ctx["inputs"]))
    return files


def require_toolchain(arch=ARM):
    for tool in (arch.cross + "gcc", arch.cross + "size", "make"):
        if shutil.which(tool) is None:
            raise EerieError(f"'{tool}' is not installed (Debian: apt-get install {arch.apt} make)")


def build_firmware(project: Path, name: str, make_vars: tuple[str, ...] = (), arch=ARM) -> Path:
    """`make` in the project directory (with VAR=value overrides); returns the ELF."""
    require_toolchain(arch)
    run_cmd(["make", "--no-print-directory", "-B", *make_vars, f"{name}.elf"], project, "firmware build")
    return project / f"{name}.elf"


def qemu_placement(res, board: Board) -> tuple[tuple[str, ...], dict[str, str]]:
    """Make overrides for the QEMU run, and where the arena and the stack are in that image.
    QEMU models the STM32F405's core-coupled RAM from version 8.0 on; before that (Debian 12
    has 7.2) the image is linked with CCM=0, everything in SRAM, which must then fit there."""
    arena = int(res.report["arena_bytes"])
    where = placement(board, arena)
    if board.ccm is None or "ccm" not in where.values() or serial_link.qemu_version(QEMU) >= (8, 0):
        return (), where
    b = res.report.get("budget", {})
    need = int(b.get("static_data_bytes", 0)) + arena + max(int(b.get("stack_bound_bytes", 0)), board.stack_bytes)
    if need > board.ram.size:
        raise EerieError(f"model {res.name} needs the CCM on {board.name} ({need} bytes do not fit its "
                         f"{board.ram.size} bytes of SRAM), and this QEMU (before 8.0) does not model the "
                         f"CCM: run it with QEMU 8.0 or later, or on the board")
    return ("CCM=0",), {"arena": "ram", "stack": "ram"}


def firmware_stack(project: Path, target_name: str, model: str | None = None, arch=None,
                   others_built: bool = False, dry_run: str | None = None) -> dict:
    """The whole firmware's proven stack bound (start-up, harness, runtime, model, plus one
    interrupt), from `make stack`'s per-file call graphs: what the stack high-water mark
    measured in QEMU must stay under. With `model` (its NAME), the model's own call graph
    comes from the identical compile the model's stack bound already made, if there was one
    (verify/ci_cache.py), and `make stack` builds the other sources (others_built: they are
    built already, by `make -B stack NAME_SRCS=` in this project, and dry_run is what `make
    -n -B stack` printed there before: firmware_early.py). `arch`: by default the target's
    architecture (a RISC-V project has a trap handler, not SysTick_Handler)."""
    from ..verify import EXCEPTION_FRAME
    from ..verify.stack import program_stack_bound
    project = Path(project)
    if arch is None:
        arch = ARCHES[get_target(target_name).family]
    reused = _reusable_model_ci(project, model, dry_run) if model else None
    make = ["make", "--no-print-directory", "-B", "stack"]
    if not (reused and others_built):
        run_cmd(make + ([f"{model.upper()}_SRCS="] if reused else []), project, "firmware stack usage")
    if reused:
        (project / "stack" / f"{model}.ci").write_text(reused)
    cis = sorted((project / "stack").glob("*.ci"))
    if arch is ARM:
        r = program_stack_bound(cis, "Reset_Handler", ["SysTick_Handler"],
                                EXCEPTION_FRAME[get_target(target_name).has_fpu])
    else:   # the trap handler's register saves are in its own frame (Arch.exception_frame)
        r = program_stack_bound(cis, "Reset_Handler", list(arch.handlers),
                                arch.exception_frame[get_target(target_name).has_fpu], family=arch.family)
    return {"firmware_stack_bound_bytes": r["stack_bound_bytes"],
            "firmware_stack": {k: r[k] for k in ("thread_bytes", "exception_frame_bytes",
                                                 "handler_bytes", "path", "handler_path")}}


def _reusable_model_ci(project: Path, model: str, dry_run: str | None = None) -> str | None:
    """The .ci of the model's compile in `make stack`, if an equivalent compile already made
    one (ci_cache.recall decides from the exact command `make -n` shows, or showed: dry_run)."""
    from ..verify import ci_cache
    if dry_run is None:
        dry_run = run_cmd(["make", "--no-print-directory", "-n", "-B", "stack"], project,
                          "make -n stack").stdout
    src = f"{model}.c"
    for cmd in ci_cache.split_commands(dry_run):
        if "-fcallgraph-info=su" in cmd and any(Path(a).name == src for a in cmd[1:]):
            return ci_cache.recall(cmd, project / src, project)
    return None


def prove_firmware_stack(res, board: Board, files: dict[str, str | bytes], early=None) -> dict:
    """At compile time: the whole firmware's stack bound (firmware_stack on the project
    written to a scratch directory), which must fit the stack reserve the linker script
    gives it; else a one-line error, before anything is written. early: the build of the
    other sources started during the verification (firmware_early.py), used if it built
    exactly these files."""
    import tempfile
    from .firmware_early import write_project
    require_toolchain(arch_of(board))
    built = early.project(files) if early is not None else None
    if built is not None:
        try:
            fs = firmware_stack(built, res.target, res.name, arch_of(board), others_built=True,
                                dry_run=early.dry_run)
        finally:
            early.stop()
    else:
        if early is not None:
            early.stop()
        with tempfile.TemporaryDirectory(prefix="eerie-stack-") as d:
            write_project(Path(d), files)
            fs = firmware_stack(Path(d), res.target, res.name, arch_of(board))
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
    make_vars, where = qemu_placement(res, board)
    arch = arch_of(board)
    with stage(f"firmware build (make, {arch.cross}gcc) for {board.name}"):
        elf = build_firmware(project, res.name, make_vars, arch)
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
    if board.ccm is not None:   # where the measured image had its arena and stack
        measured["qemu_placement"] = where
    if hw >= reserve:
        raise EerieError(f"the stack overflowed its {reserve}-byte reserve on {board.name}")
    return outputs, measured
