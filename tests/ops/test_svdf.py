"""SVDF vs TFLM over several consecutive invocations: the activation state is a variable
tensor carried from one inference to the next (the host harness and tflm_run both run the N
test inputs as N invocations of one model instance), so every test checks the state update."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import assert_matches_tflm, random_inputs
from tflite_builder import ModelBuilder


def svdf_int8(batch=1, depth=8, units=3, rank=1, memory=4, state_dtype="int16", state_zp=0,
              bias=True, act=0, seed=0):
    rng = np.random.default_rng(seed)
    filters = units * rank
    mb = ModelBuilder()
    in_s, wf_s, st_s, out_s = 0.05, 0.02, 0.01, 1.0
    wt_s = 1 / 4096 if state_dtype == "int16" else 1 / 64
    if state_dtype == "int8":
        st_s = 0.25
    x = mb.input([batch, depth], "int8", scale=in_s, zero_point=-3)
    wf = mb.const(rng.integers(-127, 128, (filters, depth)), "int8", scale=wf_s, zero_point=0)
    lim = 8000 if state_dtype == "int16" else 127
    wt = mb.const(rng.integers(-lim, lim + 1, (filters, memory)), state_dtype, scale=wt_s, zero_point=0)
    ins = [x, wf, wt]
    if bias:
        ins.append(mb.const(rng.integers(-20000, 20000, (units,)), "int32", scale=st_s * wt_s,
                            zero_point=0))
    else:
        ins.append(-1)
    st = mb.variable([batch, filters * memory], state_dtype, scale=st_s, zero_point=state_zp)
    y = mb.tensor([batch, units], "int8", scale=out_s, zero_point=5)
    mb.op("SVDF", ins + [st], [y], "SVDFOptions", rank=rank, fusedActivationFunction=act)
    mb.output(y)
    return mb.build()


def svdf_f32(batch=1, depth=6, units=3, rank=1, memory=5, bias=True, act=0, seed=0):
    rng = np.random.default_rng(seed)
    filters = units * rank
    mb = ModelBuilder()
    x = mb.input([batch, depth], "float32")
    wf = mb.const(rng.standard_normal((filters, depth)) * 0.5, "float32")
    wt = mb.const(rng.standard_normal((filters, memory)) * 0.5, "float32")
    b = mb.const(rng.standard_normal(units), "float32") if bias else -1
    st = mb.variable([batch, filters * memory], "float32")
    y = mb.tensor([batch, units], "float32")
    mb.op("SVDF", [x, wf, wt, b, st], [y], "SVDFOptions", rank=rank, fusedActivationFunction=act)
    mb.output(y)
    return mb.build()


@pytest.mark.parametrize("kw", [
    dict(),
    dict(rank=2, units=4, memory=3),
    dict(batch=2, rank=3, units=2, depth=5, memory=6),
    dict(memory=1),
    dict(state_dtype="int8", state_zp=-4, rank=2),   # saturates the state: checks the wrap
    dict(state_dtype="int8", state_zp=9, units=4, seed=4),
    dict(state_zp=7),
    dict(act=1),   # TFLM's integer SVDF ignores the fused activation
], ids=["rank1", "rank2", "batch2-rank3", "memory1", "int8-state", "int8-state-zp+",
         "int16-state-zp", "relu"])
def test_svdf_int8(kw, tmp_path):
    batch, depth = kw.get("batch", 1), kw.get("depth", 8)
    xs = random_inputs([batch, depth], "int8", 7, seed=1)
    got, ref = assert_matches_tflm(svdf_int8(**kw), [xs], tmp_path)
    # the state matters: the same input at different times gives different outputs
    assert len({r.tobytes() for r in ref[0]}) > 1
    assert np.mean(np.abs(ref[0].astype(int) - 5) >= 122) < 0.3   # mostly not saturated


def test_svdf_int8_state_is_carried(tmp_path):
    # one repeated input: the outputs change only through the state
    xs = np.repeat(random_inputs([1, 8], "int8", 1, seed=3), 6, axis=0)
    got, ref = assert_matches_tflm(svdf_int8(memory=4), [xs], tmp_path)
    assert not np.array_equal(ref[0][0], ref[0][3])


@pytest.mark.parametrize("kw", [
    dict(),
    dict(rank=2, units=2, memory=3, act=1),
    dict(batch=3, rank=2, units=3, act=3),
    dict(memory=1, act=2),         # RELU_N1_TO_1 (TFLM crashes on a float SVDF without bias)
], ids=["rank1", "rank2-relu", "batch3-relu6", "memory1-relu1"])
def test_svdf_float(kw, tmp_path):
    batch, depth = kw.get("batch", 1), kw.get("depth", 6)
    xs = random_inputs([batch, depth], "float32", 6, seed=2)
    assert_matches_tflm(svdf_f32(**kw), [xs], tmp_path)
