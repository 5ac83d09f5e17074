"""The generated C of every shared model under AddressSanitizer and UndefinedBehaviorSanitizer
(-fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all): random inputs
and extremes (all -128, all 127, zeros; NaN, +-inf, huge and denormal floats for float
models) run with no sanitizer report, and int8 results stay bit-exact with TFLM."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conftest import random_inputs, tflm_run  # noqa: E402

from eerie_c import __version__  # noqa: E402
from eerie_c.api import compile_model  # noqa: E402
from eerie_c.emit import render  # noqa: E402
from eerie_c.emit.c import io_info  # noqa: E402
from eerie_c.toolchain.build import build_host  # noqa: E402
from eerie_c.toolchain.targets import get_target  # noqa: E402

MODELS = ["kws_ref_model", "vww_96_int8", "pretrainedResnet_quant", "ad01_int8",
          "pretrainedResnet", "ad01_fp32"]
SANITIZE = ["-fsanitize=address,undefined,float-cast-overflow", "-fno-sanitize-recover=all",
            "-fno-omit-frame-pointer", "-g"]
REPORT_MARKERS = ("runtime error", "AddressSanitizer", "UndefinedBehaviorSanitizer", "LeakSanitizer")


def extreme_inputs(shape, dtype, seed):
    shape = list(shape)
    rng = np.random.default_rng(seed)
    xs = [random_inputs(shape, dtype, 4, seed=seed)]
    if dtype == "int8":
        for v in (-128, 127, 0):
            xs.append(np.full((1, *shape), v, np.int8))
        alt = np.where(np.indices(shape).sum(axis=0) % 2 == 0, -128, 127).astype(np.int8)
        xs.append(alt[None])
    else:
        specials = [np.nan, np.inf, -np.inf, 3.0e38, -3.0e38, 1e-45, 0.0, -0.0]
        for v in specials:
            xs.append(np.full((1, *shape), v, np.float32))
        mixed = rng.choice(np.array(specials + [1.0, -1.0], np.float32), size=shape)
        xs.append(mixed[None].astype(np.float32))
        xs.append((rng.standard_normal((1, *shape)) * 1e4).astype(np.float32))
    return np.concatenate(xs).astype(dtype)


@pytest.mark.parametrize("model", MODELS)
def test_no_sanitizer_report(models_dir, model, tmp_path):
    path = models_dir / f"{model}.tflite"
    work = tmp_path / "san"
    res = compile_model(path, work, name="net")
    g = res.graph
    (work / "host_main.c").write_text(render(
        "host_main.c.j2", name="net", version=__version__,
        inputs=io_info(g, g.inputs), outputs=io_info(g, g.outputs)))
    exe = build_host(work, "net", get_target("host"), ["host_main.c"], exe="net_san",
                     extra_flags=SANITIZE)
    specs = res.report["inputs"]
    arrays = [extreme_inputs(s["shape"], s["dtype"], seed=k + 7) for k, s in enumerate(specs)]
    n = arrays[0].shape[0]
    (work / "inputs.bin").write_bytes(
        b"".join(b"".join(np.ascontiguousarray(a[i]).tobytes() for a in arrays) for i in range(n)))
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0:abort_on_error=0:halt_on_error=1",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    p = subprocess.run([str(exe), "inputs.bin", "outputs.bin"], cwd=work, capture_output=True,
                       text=True, timeout=600, env=env)
    report = [m for m in REPORT_MARKERS if m in p.stderr]
    assert p.returncode == 0 and not report, f"exit {p.returncode}:\n{p.stderr[-4000:]}"
    # Every record produced outputs; int8 ones are still bit-exact with TFLM.
    raw = (work / "outputs.bin").read_bytes()
    outs = res.report["outputs"]
    per = sum(o["bytes"] for o in outs)
    assert len(raw) == per * n
    if all(s["dtype"] == "int8" for s in specs):
        ref = tflm_run(path, arrays)
        pos = 0
        for i in range(n):
            for k, o in enumerate(outs):
                got = np.frombuffer(raw[pos:pos + o["bytes"]], np.int8).reshape(o["shape"])
                np.testing.assert_array_equal(got, ref[k][i], err_msg=f"record {i}")
                pos += o["bytes"]


@pytest.mark.parametrize("bug", [
    "static int8_t a[16]; int main(int c, char **v) { (void)v; return a[15 + c]; }",
    "int main(int c, char **v) { int x = 2147483647; (void)v; return (x + c) > 0; }",
])
def test_harness_catches_a_planted_bug(tmp_path, bug):
    """The same flags and checks do report an out-of-bounds read and a signed overflow here."""
    (tmp_path / "bug.c").write_text("#include <stdint.h>\n" + bug + "\n")
    subprocess.run(["cc", "-std=c99", "-O1", *SANITIZE, "bug.c", "-o", "bug"], cwd=tmp_path, check=True)
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0:halt_on_error=1", UBSAN_OPTIONS="halt_on_error=1")
    p = subprocess.run(["./bug"], cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode != 0 and any(m in p.stderr for m in REPORT_MARKERS), p.stderr
