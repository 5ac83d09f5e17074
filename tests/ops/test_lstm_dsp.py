"""UNIDIRECTIONAL_SEQUENCE_LSTM int8 on DSP cores (helpers/lstm_dsp.c.j2): the gate products
four weight rows at a time with SXTB16/SMLAD over FULLY_CONNECTED's word layout, input and
hidden rows copied into zero-padded scratch when their length is not a multiple of 4, and
the gate sums requantized by eerie_lstm_rq (SMMULR, no 64-bit arithmetic) where their bounds
allow it, else by the general eerie_requantize.
Bit-exact with TFLM: the C for cortex-m4 built on the host (the plain-C branch of the DSP
building blocks, UBSan on; several records, so the state is carried between them), and on the
real instructions in QEMU on the M4 and the M55."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

from conftest import random_inputs, require_tools, tflm_run
from eerie_c.api import compile_model, run_model
from eerie_c.kernels._quant import quantize_multiplier
from eerie_c.kernels.lstm import _fast_gate_params
from eerie_c.templating import render
from test_dsp_kernels import check_dsp_target
from test_lstm import SIGMOID, lstm_model

SHAPES = {
    "basic-pad-h": dict(),                                      # depth 4, units 5
    "time-major-batch2": dict(time_major=True, batch=2, steps=4),
    "pad-both-hzp": dict(batch=3, steps=2, units=3, depth=6, h_q=(0.02, 5)),
    "no-pad": dict(units=8, depth=12, steps=3),
    "cell-clip": dict(clip=0.25, steps=5, cell_scale=2.0 ** -12),
    "sigmoid-cell": dict(act=SIGMOID, units=2, cell_scale=2.0 ** -9),
    "wide-odd": dict(units=7, depth=37, steps=2, in_q=(0.1, -7), w_scale=0.05),
    # biases near 2^28 with a left shift of 3: the sums may pass 2^30 / 8, so the general
    # requantization stays
    "general-requant": dict(units=4, depth=8, bias_range=1 << 28),
}


@pytest.mark.parametrize("kw", list(SHAPES.values()), ids=list(SHAPES))
def test_lstm_dsp_kernel_bit_exact_on_host(kw, tmp_path):
    model, shape = lstm_model("int8", **kw)
    check_dsp_target(tmp_path, model, shape, n=4, seed=5)


def test_fast_requantization_only_within_its_bound(tmp_path):
    p = tmp_path / "m.tflite"
    for kw, fast in ((SHAPES["no-pad"], True), (SHAPES["general-requant"], False)):
        p.write_bytes(lstm_model("int8", **kw)[0])
        c = compile_model(p, target="cortex-m4", name="m").files["m.c"]
        assert "eerie_lstm_dot4(" in c, kw
        assert ("= eerie_lstm_rq(" in c) == fast and ("= eerie_requantize(ax" in c) == (not fast), kw


def test_dsp_kernel_only_where_the_core_has_dsp(tmp_path):
    model, _ = lstm_model("int8", units=8, depth=12)
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    for target, dsp in (("cortex-m4", True), ("cortex-m55", True), ("cortex-m3", False), ("host", False)):
        c = compile_model(p, target=target, name="m").files["m.c"]
        assert ("eerie_lstm_dot4(" in c) == dsp, target
    # int16x8 keeps its 64-bit sums everywhere
    model16, _ = lstm_model("int16")
    p.write_bytes(model16)
    assert "eerie_lstm_dot4(" not in compile_model(p, target="cortex-m4", name="m").files["m.c"]


@pytest.mark.parametrize("board,kw", [("mps2-an386", SHAPES["pad-both-hzp"]),
                                      ("mps2-an386", SHAPES["time-major-batch2"]),
                                      ("mps3-an547", SHAPES["wide-odd"])],
                         ids=["m4-pad-both", "m4-time-major", "m55-wide-odd"])
def test_lstm_dsp_kernel_on_board(board_tools, board, kw, tmp_path):
    model, shape = lstm_model("int8", **kw)
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    xs = [random_inputs(list(shape), "int8", 3, seed=2)]
    got, rep = run_model(p, xs, board=board, out_dir=tmp_path / "fw", name="m")
    assert "eerie_lstm_dot4(" in (tmp_path / "fw" / "m.c").read_text()
    ref = tflm_run(model, xs)
    np.testing.assert_array_equal(got[0], ref[0])
    assert len(np.unique(ref[0])) > 8   # not saturated


def test_fast_requantization_equals_the_general_one(tmp_path):
    """eerie_lstm_rq against eerie_requantize (TFLite's MultiplyByQuantizedMultiplier) on
    random sums inside the bound _fast_gate_params proves, for left and right shifts, at the
    bound's edges and at ties (an LSTM's int8 output hides a one-step difference in a gate's
    Q3.12 sum, so the kernel tests alone would not see it)."""
    require_tools("cc")
    rng = np.random.default_rng(3)
    rows = []
    for real in (4.096, 1.7, 0.9, 0.37, 2.0 ** -9 * 1.3, 6.1e-5, 1.0, 0.5):
        m, s = quantize_multiplier(real)
        bound = (1 << 30 >> max(s, 0)) - 1
        q = _fast_gate_params([m] * 4, [s] * 4, np.zeros((4, 1), np.int8), np.full(4, bound), 1)
        assert q is not None, (real, m, s)
        accs = np.concatenate([rng.integers(-bound, bound + 1, 4000), [0, 1, -1, bound, -bound],
                               # ties of the right shift: multiples of 2^(right-1) around 0
                               np.arange(-64, 65) << max(-s - 1, 0)])
        accs = accs[np.abs(accs) <= bound]
        rows += [(int(a), m, s, *map(int, q[0])) for a in accs]
    table = ",\n".join("{%d, %d, %d, %d, %d, %d, %d, %d}" % r for r in rows)
    src = "\n".join([
        "#include <stdint.h>", "#include <stdio.h>", "#include <string.h>",
        render("helpers/requant.c.j2"), render("helpers/dsp.c.j2"), render("helpers/lstm_dsp.c.j2"),
        f"static const int32_t cases[{len(rows)}][8] = {{{table}}};",
        "int main(void)", "{", "    int i, bad = 0;",
        f"    for (i = 0; i < {len(rows)}; ++i) {{",
        "        const int32_t want = eerie_requantize(cases[i][0], cases[i][1], cases[i][2]);",
        "        const int32_t got = eerie_lstm_rq(cases[i][0], &cases[i][3]);",
        "        if (got != want) { if (bad < 5) printf(\"acc %ld m %ld s %ld: %ld != %ld\\n\", (long)cases[i][0],"
        " (long)cases[i][1], (long)cases[i][2], (long)got, (long)want); ++bad; }",
        "    }", "    printf(\"%d bad of %d\\n\", bad, i);", "    return bad != 0;", "}"])
    (tmp_path / "rq.c").write_text(src)
    subprocess.run(["cc", "-std=c99", "-O1", "-Wall", "-Werror", "-fsanitize=undefined",
                    "-fno-sanitize-recover=all", "rq.c", "-o", "rq"], cwd=tmp_path, check=True)
    out = subprocess.run(["./rq"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout
    assert f"0 bad of {len(rows)}" in out.stdout
