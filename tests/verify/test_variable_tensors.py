"""Variable (state) tensors: TFLite is_variable tensors persist across invocations in their
own static storage, outside the arena, restored by NAME_reset_state(). Stateful kernels
(SVDF, LSTM) are tested in tests/ops; here: the storage, its initial contents (what TFLM
resets a variable tensor to), the plan proof and the report."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from conftest import assert_matches_tflm
from tflite_builder import ModelBuilder


def _add_variable(dtype: str, var_data=None):
    """y = x + v where v is a variable tensor no op writes (so it keeps its initial value)."""
    mb = ModelBuilder()
    q = dict(scale=0.1, zero_point=3) if dtype == "int8" else {}
    vq = dict(scale=0.1, zero_point=-7) if dtype == "int8" else {}
    x = mb.input([1, 4], dtype, **q)
    v = mb.variable([1, 4], dtype, data=var_data, **vq)
    y = mb.tensor([1, 4], dtype, **q)
    mb.op("ADD", [x, v], [y], "AddOptions", fusedActivationFunction=0)
    mb.output(y)
    return mb.build()


def test_int8_variable_starts_at_zero_point(tmp_path):
    # TFLM resets an int8 variable to its zero point (real 0), not to byte 0.
    xs = np.arange(-8, 8, dtype=np.int8).reshape(4, 1, 4)
    got, _ = assert_matches_tflm(_add_variable("int8"), [xs], tmp_path)
    np.testing.assert_array_equal(got[0], xs)


def test_variable_buffer_is_ignored_like_tflm(tmp_path):
    # A buffer on a variable tensor does not change its initial contents in TFLM.
    xs = np.arange(8, dtype=np.float32).reshape(2, 1, 4)
    got, _ = assert_matches_tflm(_add_variable("float32", np.full((1, 4), 5.0, np.float32)),
                                 [xs], tmp_path)
    np.testing.assert_array_equal(got[0], xs)


def test_state_storage_reset_and_report(tmp_path):
    from eerie_c.api import compile_model
    p = tmp_path / "v.tflite"
    p.write_bytes(_add_variable("int8"))
    res = compile_model(p, out_dir=tmp_path / "out")
    c, h = res.files["v.c"], res.files["v.h"]
    assert "static int8_t v_state0[4]" in c and "void v_reset_state(void)" in c
    assert "memset(v_state0, 249, sizeof v_state0);" in c     # -7 as a byte
    assert "#define V_STATE_BYTES 4" in h and "void v_reset_state(void);" in h
    assert res.report["state_bytes"] == 4
    plan = res.extra["plan"]
    assert plan.state_bytes == 4 and all(p.base != "state" for p in plan.scratch.values())
    assert "t1" not in [m for b in plan.buffers for m in b.members]   # not an arena buffer
    assert any(v.get("state_bytes") == 4 for v in res.report["verified"] if v["check"] == "arena_plan")


def test_plan_proof_rejects_state_in_the_arena(tmp_path):
    from eerie_c.errors import CompilerBug
    from eerie_c.frontend import load_model
    from eerie_c.kernels import lower_graph
    from eerie_c.passes import run_passes
    from eerie_c.plan import plan_memory, prove_plan
    p = tmp_path / "v.tflite"
    p.write_bytes(_add_variable("float32"))
    g = run_passes(load_model(p, "v"))
    lower_graph(g)
    plan = plan_memory(g)
    prove_plan(g, plan)
    bad = dataclasses.replace(plan, tensors={**plan.tensors, "t1": dataclasses.replace(
        plan.tensors["t1"], base="arena")}, state={})
    with pytest.raises(CompilerBug, match="state storage"):
        prove_plan(g, bad)
    short = dataclasses.replace(plan, state={"t1": dataclasses.replace(plan.state["t1"], size=8)})
    with pytest.raises(CompilerBug):
        prove_plan(g, short)


def test_reset_state_restores_the_initial_state(tmp_path, host_cc):
    """In C: three invocations of a stateful SVDF drift; after NAME_reset_state() the next
    invocation gives the first one's output again."""
    import shutil
    import subprocess
    from eerie_c.api import compile_model
    from ops.test_svdf import svdf_int8
    cc = shutil.which("gcc")
    p = tmp_path / "sv.tflite"
    p.write_bytes(svdf_int8(state_dtype="int8", state_zp=-4, rank=2))
    compile_model(p, out_dir=tmp_path / "out")
    (tmp_path / "out" / "drv.c").write_text("""
#include <stdio.h>
#include <string.h>
#include "sv.h"
int main(void)
{
    static const int8_t x[SV_INPUT0_ELEMENTS] = {90, -100, 7, 33, -64, 120, 5, -9};
    int8_t first[SV_OUTPUT0_ELEMENTS], y[SV_OUTPUT0_ELEMENTS];
    int k, drift = 0;
    sv_invoke(x, first);
    for (k = 0; k < 3; ++k) {
        sv_invoke(x, y);
        drift |= memcmp(first, y, sizeof y) != 0;
    }
    sv_reset_state();
    sv_invoke(x, y);
    printf("%d %d\\n", drift, memcmp(first, y, sizeof y) == 0);
    return 0;
}
""")
    exe = tmp_path / "out" / "drv"
    subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-O1", "-o", str(exe),
                    "drv.c", "sv.c", "-lm"], cwd=tmp_path / "out", check=True)
    assert subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split() == ["1", "1"]
