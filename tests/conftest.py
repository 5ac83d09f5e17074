"""Shared test fixtures: the TFLM reference oracle and a compile-build-run helper."""
from __future__ import annotations

import functools
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import tflite
import pytest

sys.path.insert(0, str(Path(__file__).parent))

# Under CI (CI set in the environment) every skip fails the run: see tests/ci_skips.py.
pytest_plugins = ["ci_skips"]

# The code under test is this checkout's eerie_c, in this process and in every subprocess the
# tests start (`python -m eerie_c.cli` from a temporary cwd would otherwise import whatever copy
# pip last installed into site-packages).
ROOT = Path(__file__).resolve().parents[1]
os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])

# The MLPerf Tiny models ship with the project (models/mlperf_tiny/README.md: provenance, licence).
MODELS = ROOT / "models" / "mlperf_tiny"


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


@functools.lru_cache(maxsize=None)
def input_specs(model: Path) -> tuple[dict, ...]:
    """The model's inputs as report["inputs"] lists them ({"shape", "dtype"}), read from the
    file (the frontend's load alone), not from a whole compile."""
    from eerie_c.frontend import load_model
    g = load_model(Path(model))
    return tuple({"shape": list(g.t(t).shape) or [1], "dtype": g.t(t).dtype} for t in g.inputs)


def eerie_run(model: bytes | Path, inputs: list[np.ndarray], tmp_path: Path, name: str = "m", **kw):
    """run_model on the layer-by-layer kernels (patch "off") unless the test passes patch=:
    the kernel tests that call this (and assert_matches_tflm, assert_board_matches_tflm) are
    about each op's kernel, not the patch stage the default `--patch auto` may choose for a
    small conv chain (tests/patch tests those)."""
    from eerie_c.api import run_model
    kw.setdefault("patch", "off")
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


# Float outputs, per element: |got_i - ref_i| <= rtol * |ref_i| + rtol * FLOAT_FLOOR * M, where
# M = max |ref| over that output and rtol = 1e-5 (capped at rtol * M, the older whole-output
# bound). Every element is within 1e-5 of its own value plus an absolute floor of 1e-7 * M,
# which only matters for elements near zero (|ref_i| around 1% of M or less): a sum that
# cancels to nearly zero (conv, fully connected, transpose conv) carries rounding errors of the
# size of its terms, not of its result, and TFLM and eerie-c add the terms in different orders.
# (Largest excess over 1e-5 * |ref_i| in tests/ops: 1.6e-8 * M, test_transpose_conv_geometry
# float32; then test_fc_activations float32, 7e-9 * M.) NaN must meet NaN and an infinity the
# same infinity.
FLOAT_FLOOR = 1e-2


def assert_float_close(got: np.ndarray, ref: np.ndarray, rtol: float = 1e-5, what: str = "output"):
    """The float comparison above, per element; the message names the worst elements."""
    g, r = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    assert g.shape == r.shape, (what, g.shape, r.shape)
    assert np.array_equal(np.isnan(g), np.isnan(r)), f"{what}: NaNs differ"
    g, r = np.where(np.isnan(g), 0.0, g), np.where(np.isnan(r), 0.0, r)
    if r.size == 0:
        return
    finite = np.isfinite(r)
    m = float(np.abs(r[finite]).max(initial=0.0))
    floor = rtol * FLOAT_FLOOR * m
    # never above rtol * m (the older whole-output bound); an infinity must match exactly
    tol = np.where(finite, np.minimum(rtol * np.abs(np.where(finite, r, 0.0)) + floor, rtol * m), 0.0)
    with np.errstate(invalid="ignore"):              # inf - inf
        err = np.where(g == r, 0.0, np.abs(g - r))
    bad = np.flatnonzero(~(err <= tol))
    if bad.size:
        worst = bad[np.argsort(-(err.flat[bad] / np.maximum(tol.flat[bad], 1e-300)))][:5]
        rows = ", ".join(f"{[int(j) for j in np.unravel_index(i, r.shape)]} got {g.flat[i]:.9g} "
                         f"ref {r.flat[i]:.9g}" for i in worst)
        raise AssertionError(f"{what}: {bad.size} of {r.size} elements beyond {rtol:g} x |ref| + "
                             f"{floor:.3g} ({rtol:g} x {FLOAT_FLOOR:g} x max|ref|): {rows}")


def assert_matches_tflm(model: bytes, inputs: list[np.ndarray], tmp_path: Path, rtol: float = 1e-5,
                        labels: list[str] | None = None):
    """int outputs bit-exact; float outputs per element within rtol (assert_float_close).
    `labels` names the outputs in failure messages (a model with many small ops)."""
    ref = tflm_run(model, inputs)
    got, _ = eerie_run(model, inputs, tmp_path)
    assert len(got) == len(ref)
    for k, (g, r) in enumerate(zip(got, ref)):
        what = f"output {k}" + (f" ({labels[k]})" if labels else "")
        assert g.shape == r.shape and g.dtype == r.dtype, (what, g.shape, r.shape, g.dtype, r.dtype)
        if np.issubdtype(r.dtype, np.floating):
            assert_float_close(g, r, rtol, what)
        else:
            np.testing.assert_array_equal(g, r, err_msg=what)
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



def assert_board_matches_tflm(model: bytes, xs: list[np.ndarray], tmp_path: Path, board: str,
                              core: str, name: str = "m", **kw) -> dict:
    """Run `model` on `board` in QEMU and check what every board test checks: the report names
    the board and the core (its report's target), int outputs equal TFLM's bit for bit and float outputs are within
    1e-5 of the output range, and the measured stack stays under both proven bounds. Returns
    the run's report for the test's own checks."""
    ref = tflm_run(model, xs)
    got, rep = eerie_run(model, xs, tmp_path, name=name, board=board, **kw)
    assert rep["board"] == board and rep["target"] == core, (rep["board"], rep["target"])
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        if r.dtype.kind == "f":
            span = max(float(np.abs(r).max()), 1e-6)
            np.testing.assert_allclose(g, r, rtol=0, atol=1e-5 * span)
        else:
            np.testing.assert_array_equal(g, r)
    assert_invoke_stack_within_bound(rep)
    assert rep["stack_high_water_bytes"] <= rep["firmware_stack_bound_bytes"] <= rep["stack_reserve_bytes"]
    return rep

@pytest.fixture(scope="session")
def models_dir() -> Path:
    if not MODELS.is_dir():
        pytest.fail(f"models not found at {MODELS}: they ship in the repository (models/mlperf_tiny)")
    return MODELS


def have_tool(name: str) -> bool:
    return shutil.which(name) is not None


# The cross toolchain and QEMU a firmware build-and-run needs (nm and readelf: tests that look
# inside the ELF). CI installs all of them (.ci/setup).
BOARD_TOOLS = ("arm-none-eabi-gcc", "arm-none-eabi-size", "arm-none-eabi-nm", "arm-none-eabi-readelf",
               "make", "qemu-system-arm")
INSTALL_HINT = ("apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm make gcc "
                "(.ci/setup does this)")
# The same for the RISC-V boards (riscv-virt, sifive_e)
RISCV_BOARD_TOOLS = ("riscv64-unknown-elf-gcc", "riscv64-unknown-elf-size", "riscv64-unknown-elf-nm",
                     "riscv64-unknown-elf-objdump", "make", "qemu-system-riscv32")
RISCV_INSTALL_HINT = ("apt-get install gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf "
                      "qemu-system-misc make (.ci/setup does this)")


def require_tools(*tools: str, hint: str = INSTALL_HINT) -> None:
    """FAIL (never skip) when a tool is missing: a skipped toolchain test would let a broken
    build pass unnoticed on a machine that happens to lack the tool."""
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.fail(f"this test needs {', '.join(missing)} on PATH: {hint}", pytrace=False)


def require_board_tools(board: str) -> None:
    """The toolchain and QEMU of `board`'s architecture (a name or a board file)."""
    from eerie_c.toolchain.boards import get_board
    if get_board(board).family == "riscv":
        require_tools(*RISCV_BOARD_TOOLS, hint=RISCV_INSTALL_HINT)
    else:
        require_tools(*BOARD_TOOLS)


@pytest.fixture(scope="session")
def board_tools():
    """Firmware build + QEMU run: fails loudly without the cross toolchain and QEMU."""
    require_tools(*BOARD_TOOLS)


@pytest.fixture(scope="session")
def cross_cc():
    """arm-none-eabi-gcc only (compile for Cortex-M, no QEMU run): fails loudly without it."""
    require_tools("arm-none-eabi-gcc")


@pytest.fixture(scope="session")
def host_cc():
    """The host C compiler (gcc: the C proof preprocesses with it): fails loudly without it."""
    require_tools("gcc")


@pytest.fixture(autouse=True, scope="session")
def _eerie_c_is_this_checkout():
    import eerie_c
    assert Path(eerie_c.__file__).resolve().is_relative_to(ROOT), (
        f"tests import eerie_c from {eerie_c.__file__}, not from this checkout {ROOT}")
