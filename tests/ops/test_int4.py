"""4-bit weights (TFLite INT4, kernels/_int4.py): FULLY_CONNECTED, CONV_2D and
DEPTHWISE_CONV_2D with random shapes, per-channel and per-tensor scales, bit-exact with
LiteRT's reference kernels on the host; the weights stay two per byte in the generated C."""
from __future__ import annotations

import re

import numpy as np
import pytest

from conftest import eerie_run, random_inputs
from int4_models import layer_model, litert_run

KINDS = ("FULLY_CONNECTED", "CONV_2D", "DEPTHWISE_CONV_2D")


@pytest.mark.parametrize("per_channel", [True, False], ids=["per-channel", "per-tensor"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_int4_layer_host(tmp_path, kind, per_channel, seed):
    model, in_shape = layer_model([kind], seed, per_channel)
    xs = random_inputs(in_shape, "int8", 4, seed=seed)
    ref = litert_run(model, xs)
    got, rep = eerie_run(model, [xs], tmp_path)
    np.testing.assert_array_equal(got[0], ref)


@pytest.mark.parametrize("target", ["host", "cortex-m4", "cortex-m55", "riscv32imafc"])
def test_int4_weights_stay_packed(tmp_path, target):
    """On every target the weights are one uint8_t array of ceil(n / 2) bytes per layer,
    whichever fast int8 kernels the target has."""
    from eerie_c.api import compile_model
    from eerie_c.frontend.tflite import load_tflite
    model, _ = layer_model(["CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"], 5)
    (tmp_path / "m.tflite").write_bytes(model)
    code = compile_model(tmp_path / "m.tflite", target=target, name="m").files["m.c"]
    g = load_tflite(model, "m")
    sizes = sorted((g.t(op.inputs[1]).size + 1) // 2 for op in g.ops)
    found = sorted(int(n) for n in re.findall(r"uint8_t \w+_weights_int4\[(\d+)\]", code))
    assert found == sizes, (found, sizes)


# (board, core): the M4 (DSP extension), the M55 (Helium) and RV32: each runs the portable
# int4 kernels; one boot per board with a chain of all three ops
BOARDS = [("mps2-an386", "cortex-m4"), ("mps3-an547", "cortex-m55"), ("riscv-virt", "riscv32imafc")]


@pytest.mark.parametrize("board,core", BOARDS, ids=[b for b, _ in BOARDS])
def test_int4_chain_board(tmp_path, board, core):
    from conftest import assert_invoke_stack_within_bound, require_board_tools
    require_board_tools(board)
    model, in_shape = layer_model(["CONV_2D", "DEPTHWISE_CONV_2D", "CONV_2D", "FULLY_CONNECTED"], 7)
    xs = random_inputs(in_shape, "int8", 6, seed=7)
    ref = litert_run(model, xs)
    got, rep = eerie_run(model, [xs], tmp_path, board=board)
    assert rep["board"] == board and rep["target"] == core, (rep["board"], rep["target"])
    np.testing.assert_array_equal(got[0], ref)
    assert_invoke_stack_within_bound(rep)


@pytest.mark.parametrize("target", ["host", "cortex-m4"])
def test_size_packs_small_int8_weights(tmp_path, target):
    """--optimize size: int8 layers whose weights all lie in [-8, 7] are packed two per byte,
    bit-exact with TFLM (an int8 model: TFLM's rounding), and report.md names them; a layer
    with wider weights stays int8."""
    from conftest import tflm_run
    from eerie_c.api import compile_model
    small, in_shape = layer_model(list(KINDS[1:]) + ["FULLY_CONNECTED"], 11, bits4=False, small=True)
    xs = random_inputs(in_shape, "int8", 4, seed=11)
    got, rep = eerie_run(small, [xs], tmp_path, optimize="size")
    np.testing.assert_array_equal(got[0], tflm_run(small, [xs])[0])
    res = compile_model(tmp_path / "m.tflite", target=target, name="m", optimize="size",
                        out_dir=tmp_path / target)
    assert len(re.findall(r"uint8_t \w+_weights_int4\[", res.files["m.c"])) == 3
    md = (tmp_path / target / "report.md").read_text()
    assert md.count("[-8, 7], lossless") == 3, md
    wide, _ = layer_model(["CONV_2D"], 11, bits4=False)
    (tmp_path / "w.tflite").write_bytes(wide)
    code = compile_model(tmp_path / "w.tflite", target=target, name="w", optimize="size").files["w.c"]
    assert "_weights_int4" not in code
