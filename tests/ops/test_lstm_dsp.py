"""UNIDIRECTIONAL_SEQUENCE_LSTM int8 on DSP cores (helpers/lstm_dsp.c.j2): the gate products
four weight rows at a time with SXTB16/SMLAD over FULLY_CONNECTED's word layout, input and
hidden rows copied into zero-padded scratch when their length is not a multiple of 4.
Bit-exact with TFLM: the C for cortex-m4 built on the host (the plain-C branch of the DSP
building blocks, UBSan on; several records, so the state is carried between them), and on the
real instructions in QEMU on the M4 and the M55."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import random_inputs, tflm_run
from eerie_c.api import compile_model, run_model
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
}


@pytest.mark.parametrize("kw", list(SHAPES.values()), ids=list(SHAPES))
def test_lstm_dsp_kernel_bit_exact_on_host(kw, tmp_path):
    model, shape = lstm_model("int8", **kw)
    check_dsp_target(tmp_path, model, shape, n=4, seed=5)


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
