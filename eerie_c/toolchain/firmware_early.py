"""The firmware stack bound's compiles of the sources other than the model's (the harness and
the runtime), started while the model itself is verified.

A board compile proves the whole firmware's stack (firmware.prove_firmware_stack): `make
stack` builds each source with -fstack-usage -fcallgraph-info=su, taking the model's own call
graph from the identical compile its stack bound made (verify/ci_cache.py). The other sources
do not depend on the verification, and their compiles (0.3-0.5 s) ran after it, alone. Here
they run beside it: the project is written to a scratch directory and `make -B stack
NAME_SRCS=` started in a thread as soon as the C is emitted. prove_firmware_stack takes that
directory only if the project it is given is, file for file, the one built here; otherwise
(or if this build failed: the usual path then reports the error) it builds as before. The
bound itself is computed the same way from the same call graphs either way.
"""
from __future__ import annotations

import shutil
import tempfile
import threading
import weakref
from pathlib import Path

from .build import run_cmd


def write_project(d: Path, files: dict[str, str | bytes]) -> None:
    for rel, data in files.items():
        p = Path(d) / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            p.write_bytes(data)
        else:
            p.write_text(data, encoding="utf-8", errors="backslashreplace")


def _remove(thread: threading.Thread, d: Path) -> None:
    thread.join()
    shutil.rmtree(d, ignore_errors=True)


class EarlyFirmwareStack:
    """`make -B stack NAME_SRCS=` on a firmware project, in a background thread."""

    def __init__(self, files: dict[str, str | bytes], model: str):
        self.files = dict(files)
        self.model = model
        self.error: BaseException | None = None
        self.dry_run: str | None = None
        self.dir = Path(tempfile.mkdtemp(prefix="eerie-stack-"))
        self.thread = threading.Thread(target=self._build, name="eerie-firmware-stack", daemon=True)
        self.thread.start()
        # The directory goes when the job is done with, or at exit (a compile that failed).
        self.stop = weakref.finalize(self, _remove, self.thread, self.dir)

    def _build(self) -> None:
        try:
            write_project(self.dir, self.files)
            # what the model's compile in `make stack` would be, for ci_cache.recall later
            self.dry_run = run_cmd(["make", "--no-print-directory", "-n", "-B", "stack"], self.dir,
                                   "make -n stack").stdout
            run_cmd(["make", "--no-print-directory", "-B", "stack", f"{self.model.upper()}_SRCS="],
                    self.dir, "firmware stack usage")
        except BaseException as e:   # reported by the usual path, which runs instead
            self.error = e

    def project(self, files: dict[str, str | bytes]) -> Path | None:
        """The project directory, its stack/ holding every source's call graph but the
        model's, if it was built from exactly `files`; else None."""
        self.thread.join()
        if self.error is not None or files != self.files:
            return None
        return self.dir


def start(files: dict[str, str | bytes], model: str) -> EarlyFirmwareStack | None:
    """Start the early build of the firmware project `files` (what add_firmware will make:
    the model's files, its arena size known, the verification not yet run) for model NAME
    `model`; None without make."""
    if shutil.which("make") is None:
        return None
    return EarlyFirmwareStack(files, model)
