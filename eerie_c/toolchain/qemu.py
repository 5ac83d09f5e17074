"""Run firmware in QEMU (qemu-system-arm, or the board's qemu_system: qemu-system-riscv32) and
read back what it measured.

QEMU runs with -icount shift=0 (one instruction = 1 ns of virtual time, so SysTick counts
instructions deterministically) in the firmware project's directory. On semihosting boards
the harness reads inputs.bin and writes outputs.bin there through the host's file system; on
UART boards (board output "uart", no semihosting) serial_link.py sends inputs.bin and
receives outputs.bin as frames on the board's UART, and ends QEMU when the board is done.
Either way the caller sees the same files and the same "eerie: ..." report lines.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CompilerBug, EerieError
from . import serial_link
from .align_plugin import plugin_args
from .boards import Board

# The emulator; EERIE_QEMU names another build (e.g. a QEMU >= 8.0, which models the STM32F405's
# CCM, beside the distribution's 7.2).
QEMU = os.environ.get("EERIE_QEMU", "qemu-system-arm")
DEFAULT_TIMEOUT = 900
# The records the harness reads and the outputs it writes, in the project directory.
INPUTS_FILE = "inputs.bin"
OUTPUTS_FILE = "outputs.bin"

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
    if board.output == "uart":
        return serial_link.qemu_serial_command(board.qemu_machine, str(elf), qemu_binary(board))
    # RISC-V boards: misaligned loads and stores fault (align_plugin.py)
    return [qemu_binary(board), "-M", board.qemu_machine, *board.qemu_args, "-nographic", "-monitor",
            "none", "-icount", "shift=0", "-semihosting-config", "enable=on,target=native",
            *plugin_args(board), "-kernel", str(elf)]


def qemu_binary(board: Board) -> str:
    """The board's QEMU: qemu-system-arm (or EERIE_QEMU's build) on Arm, its own on others."""
    return QEMU if board.qemu_system == "qemu-system-arm" else board.qemu_system


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
    require_qemu(qemu_binary(board))
    cmd = qemu_command(board, Path(elf).resolve())
    if board.output == "uart":
        returncode, text = _run_uart(board, cmd, Path(cwd), timeout)
    else:
        try:
            p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                               stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise EerieError(f"the QEMU run on {board.name} did not finish within {timeout:g} s") from None
        # QEMU writes the semihosting console to stderr unless told to use a chardev.
        returncode, text = p.returncode, p.stdout + p.stderr
    insns, values = parse_output(text)
    run = QemuRun(cmd, returncode, text, insns, values)
    if returncode != 0:
        tail = " | ".join(text.strip().splitlines()[-5:])
        if "eerie: fault" in text:
            # Generated code that faults on the board is our bug, not the user's.
            raise CompilerBug(f"the firmware faulted on {board.name} (QEMU exit {returncode}): {tail}")
        raise EerieError(f"the QEMU run on {board.name} failed (exit {returncode}): {tail}")
    return run


def _run_uart(board: Board, cmd: list[str], cwd: Path, timeout: float) -> tuple[int, str]:
    """The UART exchange in place of semihosting's files: cwd/inputs.bin in, cwd/outputs.bin
    out. Returns the board's exit status and its console text."""
    src = cwd / INPUTS_FILE
    inputs = src.read_bytes() if src.is_file() else b""
    try:
        res = serial_link.run_qemu(cmd, inputs, timeout)
    except serial_link.LinkError as e:
        raise EerieError(f"the QEMU run on {board.name} failed: {e}") from None
    (cwd / OUTPUTS_FILE).write_bytes(b"".join(res.outputs))
    return res.status, res.text
