"""Helium (MVE) int8 ADD on cortex-m55: the standalone ADD (elementwise.py -> _mve_add.py) and
the ADD fused into the MVE convolution (CONV_2D_ADD, conv_add.py -> _mve.py), vs TFLM.

The vector arithmetic (VQRDMULH / VRSHL rounding) is used only where _mve_add.py proves it
equal to TFLM's scalar formula over all 65,536 int8 operand pairs; the proof itself is checked
here against an independent exhaustive evaluation, and the scalar fallbacks are exercised by
disabling it. Host runs build the cortex-m55 C with the plain-C stand-ins of base_mve.c.j2
(UBSan, source proof); the QEMU mps3-an547 runs use the real MVE instructions.
"""
from __future__ import annotations


import numpy as np
import pytest

from conftest import random_inputs, tflm_run
from eerie_c.api import compile_model, run_model
from eerie_c.kernels import _mve_add, conv_add
from eerie_c.kernels._mve_add import (add_multipliers, mve_add_params, tflite_requantize,
                                      vector_add_reference)
from tflite_builder import ACT, ModelBuilder

from test_inplace_conv_add import CASES, identity_block
from test_mve_kernels import mve_host_run

TARGET = "cortex-m55"
PAIRS_A = np.repeat(np.arange(-128, 128, dtype=np.int64), 256)
PAIRS_B = np.tile(np.arange(-128, 128, dtype=np.int64), 256)


def scalar_add(a, b, s1, z1, s2, z2, so, zo, lo, hi):
    """TFLM's int8 ADD element by element (independent of the search in _mve_add.py)."""
    m1, sh1, m2, sh2, mo, sho = add_multipliers(s1, s2, so)
    t1 = tflite_requantize((a - z1) << 20, m1, sh1)
    t2 = tflite_requantize((b - z2) << 20, m2, sh2)
    return np.clip(tflite_requantize(t1 + t2, mo, sho) + zo, lo, hi)


def test_vector_constants_are_exact_over_all_pairs():
    """Whatever constants mve_add_params returns reproduce TFLM on every (a, b) pair; and it
    finds some for nearly every random quantization (else the speed-up would be rare)."""
    rng = np.random.default_rng(0)
    found = 0
    for i in range(40):
        s1, s2, so = rng.uniform(0.002, 0.3, 3)
        z1, z2, zo = (int(v) for v in rng.integers(-128, 128, 3))
        lo, hi = [(-128, 127), (max(zo, -128), 127), (-128, min(zo + 20, 127))][i % 3]
        m1, sh1, m2, sh2, mo, sho = add_multipliers(s1, s2, so)
        p = mve_add_params(m1, sh1, z1, m2, sh2, z2, mo, sho, zo, lo, hi)
        if p is None:
            continue
        found += 1
        want = scalar_add(PAIRS_A, PAIRS_B, s1, z1, s2, z2, so, zo, lo, hi)
        np.testing.assert_array_equal(vector_add_reference(PAIRS_A, PAIRS_B, p), want)
    assert found >= 36


def test_natural_constants_are_not_always_exact():
    """Why the proof is needed: plain round-half-up (no sign fix, TFLM's multipliers) differs
    from TFLM for some quantizations."""
    rng = np.random.default_rng(1)
    differs = 0
    for _ in range(40):
        s1, s2, so = rng.uniform(0.002, 0.3, 3)
        z1, z2, zo = (int(v) for v in rng.integers(-128, 128, 3))
        m1, sh1, m2, sh2, mo, sho = add_multipliers(s1, s2, so)
        naive = dict(a_shift=20, a_off=-z1 << 20, a_mult=m1, a_rshift=-sh1, a_fix=0,
                     b_shift=20, b_off=-z2 << 20, b_mult=m2, b_rshift=-sh2, b_fix=0,
                     o_lshift=max(sho, 0), o_mult=mo, o_rshift=max(-sho, 0), o_fix=0, o_zp=zo,
                     act_min=-128, act_max=127)
        want = scalar_add(PAIRS_A, PAIRS_B, s1, z1, s2, z2, so, zo, -128, 127)
        differs += not np.array_equal(vector_add_reference(PAIRS_A, PAIRS_B, naive), want)
    assert differs >= 1


def add_model(shape_a, shape_b, quant, act="NONE", same=False):
    mb = ModelBuilder()
    (sa, za), (sb, zb), (so, zo) = quant
    a = mb.input(list(shape_a), "int8", scale=sa, zero_point=za)
    b = a if same else mb.input(list(shape_b), "int8", scale=sb, zero_point=zb)
    y = mb.tensor(list(np.broadcast_shapes(tuple(shape_a), tuple(shape_b))), "int8",
                  scale=so, zero_point=zo)
    mb.op("ADD", [a, b], [y], "AddOptions", fusedActivationFunction=ACT[act])
    mb.output(y)
    return mb.build()


Q1 = [(0.05, -3), (0.02, 10), (0.08, 4)]
ADD_CASES = {
    # name: (shape_a, shape_b, quant, act, same, vector kernel expected)
    "odd-size": ((3, 7), (3, 7), Q1, "NONE", False, True),            # 21: tail of 1
    "relu6-4d": ((1, 5, 6, 4), (1, 5, 6, 4), [(0.1, 0), (0.03, -7), (0.05, -100)], "RELU6", False, True),
    "extreme-scales": ((4, 16), (4, 16), [(0.5, 0), (0.001, -128), (0.01, 127)], "NONE", False, True),
    "same-tensor": ((2, 9), (2, 9), [(0.05, -3), (0.05, -3), (0.1, 2)], "RELU", True, True),
    "broadcast-stays-scalar": ((2, 3, 4), (4,), Q1, "NONE", False, False),
}


def _inputs(shape_a, shape_b, same, n, seed):
    xs = [random_inputs(list(shape_a), "int8", n, seed=seed)]
    if not same:
        xs.append(random_inputs(list(shape_b), "int8", n, seed=seed + 1))
    return xs


@pytest.mark.parametrize("case", list(ADD_CASES))
def test_add_host(tmp_path, case):
    shape_a, shape_b, quant, act, same, vec = ADD_CASES[case]
    model = add_model(shape_a, shape_b, quant, act, same)
    xs = _inputs(shape_a, shape_b, same, 3, 4)
    got = mve_host_run(model, xs, tmp_path, ("eerie_vadd_s8(out0",) if vec else ())
    np.testing.assert_array_equal(got[0], tflm_run(model, xs)[0])
    if not vec:
        res = compile_model(tmp_path / "m.tflite", target=TARGET, name="m")
        assert "eerie_vadd_s8(out0" not in res.files["m.c"]


def test_add_host_all_pairs_relu(tmp_path):
    model = add_model((256, 256), (256, 256), [(0.07, 5), (0.031, -17), (0.09, -9)], "RELU")
    xs = [PAIRS_A.astype(np.int8).reshape(1, 256, 256), PAIRS_B.astype(np.int8).reshape(1, 256, 256)]
    got = mve_host_run(model, xs, tmp_path, ("eerie_vadd_s8(out0",))
    np.testing.assert_array_equal(got[0], tflm_run(model, xs)[0])


def test_add_falls_back_to_scalar(tmp_path, monkeypatch):
    monkeypatch.setattr(_mve_add, "mve_add_params", lambda *a, **k: None)
    shape_a, shape_b, quant, act, same, _ = ADD_CASES["relu6-4d"]
    model = add_model(shape_a, shape_b, quant, act, same)
    xs = _inputs(shape_a, shape_b, same, 2, 5)
    got = mve_host_run(model, xs, tmp_path, ())
    np.testing.assert_array_equal(got[0], tflm_run(model, xs)[0])
    assert "eerie_vadd_s8" not in compile_model(tmp_path / "m.tflite", target=TARGET,
                                                name="m").files["m.c"].split("m_invoke")[-1]


def add_chain():
    """y1 = ADD(x1, x2); y2 = ADD(y1, x2) (RELU); y3 = ADD(y2, x1): y1 is read by the second
    ADD only, so its output (in the arena) may start at y1's first byte."""
    mb = ModelBuilder()
    x1 = mb.input([1, 5, 7, 6], "int8", scale=0.05, zero_point=-3)
    x2 = mb.input([1, 5, 7, 6], "int8", scale=0.02, zero_point=10)
    y1 = mb.tensor([1, 5, 7, 6], "int8", scale=0.08, zero_point=4)
    y2 = mb.tensor([1, 5, 7, 6], "int8", scale=0.06, zero_point=-20)
    mb.op("ADD", [x1, x2], [y1], "AddOptions", fusedActivationFunction=ACT["NONE"])
    y3 = mb.tensor([1, 5, 7, 6], "int8", scale=0.1, zero_point=1)
    mb.op("ADD", [y1, x2], [y2], "AddOptions", fusedActivationFunction=ACT["RELU"])
    mb.op("ADD", [y2, x1], [y3], "AddOptions", fusedActivationFunction=ACT["NONE"])
    mb.output(y3)
    return mb.build()


def test_add_in_place_host(tmp_path):
    model = add_chain()
    p = tmp_path / "chain.tflite"
    p.write_bytes(model)
    rep = compile_model(p, target=TARGET, name="m", inputs_in_arena=True).report
    second = [o for o in rep["ops"] if o["kind"] == "ADD"][1]
    assert second["outputs"][0]["storage"] == "arena" == second["inputs"][0]["storage"]
    assert second["outputs"][0]["offset"] == second["inputs"][0]["offset"]
    xs = _inputs((1, 5, 7, 6), (1, 5, 7, 6), False, 3, 9)
    got = mve_host_run(model, xs, tmp_path, ("eerie_vadd_s8(out0",))
    np.testing.assert_array_equal(got[0], tflm_run(model, xs)[0])


FUSED = ["identity-3x3", "identity-conv-first-operand", "identity-odd-pixels",
         "identity-1x1-per-tensor", "identity-batch2-16ch", "downsample-hoisted-shortcut",
         "residual-read-again"]


def _fused_report(tmp_path, model):
    p = tmp_path / "fused.tflite"
    p.write_bytes(model)
    return compile_model(p, target=TARGET, name="m", patch="off").report


@pytest.mark.parametrize("case", FUSED)
def test_fused_conv_add_host(tmp_path, case):
    """The MVE convolution with the vector ADD epilogue (its constants: *_add_mve)."""
    model, shape = CASES[case]()
    xs = [random_inputs(shape, "int8", 3, seed=4)]
    got = mve_host_run(model, xs, tmp_path, ("_add_mve", "_mve_params", "eerie_vadd_s8(out0 + e0"))
    np.testing.assert_array_equal(got[0], tflm_run(model, xs)[0])


@pytest.mark.parametrize("case", ["identity-odd-pixels", "downsample-hoisted-shortcut"])
def test_fused_conv_add_scalar_epilogue_host(tmp_path, monkeypatch, case):
    """No proven vector constants: the MVE convolution keeps TFLM's scalar ADD arithmetic."""
    monkeypatch.setattr(conv_add, "mve_add_params", lambda *a, **k: None)
    model, shape = CASES[case]()
    xs = [random_inputs(shape, "int8", 3, seed=8)]
    got = mve_host_run(model, xs, tmp_path, ("_mve_params", "fused ADD: residual"))
    np.testing.assert_array_equal(got[0], tflm_run(model, xs)[0])


def test_fused_in_place_on_m55(tmp_path):
    """The output of the MVE CONV_2D_ADD still starts at the residual's first byte."""
    model, _ = identity_block(shape=(1, 8, 8, 16), tail=True)
    rep = _fused_report(tmp_path, model)
    (op,) = [o for o in rep["ops"] if o["kind"] == "CONV_2D_ADD"]
    assert "ADD" not in [o["kind"] for o in rep["ops"]]
    assert op["outputs"][0]["offset"] == op["inputs"][0]["offset"]
    # the two pixels' 9 16-tap chunks interleaved (the im2col writes them directly), one
    # pixel pair's outputs
    assert op["scratch_bytes"] == 32 * 9 + 2 * 16


QEMU_CASES = ["add-odd-size", "add-relu6-4d", "add-chain-in-place", "fused-odd-pixels", "fused-downsample",
              "fused-batch2-16ch", "fused-scalar-epilogue", "fused-6ch-halves"]


@pytest.mark.usefixtures("board_tools")   # fails (never skips) without the tools
@pytest.mark.parametrize("case", QEMU_CASES)
def test_mve_add_on_cortex_m55(tmp_path, monkeypatch, case):
    """The same kernels on the real MVE instructions (QEMU mps3-an547, Cortex-M55)."""
    if case == "add-chain-in-place":
        model = add_chain()
        xs = _inputs((1, 5, 7, 6), (1, 5, 7, 6), False, 2, 10)
    elif case.startswith("add-"):
        shape_a, shape_b, quant, act, same, _ = ADD_CASES[case[4:]]
        model = add_model(shape_a, shape_b, quant, act, same)
        xs = _inputs(shape_a, shape_b, same, 3, 6)
    else:
        name = {"fused-6ch-halves": "fused-6ch-halves", "fused-odd-pixels": "identity-odd-pixels",
                "fused-downsample": "downsample-hoisted-shortcut",
                "fused-batch2-16ch": "identity-batch2-16ch",
                "fused-scalar-epilogue": "identity-odd-pixels"}[case]
        if case == "fused-scalar-epilogue":
            monkeypatch.setattr(conv_add, "mve_add_params", lambda *a, **k: None)
        if name == "fused-6ch-halves":
            # out_c % 4 != 0: the block in two 4-sum halves (_mve.conv_half_asm), not the
            # group loop of the other fused cases
            model, shape = identity_block(shape=(1, 5, 3, 6), seed=5)
        else:
            model, shape = CASES[name]()
        xs = [random_inputs(shape, "int8", 2, seed=7)]
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    got, rep = run_model(p, xs, board="mps3-an547")
    assert rep["target"] == TARGET
    kinds = [o["kind"] for o in rep["ops"]]
    assert ("ADD" in kinds) if case.startswith("add-") else ("CONV_2D_ADD" in kinds)
    if case == "fused-6ch-halves":
        assert "%[b3]" in compile_model(p, target=TARGET, name="m").files["m.c"]
    np.testing.assert_array_equal(got[0], tflm_run(model, xs)[0])
