"""Run firmware in QEMU (qemu-system-arm, or the board's qemu_system: qemu-system-riscv32) and
read back what it measured.

QEMU runs with -icount shift=0 (one instruction = 1 ns of virtual time, so SysTick counts
instructions deterministically) and semihosting on, in the firmware project's directory:
the harness reads inputs.bin and writes outputs.bin there through the host's file system.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CompilerBug, EerieError
from .boards import Board

QEMU = "qemu-system-arm"
DEFAULT_TIMEOUT = 900

_INFER = re.compile(r"^eerie: inference (\d+) instructions (\d+)$")
_KV = re.compile(r"^eerie: ([a-z_]+) (\d+)$")


@dataclass
class QemuRun:
    command: list[str]
    returncode: int
    stdout: str
    instructions: list[int] = field(default_factory=list)
    values: dict[str, int] = field(default_factory=dict)


def qemu_command(board: Board, elf: Path) -> list[str]:
    return [board.qemu_system, "-M", board.qemu_machine, *board.qemu_args, "-nographic", "-monitor",
            "none", "-icount", "shift=0", "-semihosting-config", "enable=on,target=native",
            "-kernel", str(elf)]


def require_qemu(qemu: str = QEMU):
    if shutil.which(qemu) is None:
        pkg = "qemu-system-arm" if qemu == QEMU else "qemu-system-misc"   # riscv32 is in -misc
        raise EerieError(f"'{qemu}' is not installed (Debian: apt-get install {pkg})")


def parse_output(stdout: str) -> tuple[list[int], dict[str, int]]:
    insns, values = [], {}
    for line in stdout.splitlines():
        line = line.strip()
        m = _INFER.match(line)
        if m:
            insns.append(int(m.group(2)))
            continue
        m = _KV.match(line)
        if m:
            values[m.group(1)] = int(m.group(2))
    return insns, values


def run_qemu(board: Board, elf: Path, cwd: Path, timeout: float = DEFAULT_TIMEOUT) -> QemuRun:
    """Boot the ELF on the board's QEMU machine; raise if it does not finish cleanly."""
    require_qemu(board.qemu_system)
    cmd = qemu_command(board, Path(elf).resolve())
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise EerieError(f"the QEMU run on {board.name} did not finish within {timeout:g} s") from None
    # QEMU writes the semihosting console to stderr unless told to use a chardev.
    text = p.stdout + p.stderr
    insns, values = parse_output(text)
    run = QemuRun(cmd, p.returncode, text, insns, values)
    if p.returncode != 0:
        tail = " | ".join(text.strip().splitlines()[-5:])
        if "eerie: fault" in text:
            # Generated code that faults on the board is our bug, not the user's.
            raise CompilerBug(f"the firmware faulted on {board.name} (QEMU exit {p.returncode}): {tail}")
        raise EerieError(f"the QEMU run on {board.name} failed (exit {p.returncode}): {tail}")
    return run
