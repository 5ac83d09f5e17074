"""The misaligned-access check of the RISC-V boards: runtime_c/qemu_align_plugin.c, a QEMU
TCG plugin that ends the run at the first misaligned load or store (qemu-system-riscv32
emulates them silently and has no option to trap; real RV32 MCUs trap).

Built once per source text with the host C compiler into a per-user cache directory
($XDG_CACHE_HOME/eerie-c, else ~/.cache/eerie-c); `plugin_args(board)` is what qemu_command
adds for a board: the plugin for RISC-V boards, nothing for Arm ones (the ARMv6-M start-up
code sets CCR.UNALIGN_TRP instead; ARMv7-M and later allow unaligned word accesses).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..errors import EerieError
from ..resources import resource_dir
from .boards import Board

SOURCE = "qemu_align_plugin.c"


def _cache_dir() -> Path:
    """$XDG_CACHE_HOME/eerie-c or ~/.cache/eerie-c; a per-user temporary directory when that
    cannot be created (a read-only home)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    d = Path(base) / "eerie-c"
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError:
        d = Path(tempfile.gettempdir()) / f"eerie-c-{os.getuid()}"
        d.mkdir(parents=True, exist_ok=True)
    return d


def plugin_path() -> Path:
    """The built plugin (built now if this source text has not been built before)."""
    src = resource_dir("runtime_c") / SOURCE
    text = src.read_bytes()
    out = _cache_dir() / f"qemu_align_{hashlib.sha256(text).hexdigest()[:16]}.so"
    if out.is_file():
        return out
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise EerieError("the RISC-V boards' misaligned-access check (a QEMU plugin) needs a host "
                         "C compiler (Debian: apt-get install gcc)")
    tmp = out.with_name(f"{out.stem}.{os.getpid()}.tmp")   # concurrent builds: rename is atomic
    p = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-o", str(tmp), str(src)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise EerieError(f"building the QEMU misaligned-access plugin failed: {p.stderr.strip()}")
    tmp.replace(out)
    return out


def plugin_args(board: Board) -> list[str]:
    return ["-plugin", str(plugin_path())] if board.family == "riscv" else []
