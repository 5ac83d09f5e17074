"""pytest plugin: when the environment variable CI is set (.ci/run exports CI=1), a skipped
test is a failed test. CI has every tool and model, so a skip there can only mean a test that
silently stopped testing; locally skips stay skips (and -rs lists them)."""
from __future__ import annotations

import os

import pytest


def _ci() -> bool:
    return bool(os.environ.get("CI"))


def _reason(longrepr) -> str:
    # A skip's longrepr is (file, line, "Skipped: reason").
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    # xfail is reported as skipped too, with wasxfail set: an expected failure, not a skip.
    if _ci() and rep.skipped and not hasattr(rep, "wasxfail"):
        rep.outcome = "failed"
        rep.longrepr = f"skipped under CI (CI is set, so skips are failures): {_reason(rep.longrepr)}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    # A whole module skipped at collection (pytest.importorskip, allow_module_level) never
    # reaches pytest_runtest_makereport.
    outcome = yield
    rep = outcome.get_result()
    if _ci() and rep.skipped:
        rep.outcome = "failed"
        rep.longrepr = f"module skipped under CI (CI is set, so skips are failures): {_reason(rep.longrepr)}"


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    # Backstop for skips that reach the terminal another way (e.g. from an xdist worker):
    # any "skipped" entry in the summary fails the run.
    if not _ci():
        return
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = tr.stats.get("skipped", []) if tr is not None else []
    skipped = [r for r in skipped if not hasattr(r, "wasxfail")]
    if skipped and session.exitstatus == 0:
        tr.write_line(f"CI is set: {len(skipped)} test(s) skipped, failing the run", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
