"""tests/ci_skips.py: under CI=1 a skipped test (skip in the body, in a fixture, a skipif mark, a
module-level importorskip) fails the run, also under xdist as .ci/run runs it; without CI a
skip stays a skip; an xfail is not a skip."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

SKIPPING = '''
import pytest

@pytest.fixture
def needs_thing():
    pytest.skip("thing missing")

def test_body_skip():
    pytest.skip("tool missing")

@pytest.mark.skipif(True, reason="never runs")
def test_mark_skip():
    pass

def test_fixture_skip(needs_thing):
    pass

@pytest.mark.xfail(reason="known", strict=True)
def test_expected_failure():
    assert False

def test_passes():
    pass
'''

MODULE_SKIP = '''
import pytest
pytest.importorskip("no_such_module_eerie")

def test_never():
    pass
'''


def _pytest(tmp_path: Path, ci: bool, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci:
        env["CI"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])
    # -p ci_skips loads the plugin alone (no tests/conftest.py: the tmp dir is its own rootdir).
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "ci_skips", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), *args, str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("xdist", [False, True], ids=["serial", "xdist"])
def test_skips_fail_under_ci(tmp_path, xdist):
    (tmp_path / "test_skipping.py").write_text(SKIPPING)
    p = _pytest(tmp_path, True, *(["-n", "2"] if xdist else []))
    out = p.stdout + p.stderr
    assert p.returncode == 1, out
    # A skip in the test body fails it; one in set-up (a skipif mark, a fixture) errors it.
    assert "1 failed" in out and "2 error" in out and "1 passed" in out and "1 xfailed" in out, out
    assert "skipped" not in out.strip().splitlines()[-1], out
    for reason in ("tool missing", "never runs", "thing missing"):
        assert reason in out, out


def test_module_level_skip_fails_under_ci(tmp_path):
    (tmp_path / "test_module.py").write_text(MODULE_SKIP)
    p = _pytest(tmp_path, True)
    out = p.stdout + p.stderr
    assert p.returncode != 0 and "no_such_module_eerie" in out, out


def test_skips_stay_skips_without_ci(tmp_path):
    (tmp_path / "test_skipping.py").write_text(SKIPPING)
    (tmp_path / "test_module.py").write_text(MODULE_SKIP)
    p = _pytest(tmp_path, False)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert "1 passed" in out and "4 skipped" in out and "1 xfailed" in out, out


def test_ci_entry_point_sets_ci():
    """.ci/run must export CI before it runs pytest, or the rule above never applies in CI."""
    lines = (TESTS.parent / ".ci" / "run").read_text().splitlines()
    pytest_line = next(i for i, ln in enumerate(lines) if "pytest" in ln and not ln.startswith("#"))
    assert any(ln.strip() == "export CI=1" for ln in lines[:pytest_line]), lines
