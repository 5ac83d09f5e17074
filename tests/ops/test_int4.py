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
@pytest.mark.parametrize("seed", [1, 2])
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
    assert_packed(code, [g.t(op.inputs[1]).size for op in g.ops])


def assert_packed(code: str, counts: list[int]):
    """One weights_int4 array per layer, under 0.6 bytes per weight (TFLite's packing,
    ceil(n / 2) bytes, or the DSP kernels' nibble words with their rows padded to 4 taps),
    and no int8 weights array."""
    arrays = re.findall(r"(uint8_t|int32_t) \w+_weights_int4(_requant)?\[(\d+)\]", code)
    assert len(arrays) == len(counts), (arrays, counts)
    # (a stream of weights and requantization words: its weights alone are not counted)
    nbytes = sum(int(n) * (1 if t == "uint8_t" else 4) for t, rq, n in arrays if not rq)
    assert nbytes <= 0.6 * sum(counts) + 16 * len(counts), (arrays, counts)
    assert not re.search(r"int8_t \w+_weights\[", code)


# (board, core, seed): the M4 (DSP extension), the M55 (Helium) and RV32, one boot each
# with a chain of all three ops; on the M4 seed 9's convolutions take the unrolled
# eerie_conv_pair_s4 copies, seed 20's the general kernel
BOARDS = [("mps2-an386", "cortex-m4", 9), ("mps2-an386", "cortex-m4", 20),
          ("mps3-an547", "cortex-m55", 9), ("riscv-virt", "riscv32imafc", 9)]


@pytest.mark.parametrize("board,core,seed", BOARDS, ids=[f"{b}-{s}" for b, _, s in BOARDS])
def test_int4_chain_board(tmp_path, board, core, seed):
    from conftest import assert_invoke_stack_within_bound, require_board_tools
    require_board_tools(board)
    model, in_shape = layer_model(["CONV_2D", "DEPTHWISE_CONV_2D", "CONV_2D", "FULLY_CONNECTED"], seed)
    xs = random_inputs(in_shape, "int8", 6, seed=seed)
    ref = litert_run(model, xs)
    got, rep = eerie_run(model, [xs], tmp_path, board=board, out_dir=tmp_path / "fw", name="m")
    assert rep["board"] == board and rep["target"] == core, (rep["board"], rep["target"])
    np.testing.assert_array_equal(got[0], ref)
    assert_invoke_stack_within_bound(rep)
    code = (tmp_path / "fw" / "m.c").read_text()
    if board == "mps2-an386":
        assert ("eerie_conv_pair_s4_g" if seed == 9 else "eerie_conv_pair_s4(ca") in code
    if board == "riscv-virt":
        assert "eerie_gemm_rv_s4(xs" in code


@pytest.mark.parametrize("target", ["host", "cortex-m4"])
def test_size_packs_small_int8_weights(tmp_path, target):
    """--optimize size: int8 layers whose weights all lie in [-8, 7] are packed two per byte,
    bit-exact with TFLM (an int8 model: TFLM's rounding), and report.md names them; a layer
    with wider weights stays int8."""
    from conftest import tflm_run
    from eerie_c.api import compile_model
    from eerie_c.frontend.tflite import load_tflite
    small, in_shape = layer_model(list(KINDS[1:]) + ["FULLY_CONNECTED"], 11, bits4=False, small=True)
    xs = random_inputs(in_shape, "int8", 4, seed=11)
    got, rep = eerie_run(small, [xs], tmp_path, optimize="size")
    np.testing.assert_array_equal(got[0], tflm_run(small, [xs])[0])
    res = compile_model(tmp_path / "m.tflite", target=target, name="m", optimize="size",
                        out_dir=tmp_path / target)
    g = load_tflite(small, "m")
    assert_packed(res.files["m.c"], [g.t(op.inputs[1]).size for op in g.ops])
    md = (tmp_path / target / "report.md").read_text()
    assert md.count("[-8, 7], lossless") == 3, md
    wide, _ = layer_model(["CONV_2D"], 11, bits4=False)
    (tmp_path / "w.tflite").write_bytes(wide)
    code = compile_model(tmp_path / "w.tflite", target=target, name="w", optimize="size").files["w.c"]
    assert "_weights_int4" not in code


@pytest.mark.parametrize("seed", [1, 3, 9])   # (seeds whose layers the DSP kernels take)
def test_int4_conv_dsp_c(tmp_path, seed):
    """CONV_2D with 4-bit weights on a DSP target: eerie_conv_pair_s4 (and its unrolled
    copies) over nibble words, here its C (host, UBSan, the source proof) vs LiteRT."""
    from test_dsp_kernels import dsp_target_run
    model, in_shape = layer_model(["CONV_2D", "CONV_2D"], seed)
    xs = random_inputs(in_shape, "int8", 3, seed=seed)
    got = dsp_target_run(model, [xs], tmp_path)
    assert "eerie_conv_pair_s4" in (tmp_path / "build" / "m.c").read_text()
    np.testing.assert_array_equal(got[0], litert_run(model, xs))


def test_int4_refusals(tmp_path):
    """One-line errors: an INT4 activation, an INT4 buffer of the wrong size, an INT4 constant
    that is not the weights of a layer that reads 4-bit weights."""
    from eerie_c.api import compile_model
    from eerie_c.errors import EerieError
    from tflite_builder import ModelBuilder

    def compile_bytes(data):
        (tmp_path / "b.tflite").write_bytes(data)
        compile_model(tmp_path / "b.tflite", name="b")

    mb = ModelBuilder()   # an int4 activation
    x = mb.input([1, 4], "int8", scale=0.1)
    y = mb.tensor([1, 4], "int4", scale=0.1)
    mb.op("RELU", [x], [y])
    mb.output(y)
    with pytest.raises(EerieError, match=r"unsupported tensor dtype: INT4 x1"):
        compile_bytes(mb.build())

    mb = ModelBuilder()   # 3 bytes hold 6 int4 values, not 8
    x = mb.input([1, 4], "int8", scale=0.1)
    w = mb.const(np.zeros((2, 4)), "int4", scale=[0.1], zero_point=[0])
    mb.buffers[-1].data = mb.buffers[-1].data[:3]
    y = mb.tensor([1, 2], "int8", scale=0.1)
    mb.op("FULLY_CONNECTED", [x, w], [y], "FullyConnectedOptions")
    mb.output(y)
    with pytest.raises(EerieError, match=r"malformed TFLite file: shape \[2, 4\] of int4 needs 4 bytes"):
        compile_bytes(mb.build())

    mb = ModelBuilder()   # an int4 constant added to an activation
    x = mb.input([1, 4], "int8", scale=0.1)
    c = mb.const(np.ones((1, 4)), "int4", scale=[0.1], zero_point=[0])
    y = mb.tensor([1, 4], "int8", scale=0.1)
    mb.op("ADD", [x, c], [y], "AddOptions")
    mb.output(y)
    with pytest.raises(EerieError, match=r"unsupported quantization: ADD with an int4 tensor as input 1"):
        compile_bytes(mb.build())
