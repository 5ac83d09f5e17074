"""A real eerie-c process killed while it moves its files into place (SIGTERM, SIGINT, SIGHUP)
leaves the previous output directory exactly as it was and no temporary directory; one killed
with SIGKILL cannot clean up, so the next write removes what it left.

The test hook EERIE_TEST_PAUSE_IN_WRITE (eerie_c/output.py; test-only) makes write_files stop
for that many seconds once half of the files are in place and say so on stderr: the signal
arrives exactly while the directory holds a mix of old and new files.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_determinism import small_model as fc_model, snapshot

from eerie_c import output
from eerie_c.api import compile_model


@pytest.fixture()
def previous(tmp_path):
    m = tmp_path / "m.tflite"
    m.write_bytes(fc_model(0))
    out = tmp_path / "out"
    compile_model(m, out, name="m")
    m.write_bytes(fc_model(1))     # the next compile would change every model file
    return m, out, snapshot(out)


def start_paused(m: Path, out: Path, *extra) -> subprocess.Popen:
    """eerie-c compiling m into out, stopped half-way through moving files into place."""
    env = dict(os.environ, **{output.PAUSE_ENV: "60"})
    p = subprocess.Popen([sys.executable, "-m", "eerie_c.cli", "-q", str(m), "-o", str(out),
                          "--name", "m", *extra], env=env, stderr=subprocess.PIPE, text=True)
    line = p.stderr.readline()     # blocks until the hook has paused
    assert line.strip() == output.PAUSE_MARK, line
    return p


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_signal_mid_write_restores_previous_output(previous, tmp_path, sig):
    m, out, before = previous
    p = start_paused(m, out)
    assert snapshot(out) != before            # some new files are in place already
    p.send_signal(getattr(signal, sig))
    err = p.stderr.read()
    assert p.wait(timeout=60) == 130, err
    assert err.strip() == "eerie-c: interrupted" and "Traceback" not in err
    assert snapshot(out) == before
    assert [q.name for q in tmp_path.iterdir() if q.name.startswith(".")] == []


def test_signal_mid_write_into_a_new_directory_leaves_nothing(tmp_path):
    m = tmp_path / "m.tflite"
    m.write_bytes(fc_model(0))
    out = tmp_path / "fresh"
    p = start_paused(m, out)
    p.send_signal(signal.SIGTERM)
    p.stderr.read()
    assert p.wait(timeout=60) == 130
    assert sorted(q.name for q in tmp_path.iterdir()) == ["m.tflite"]


def test_sigkill_leftovers_are_removed_by_the_next_write(previous, tmp_path):
    m, out, before = previous
    p = start_paused(m, out)
    p.kill()
    p.wait(timeout=60)
    p.stderr.close()
    left = [q for q in tmp_path.iterdir() if q.name.startswith(".out.")]
    assert left, "a killed writer leaves its temporary directory"
    compile_model(m, out, name="m")
    assert [q for q in tmp_path.iterdir() if q.name.startswith(".")] == []
    assert snapshot(out) != before and (out / "m.c").is_file()


def test_a_live_writers_directory_is_left_alone(tmp_path):
    """Only directories of writers that no longer run are stale (two compiles into one place
    at once must not delete each other's files)."""
    live = tmp_path / f".out.{os.getpid()}.abcd1234"
    live.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    gone = tmp_path / f".out.{dead}.abcd1234"
    gone.mkdir()
    old = tmp_path / ".out.zz_9abcd"
    old.mkdir()
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    output.remove_stale_temp_dirs(tmp_path, "out")
    assert live.exists() and not gone.exists() and not old.exists()
