"""--target cortex-m (the generic ARMv7-M build: no DSP, soft float) says which cores it suits
and what the core-specific target saves on this model, in the CLI's summary line, --report and
report.md; no other target says it."""
import json
import re
import subprocess
import sys

import numpy as np
import pytest

from eerie_c.api import compile_model
from eerie_c.estimate import estimate_op
from tflite_builder import ModelBuilder

ADVICE = "generic Cortex-M (ARMv7-M, no DSP, soft float; runs on any M3 or later)"
TIMES = re.compile(r"estimated (\d+\.\d) times fewer instructions for this model")


def _cli(*args):
    p = subprocess.run([sys.executable, "-m", "eerie_c.cli", *map(str, args)], capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_generic_target_names_the_cores_and_the_saving(models_dir, tmp_path):
    """kws: the summary line's N is the cortex-m estimate over the same layers estimated for
    cortex-m4 (about 20M against 3.5M), and the real cortex-m4 compile's own estimate agrees."""
    out = tmp_path / "kws"
    stdout = _cli(models_dir / "kws_ref_model.tflite", "--target", "cortex-m", "-o", out, "--report")
    r = json.loads((out / "report.json").read_text())
    m4 = sum(estimate_op(op, "cortex-m4") for op in r["ops"])
    assert r["core_specific"] == {"target": "cortex-m4", "est_instructions": m4,
                                  "times_fewer": round(r["est_instructions"] / m4, 1)}
    n = r["core_specific"]["times_fewer"]
    assert 4.0 < n < 8.0, n   # kws: ~20.2M generic against ~3.5M with the DSP kernels
    summary = stdout.splitlines()[0]
    assert summary.startswith("eerie-c: wrote ") and ADVICE in summary
    assert "use --target cortex-m4/m7/m33" in summary and float(TIMES.search(summary).group(1)) == n
    assert f"  target: {ADVICE}" in stdout   # --report
    md = (out / "report.md").read_text()
    assert ADVICE in md and float(TIMES.search(md).group(1)) == n
    assert f"~{m4:,} against ~{r['est_instructions']:,}" in md

    # the estimate stands for what cortex-m4 compiles: its own estimate within 10%
    own = compile_model(models_dir / "kws_ref_model.tflite", None, target="cortex-m4").report
    assert abs(own["est_instructions"] - m4) <= 0.1 * own["est_instructions"], (own["est_instructions"], m4)
    assert "core_specific" not in own


@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m3", "cortex-m55", "host"])
def test_other_targets_say_nothing(tmp_path, target):
    """A core the user named (an M3 included: the generic build is its build) or the host."""
    rng = np.random.default_rng(0)
    mb = ModelBuilder()
    x = mb.input([1, 8, 8, 4], "int8", scale=0.05, zero_point=0)
    w = mb.const(rng.integers(-100, 100, (8, 3, 3, 4)), "int8", scale=[0.02] * 8, zero_point=[0] * 8)
    bias = mb.const(rng.integers(-50, 50, (8,)), "int32", scale=[0.001] * 8, zero_point=[0] * 8)
    y = mb.tensor([1, 8, 8, 8], "int8", scale=0.1, zero_point=0)
    mb.op("CONV_2D", [x, w, bias], [y], "Conv2DOptions", padding=0, strideW=1, strideH=1)
    mb.output(y)
    path = tmp_path / "m.tflite"
    path.write_bytes(mb.build())
    stdout = _cli(path, "--target", target, "-o", tmp_path / "o", "--report")
    assert "generic Cortex-M" not in stdout and "times fewer" not in stdout
    r = json.loads((tmp_path / "o" / "report.json").read_text())
    assert "core_specific" not in r
    assert "generic Cortex-M" not in (tmp_path / "o" / "report.md").read_text()
