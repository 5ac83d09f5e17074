"""Inputs planned inside the arena (compile_model/run_model inputs_in_arena; the default with a
board): NAME_inputK_buffer() points at the input's slot, NAME_invoke() skips the copy when
given that pointer and copies any other one in; the plan proof checks the inputs' slots like
every other arena tensor (live from before the first op); the firmware harness reads records
straight into the slot (no input buffer of its own in .bss)."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

from conftest import random_inputs, require_tools, tflm_run
from eerie_c.api import compile_model, run_model
from eerie_c.errors import CompilerBug
from eerie_c.plan import prove_plan
from tflite_builder import ACT, PAD, ModelBuilder


def two_input_model():
    """conv(a) + b -> conv: two int8 inputs, both read after the first op."""
    rng = np.random.default_rng(3)
    mb = ModelBuilder()
    a = mb.input([1, 6, 5, 4], "int8", scale=0.05, zero_point=-3)
    b = mb.input([1, 6, 5, 8], "int8", scale=0.07, zero_point=2)
    w = mb.const(rng.integers(-127, 128, (8, 3, 3, 4)), "int8", scale=list(rng.uniform(0.002, 0.02, 8)),
                 zero_point=[0] * 8, axis=0)
    y = mb.tensor([1, 6, 5, 8], "int8", scale=0.2, zero_point=1)
    mb.op("CONV_2D", [a, w, -1], [y], "Conv2DOptions", padding=PAD["SAME"], strideH=1, strideW=1,
          fusedActivationFunction=ACT["RELU"])
    s = mb.tensor([1, 6, 5, 8], "int8", scale=0.25, zero_point=-1)
    mb.op("ADD", [b, y], [s], "AddOptions", fusedActivationFunction=ACT["NONE"])
    w2 = mb.const(rng.integers(-127, 128, (3, 1, 1, 8)), "int8", scale=[0.01], zero_point=[0], axis=0)
    o = mb.tensor([1, 6, 5, 3], "int8", scale=0.3, zero_point=0)
    mb.op("CONV_2D", [s, w2, -1], [o], "Conv2DOptions", padding=PAD["SAME"], strideH=1, strideW=1,
          fusedActivationFunction=ACT["NONE"])
    mb.output(o)
    return mb.build(), [[1, 6, 5, 4], [1, 6, 5, 8]]


DIRECT_MAIN = r"""
#include <stdio.h>
#include <string.h>
#include "m.h"
/* writes each record's inputs straight into the arena slots, then one more inference from a
 * buffer of its own (the copy path), and checks both give the same outputs */
static int8_t out_a[M_OUTPUT0_ELEMENTS], out_b[M_OUTPUT0_ELEMENTS];
static int8_t own0[M_INPUT0_BYTES], own1[M_INPUT1_BYTES];
int main(int argc, char **argv)
{
    FILE *in = fopen(argv[1], "rb"), *out = fopen(argv[2], "wb");
    (void)argc;
    while (fread(own0, 1, sizeof own0, in) == sizeof own0 && fread(own1, 1, sizeof own1, in) == sizeof own1) {
        memcpy(m_input0_buffer(), own0, sizeof own0);
        memcpy(m_input1_buffer(), own1, sizeof own1);
        if (m_invoke(m_input0_buffer(), m_input1_buffer(), out_a) != 0) return 1;
        if (m_invoke(own0, own1, out_b) != 0) return 1;
        if (memcmp(out_a, out_b, sizeof out_a) != 0) return 3;
        fwrite(out_a, 1, sizeof out_a, out);
    }
    fclose(in);
    fclose(out);
    return 0;
}
"""


def _compile(tmp_path, model, **kw):
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    return compile_model(p, name="m", **kw)


def test_plan_header_and_direct_writes_on_host(tmp_path):
    model, shapes = two_input_model()
    res = _compile(tmp_path, model, inputs_in_arena=True)
    plan, g = res.extra["plan"], res.graph
    assert res.report["inputs_in_arena"] is True
    assert all(plan.tensors[t].base == "arena" for t in g.inputs)
    h, c = res.files["m.h"], res.files["m.c"]
    assert "#define M_INPUT0_IN_ARENA 1" in h and "int8_t *m_input1_buffer(void);" in h
    assert c.count("memcpy(m_arena + ") >= 2
    work = tmp_path / "w"
    work.mkdir()
    for f in ("m.c", "m.h"):
        (work / f).write_text(res.files[f])
    (work / "main.c").write_text(DIRECT_MAIN)
    subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O2",
                    "-fsanitize=undefined,address", "-fno-sanitize-recover=all", "-I.", "m.c", "main.c",
                    "-o", "m", "-lm"], cwd=work, check=True)
    xs = [random_inputs(s, "int8", 3, seed=k) for k, s in enumerate(shapes)]
    (work / "in.bin").write_bytes(b"".join(xs[0][i].tobytes() + xs[1][i].tobytes() for i in range(3)))
    subprocess.run([str(work / "m"), "in.bin", "out.bin"], cwd=work, check=True)
    got = np.frombuffer((work / "out.bin").read_bytes(), np.int8).reshape(3, 1, 6, 5, 3)
    np.testing.assert_array_equal(got, tflm_run(model, xs)[0])


@pytest.mark.parametrize("target", ["host", "cortex-m4", "riscv32imac"])
def test_caller_buffers_still_work(tmp_path, target):
    """run_model's host harness passes its own buffers: copied into the slots first."""
    model, shapes = two_input_model()
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    xs = [random_inputs(s, "int8", 2, seed=9 + k) for k, s in enumerate(shapes)]
    got, rep = run_model(p, xs, target=target, inputs_in_arena=True)
    assert rep["inputs_in_arena"] is True
    np.testing.assert_array_equal(got[0], tflm_run(model, xs)[0])


def test_default_is_caller_buffers_without_a_board(tmp_path):
    model, _ = two_input_model()
    res = _compile(tmp_path, model)
    assert res.report["inputs_in_arena"] is False
    assert all(res.extra["plan"].tensors[t].base == "input" for t in res.graph.inputs)
    assert "_buffer(void)" not in res.files["m.h"]


def test_proof_checks_input_slots(tmp_path):
    model, _ = two_input_model()
    res = _compile(tmp_path, model, inputs_in_arena=True)
    plan, g = res.extra["plan"], res.graph
    pos = {op.index: k for k, op in enumerate(g.ops)}
    steps = {o["function"]: pos[o["index"]] for o in res.report["ops"] if o["function"] in plan.scratch}
    assert prove_plan(g, plan, steps)["ok"]
    a, b = g.inputs
    # input b (live from before the first op to the ADD) moved onto the first conv's output
    y = g.ops[0].outputs[0]
    saved = plan.tensors[b].offset
    plan.tensors[b].offset = plan.tensors[y].offset
    with pytest.raises(CompilerBug, match="overlap"):
        prove_plan(g, plan, steps)
    plan.tensors[b].offset = saved
    # an input left in a caller buffer although the plan says inputs live in the arena
    saved_base = plan.tensors[a].base
    plan.tensors[a].base = "input"
    with pytest.raises(CompilerBug, match="should be in the arena"):
        prove_plan(g, plan, steps)
    plan.tensors[a].base = saved_base
    assert prove_plan(g, plan, steps)["ok"]




@pytest.mark.usefixtures("board_tools")   # fails (never skips) without the tools
@pytest.mark.parametrize("board,nm", [("mps2-an386", "arm-none-eabi-nm"),
                                      ("riscv-virt", "riscv64-unknown-elf-nm")])
def test_firmware_reads_inputs_into_the_arena(tmp_path, board, nm):
    require_tools(nm, "qemu-system-riscv32")
    model, shapes = two_input_model()
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    xs = [random_inputs(s, "int8", 2, seed=20 + k) for k, s in enumerate(shapes)]
    out = tmp_path / "fw"
    got, rep = run_model(p, xs, board=board, out_dir=out)   # a board: in the arena by default
    assert rep["inputs_in_arena"] is True and rep["board"] == board
    np.testing.assert_array_equal(got[0], tflm_run(model, xs)[0])
    (elf,) = out.rglob("*.elf")
    syms = subprocess.run([nm, str(elf)], capture_output=True, text=True,
                          check=True).stdout.split()
    assert "m_arena" in syms and "input0" not in syms and "input1" not in syms and "output0" in syms
