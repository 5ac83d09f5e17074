"""Shared test fixtures: the TFLM reference oracle and a compile-build-run helper."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import numpy as np
import tflite
import pytest

sys.path.insert(0, str(Path(__file__).parent))

# The code under test is this checkout's eerie_c, in this process and in every subprocess the
# tests start (`python -m eerie_c.cli` from a temporary cwd would otherwise import whatever copy
# pip last installed into site-packages).
ROOT = Path(__file__).resolve().parents[1]
os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])

MODELS = Path(__file__).resolve().parents[2] / "shared" / "models"
if not MODELS.is_dir():
    MODELS = Path(os.environ.get("EERIE_SHARED_MODELS", "../shared/models")).resolve()


def tflm_run(model: bytes | Path, inputs: list[np.ndarray], arena: int = 2_000_000) -> list[np.ndarray]:
    """Run one inference per leading index of `inputs` on TFLM's reference kernels."""
    from tflite_micro.python.tflite_micro import runtime
    data = Path(model).read_bytes() if isinstance(model, (str, Path)) else model
    it = runtime.Interpreter.from_bytes(data, arena_size=arena)
    n_out = tflite.Model.GetRootAs(data, 0).Subgraphs(0).OutputsLength()
    n = inputs[0].shape[0]
    outs = []
    for i in range(n):
        for k, x in enumerate(inputs):
            it.set_input(x[i], k)
        it.invoke()
        outs.append([it.get_output(k).copy() for k in range(n_out)])
    return [np.stack([o[k] for o in outs]) for k in range(len(outs[0]))]


def eerie_run(model: bytes | Path, inputs: list[np.ndarray], tmp_path: Path, name: str = "m", **kw):
    from eerie_c.api import run_model
    if isinstance(model, (bytes, bytearray)):
        p = tmp_path / f"{name}.tflite"
        p.write_bytes(model)
        model = p
    return run_model(model, inputs, **kw)


def random_inputs(shape, dtype, n, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    if dtype in ("int8", np.int8):
        return rng.integers(-128, 128, size=(n, *shape), dtype=np.int8)
    if dtype in ("int16", np.int16):
        return rng.integers(-32768, 32768, size=(n, *shape), dtype=np.int16)
    return (rng.standard_normal(size=(n, *shape)) * scale).astype(np.float32)


def assert_matches_tflm(model: bytes, inputs: list[np.ndarray], tmp_path: Path, rtol: float = 1e-5):
    """int outputs bit-exact; float outputs within rtol of the output range."""
    ref = tflm_run(model, inputs)
    got, _ = eerie_run(model, inputs, tmp_path)
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        assert g.shape == r.shape and g.dtype == r.dtype
        if np.issubdtype(r.dtype, np.floating):
            span = max(float(np.abs(r).max()), 1e-6)
            np.testing.assert_allclose(g, r, rtol=0, atol=rtol * span)
        else:
            np.testing.assert_array_equal(g, r)
    return got, ref


def assert_invoke_stack_within_bound(report: dict):
    """The acceptance check on a board run: NAME_invoke's stack measured in QEMU stays under
    the bound proven at compile time, and that bound is useful (within 2x of it). The firmware
    repaints the stack before each call, but SysTick can still fire inside NAME_invoke and
    push its exception frame and handler onto the measured stack; the invoke bound leaves
    that out (it is per model, the interrupt per firmware), so the sound comparison adds the
    report's interrupt allowance. Tightness is judged on the bound alone."""
    for key in ("invoke_stack_bytes", "stack_bound_bytes", "stack_interrupt_allowance_bytes"):
        assert key in report, f"report has no {key}: {sorted(report)}"
    measured, bound = report["invoke_stack_bytes"], report["stack_bound_bytes"]
    allowance = report["stack_interrupt_allowance_bytes"]
    assert allowance > 0, allowance   # a board target: interrupts land on this stack
    assert 0 < measured <= bound + allowance, (measured, bound, allowance)
    assert bound <= 2 * measured, (measured, bound)


@pytest.fixture(scope="session")
def models_dir() -> Path:
    if not MODELS.is_dir():
        pytest.fail(f"shared models not found at {MODELS}: tests need ../shared/models beside the checkout")
    return MODELS


def have_tool(name: str) -> bool:
    return shutil.which(name) is not None


@pytest.fixture(autouse=True, scope="session")
def _eerie_c_is_this_checkout():
    import eerie_c
    assert Path(eerie_c.__file__).resolve().is_relative_to(ROOT), (
        f"tests import eerie_c from {eerie_c.__file__}, not from this checkout {ROOT}")
