"""FULLY_CONNECTED whose weights the graph computes, vs TFLM: a Keras pruning layout (weights and
mask in resource variables a CALL_ONCE init assigns from constants, multiplied in the main
graph), folded at compile time (frontend/tflite_variables.py); and weights that are run-time
values (the variable also assigned by the main graph, a mask fed as a graph input, a computed
bias), read by the run-time kernel (kernels/_fc_runtime.py). float32 and int8, over
consecutive invocations (the state carries over)."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import assert_matches_tflm, random_inputs
from tflite_builder import ACT, ModelBuilder
from test_resource_variables import call_once, handle

UNITS, DEPTH = 5, 12
QX, QW, QM, QY = (dict(scale=0.05, zero_point=-3), dict(scale=0.02, zero_point=0),
                  dict(scale=1.0, zero_point=0), dict(scale=0.15, zero_point=4))


def _q(dtype, q):
    return q if dtype == "int8" else {}


def _weights_and_mask(dtype, seed=0):
    rng = np.random.default_rng(seed)
    mask = (rng.random((UNITS, DEPTH)) > 0.4).astype(np.int64)
    if dtype == "int8":
        return rng.integers(-127, 128, (UNITS, DEPTH)), mask
    return rng.standard_normal((UNITS, DEPTH)) * 0.5, mask


def _bias(mb, dtype, rng):
    if dtype == "int8":
        return mb.const(rng.integers(-500, 500, UNITS), "int32", scale=QX["scale"] * QW["scale"])
    return mb.const(rng.standard_normal(UNITS), "float32")


def pruned_fc(dtype, reassign=False, act="RELU"):
    """y = FC(x, READ(kernel) * READ(mask), bias); CALL_ONCE assigns kernel and mask. With
    `reassign` the main graph also writes the masked weights back to `kernel` (a variable the
    model updates: not a constant, so read at run time)."""
    rng = np.random.default_rng(1)
    wdata, mask = _weights_and_mask(dtype)
    mb = ModelBuilder()
    x = mb.input([2, DEPTH], dtype, **_q(dtype, QX))
    call_once(mb, {"kernel": (wdata, dtype, _q(dtype, QW)), "mask": (mask, dtype, _q(dtype, QM))})
    hk, hm = handle(mb, "kernel"), handle(mb, "mask")
    k, m, w = (mb.tensor([UNITS, DEPTH], dtype, **_q(dtype, q)) for q in (QW, QM, QW))
    mb.op("READ_VARIABLE", [hk], [k])
    mb.op("READ_VARIABLE", [hm], [m])
    mb.op("MUL", [k, m], [w], "MulOptions")
    if reassign:
        mb.op("ASSIGN_VARIABLE", [hk, w], [])
    y = mb.tensor([2, UNITS], dtype, **_q(dtype, QY))
    mb.op("FULLY_CONNECTED", [x, w, _bias(mb, dtype, rng)], [y], "FullyConnectedOptions",
          fusedActivationFunction=ACT[act])
    mb.output(y)
    return mb.build()


def mask_input_fc(dtype, computed_bias=False):
    """The mask is a graph input (run-time weights); with computed_bias the bias is too (float:
    bias = b0 + b_in)."""
    rng = np.random.default_rng(2)
    wdata, _ = _weights_and_mask(dtype)
    mb = ModelBuilder()
    x = mb.input([3, DEPTH], dtype, **_q(dtype, QX))
    m = mb.input([UNITS, DEPTH], dtype, **_q(dtype, QM))
    w = mb.tensor([UNITS, DEPTH], dtype, **_q(dtype, QW))
    mb.op("MUL", [mb.const(wdata, dtype, **_q(dtype, QW)), m], [w], "MulOptions")
    ins = [x, w, _bias(mb, dtype, rng)]
    if computed_bias:
        bi = mb.input([UNITS], "float32")
        bsum = mb.tensor([UNITS], "float32")
        mb.op("ADD", [ins[2], bi], [bsum], "AddOptions")
        ins[2] = bsum
    y = mb.tensor([3, UNITS], dtype, **_q(dtype, QY))
    mb.op("FULLY_CONNECTED", ins, [y], "FullyConnectedOptions", fusedActivationFunction=ACT["NONE"])
    mb.output(y)
    return mb.build()


def _kinds(rep):
    return [o["kind"] for o in rep["ops"]]


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_pruned_fc_folded(dtype, tmp_path):
    xs = random_inputs([2, DEPTH], dtype, 3, seed=3)
    got, ref = assert_matches_tflm(pruned_fc(dtype), [xs], tmp_path)
    assert len(np.unique(ref[0])) > 5
    from eerie_c.api import run_model
    _, rep = run_model(tmp_path / "m.tflite", [xs])
    kinds = _kinds(rep)
    # the weights are constants: no READ_VARIABLE, no MUL, no CALL_ONCE, no state
    assert "MUL" not in kinds and "READ_VARIABLE" not in kinds, kinds
    fc = next(o for o in rep["ops"] if o["kind"] == "FULLY_CONNECTED")
    assert "run time" not in (fc.get("choice") or ""), fc
    assert rep["state_bytes"] == 0 and "CF_IF" not in kinds, (rep["state_bytes"], kinds)


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_pruned_fc_reassigned_runs_at_run_time(dtype, tmp_path):
    xs = random_inputs([2, DEPTH], dtype, 4, seed=4)
    assert_matches_tflm(pruned_fc(dtype, reassign=True, act="NONE"), [xs], tmp_path)
    from eerie_c.api import run_model
    _, rep = run_model(tmp_path / "m.tflite", [xs])
    fc = next(o for o in rep["ops"] if o["kind"] == "FULLY_CONNECTED")
    assert "run time" in fc["choice"] and "MUL" in _kinds(rep), rep["ops"]


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_fc_weights_from_input(dtype, tmp_path):
    rng = np.random.default_rng(5)
    xs = random_inputs([3, DEPTH], dtype, 3, seed=5)
    masks = (rng.random((3, UNITS, DEPTH)) > 0.3).astype(np.float32 if dtype == "float32" else np.int8)
    _, ref = assert_matches_tflm(mask_input_fc(dtype), [xs, masks], tmp_path)
    assert len(np.unique(ref[0])) > 5


def test_fc_computed_bias_float(tmp_path):
    xs = random_inputs([3, DEPTH], "float32", 2, seed=6)
    masks = np.ones((2, UNITS, DEPTH), np.float32)
    bs = random_inputs([UNITS], "float32", 2, seed=7)
    assert_matches_tflm(mask_input_fc("float32", computed_bias=True), [xs, masks, bs], tmp_path)


def test_constant_variable_read_as_graph_output(tmp_path):
    """A constant variable whose read is also a graph output: that read stays a run-time copy
    (a graph output is never a constant); the FULLY_CONNECTED's weights still fold."""
    wdata, _ = _weights_and_mask("float32")
    mb = ModelBuilder()
    x = mb.input([1, DEPTH], "float32")
    call_once(mb, {"kernel": (wdata, "float32", {})})
    hk = handle(mb, "kernel")
    k1, k2 = mb.tensor([UNITS, DEPTH], "float32"), mb.tensor([UNITS, DEPTH], "float32")
    mb.op("READ_VARIABLE", [hk], [k1])
    mb.op("READ_VARIABLE", [hk], [k2])
    y = mb.tensor([1, UNITS], "float32")
    mb.op("FULLY_CONNECTED", [x, k1, -1], [y], "FullyConnectedOptions", fusedActivationFunction=0)
    mb.output(y)
    mb.output(k2)
    got, _ = assert_matches_tflm(mb.build(), [random_inputs([1, DEPTH], "float32", 2, seed=8)], tmp_path)
    np.testing.assert_array_equal(got[1][0], wdata.astype(np.float32))
