"""Build generated sources with a real C compiler."""
from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

from ..errors import CompilerBug, EerieError
from .targets import Target


def run_cmd(cmd: list[str], cwd: Path, what: str, timeout: int = 600) -> subprocess.CompletedProcess:
    if shutil.which(cmd[0]) is None:
        raise EerieError(f"{what}: '{cmd[0]}' is not installed")
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        # Generated C that fails to build is our bug, not the user's.
        raise CompilerBug(f"{what} failed ({shlex.join(cmd)}):\n{p.stdout}{p.stderr}")
    return p


def build_host(out_dir: Path, name: str, target: Target, extra_sources: list[str],
               exe: str = "model_host", extra_flags: list[str] | None = None) -> Path:
    cmd = [target.cc, *shlex.split(target.cflags), *(extra_flags or []), "-I.",
           f"{name}.c", *extra_sources, "-o", exe, "-lm"]
    run_cmd(cmd, out_dir, "host build")
    return out_dir / exe
