"""Writing an output directory all or nothing.

Every file is written into a temporary directory beside the output first (same file system,
so moving is a rename), then moved into place one by one, the previous version of each kept
until all are in. An exception while moving (an I/O error, Ctrl-C, and SIGTERM / SIGHUP,
which the command line turns into KeyboardInterrupt) puts the previous files back. Only
SIGKILL or a power cut can leave a temporary directory behind: the next write into the same
place removes it (the temporary directory's name carries the writer's process id, so a
directory a live writer is still using is left alone).
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

# Test-only hook (tests/robustness/test_interrupt.py): seconds to pause in write_files once
# half of the files have been moved into place, announced by one line on stderr, so that a
# test can kill the process exactly there. Never set it in normal use.
PAUSE_ENV = "EERIE_TEST_PAUSE_IN_WRITE"
PAUSE_MARK = "eerie-c: test hook: paused in write_files"
_OLD_STYLE_STALE_SECONDS = 60   # temp dirs of versions that did not name their writer


def write_files(out_dir: Path, files: dict[str, str | bytes]):
    """Write all files to a temporary directory first, then move each into place: a failed
    or interrupted compile never leaves a half-written output directory."""
    out_dir = Path(out_dir)
    parent = out_dir.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temp_dirs(parent, out_dir.name)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.{os.getpid()}.", dir=parent))
    try:
        for rel, text in sorted(files.items()):
            p = tmp / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(text, bytes):
                p.write_bytes(text)
            else:
                # Model-supplied text (file and tensor names) may hold any code point.
                p.write_text(text, encoding="utf-8", errors="backslashreplace")
        _move_into_place(tmp, out_dir, sorted(files))
    finally:
        with signals_held():   # a second signal must not cut the clean-up short
            shutil.rmtree(tmp, ignore_errors=True)


def _move_into_place(tmp: Path, out_dir: Path, names: list[str]):
    created = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    backup, moved = tmp / ".previous", []
    pause = _test_pause()
    try:
        for k, rel in enumerate(names):
            if pause and k == max(1, len(names) // 2):
                print(PAUSE_MARK, file=sys.stderr, flush=True)
                time.sleep(pause)
            dest = out_dir / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            if dest.is_file():   # keep the previous version until every file is in place
                (backup / rel).parent.mkdir(parents=True, exist_ok=True)
                _keep_copy(dest, backup / rel)
            moved.append(rel)
            os.replace(tmp / rel, dest)
    except BaseException:
        # Interrupted half-way (Ctrl-C, SIGTERM, I/O error): put the previous files back.
        with signals_held():
            for rel in reversed(moved):
                try:
                    if (backup / rel).exists():
                        os.replace(backup / rel, out_dir / rel)
                    elif (out_dir / rel).exists():
                        (out_dir / rel).unlink()
                except OSError:
                    pass
            if created:
                shutil.rmtree(out_dir, ignore_errors=True)
        raise


def _test_pause() -> float:
    try:
        return max(float(os.environ.get(PAUSE_ENV, "0")), 0.0)
    except ValueError:
        return 0.0


def _keep_copy(src: Path, dst: Path):
    try:
        os.link(src, dst)          # same directory tree: a hard link costs nothing
    except OSError:
        shutil.copy2(src, dst)


def remove_stale_temp_dirs(parent: Path, name: str):
    """Temporary directories `.NAME.PID.xxxx` of writers that no longer run (killed with
    SIGKILL mid-write), and old-style `.NAME.xxxxxxxx` ones older than a minute."""
    ours = re.compile(re.escape(f".{name}.") + r"(\d+)\.[A-Za-z0-9_]{8}")
    old = re.compile(re.escape(f".{name}.") + r"[A-Za-z0-9_]{8}")
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return
    for e in entries:
        if not e.is_dir(follow_symlinks=False):
            continue
        m = ours.fullmatch(e.name)
        try:
            stale = (not _alive(int(m.group(1)))) if m else (
                old.fullmatch(e.name) is not None
                and time.time() - e.stat(follow_symlinks=False).st_mtime > _OLD_STYLE_STALE_SECONDS)
        except OSError:
            continue
        if stale:
            shutil.rmtree(e.path, ignore_errors=True)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True   # another user's process: leave its directory alone
    return True


_HELD = tuple(s for s in (getattr(signal, "SIGINT", None), getattr(signal, "SIGTERM", None),
                          getattr(signal, "SIGHUP", None)) if s is not None)


@contextmanager
def signals_held():
    """Delay SIGINT / SIGTERM / SIGHUP (delivered when the block ends) so that restoring the
    previous files is not itself interrupted."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
