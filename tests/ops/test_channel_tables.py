"""passes/channel_tables.py: an int8 ADD / SUB / MUL of an activation and a constant that
varies along the channels only (or one constant) becomes a table of the op's own results per
channel, a chain of them one table. Bit-exact with TFLM on inputs covering all 256 values,
both operand orders, scales whose multipliers shift left and right, fused activations; left
alone where the constant varies along another axis or the table would be too large."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import assert_matches_tflm, eerie_run, tflm_run
from tflite_builder import ACT, ModelBuilder

OPTS = {"ADD": "AddOptions", "SUB": "SubOptions", "MUL": "MulOptions"}


def chain_model(steps, shape=(1, 6, 5, 8), seed=0, const_shape=None):
    """x -> op1(x, c1) -> op2(., c2) ...; steps: (kind, const_first, per_channel, act)."""
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    x = mb.input(list(shape), "int8", scale=float(rng.uniform(0.01, 0.1)), zero_point=int(rng.integers(-20, 20)))
    cur = x
    for kind, first, per_channel, act in steps:
        cshape = const_shape or ([shape[-1]] if per_channel else [1])
        c = mb.const(rng.integers(-128, 128, cshape), "int8", scale=float(rng.uniform(0.005, 0.2)),
                     zero_point=int(rng.integers(-30, 30)))
        y = mb.tensor(list(shape), "int8", scale=float(rng.uniform(0.01, 0.3)), zero_point=int(rng.integers(-40, 40)))
        mb.op(kind, [c, cur] if first else [cur, c], [y], OPTS[kind], fusedActivationFunction=ACT[act])
        cur = y
    mb.output(cur)
    return mb.build(), list(shape)


def all_values(shape, n=3, seed=1):
    """n records whose values run through all of -128..127 (then random)."""
    rng = np.random.default_rng(seed)
    size = int(np.prod(shape))
    recs = [np.resize(np.roll(np.arange(-128, 128), 37 * k), size) for k in range(n)]
    recs[-1] = rng.integers(-128, 128, size)
    return np.stack([r.reshape(shape) for r in recs]).astype(np.int8)


CASES = {
    "mul-per-channel": [("MUL", False, True, "NONE")],
    "add-per-channel-relu": [("ADD", False, True, "RELU")],
    "sub-const-first": [("SUB", True, True, "NONE")],
    "sub-const-second-relu6": [("SUB", False, True, "RELU6")],
    "mul-scalar": [("MUL", True, False, "RELU")],
    "batch-norm-mul-add": [("MUL", False, True, "NONE"), ("ADD", False, True, "NONE")],
    "three-mixed": [("MUL", False, False, "NONE"), ("SUB", True, True, "NONE"), ("ADD", False, True, "RELU6")],
}


def kinds(report) -> list[str]:
    return [op["kind"] for op in report["ops"]]


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", list(CASES))
def test_tables_bit_exact(name, seed, tmp_path):
    model, shape = chain_model(CASES[name], seed=seed)
    xs = all_values(shape)
    got, ref = assert_matches_tflm(model, [xs], tmp_path)
    _, rep = eerie_run(model, [xs[:1]], tmp_path, name="again")
    per_channel = any(pc for _, _, pc, _ in CASES[name])
    assert kinds(rep) == ["CHANNEL_TABLE" if per_channel else "TABLE_LOOKUP"], kinds(rep)   # one op


def test_left_alone_where_no_table_fits(tmp_path):
    # the constant varies along W, not along the channels
    model, shape = chain_model([("MUL", False, True, "NONE")], const_shape=[1, 1, 5, 1])
    xs = all_values(shape)
    assert_matches_tflm(model, [xs], tmp_path)
    assert kinds(eerie_run(model, [xs[:1]], tmp_path, name="a")[1]) == ["MUL"]
    # 64 channels: 16 KiB of table for one op
    model, shape = chain_model([("ADD", False, True, "NONE")], shape=(1, 2, 2, 64))
    assert kinds(eerie_run(model, [all_values(shape, 1)], tmp_path, name="b")[1]) == ["ADD"]


def test_table_chain_on_board(board_tools, tmp_path):
    model, shape = chain_model(CASES["batch-norm-mul-add"], shape=(1, 16, 1, 16), seed=3)
    xs = all_values(shape, n=2)
    got, rep = eerie_run(model, [xs], tmp_path, board="mps2-an386")
    np.testing.assert_array_equal(got[0], tflm_run(model, [xs])[0])
    assert kinds(rep) == ["CHANNEL_TABLE"]
