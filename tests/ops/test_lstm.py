"""UNIDIRECTIONAL_SEQUENCE_LSTM vs TFLM: multi-step sequences over several consecutive
invocations (the hidden and cell states are variable tensors carried from one inference to the
next, in both the host harness and tflm_run), time-major and batch-major, cell clip, tanh or
sigmoid cell gate; float32 and TFLM's int8 (8x8->16) and int16 (16x8->16) integer schemes,
bit-exact."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import assert_matches_tflm, random_inputs
from tflite_builder import ModelBuilder

TANH, SIGMOID = 4, 6


def lstm_model(dtype="float32", batch=1, steps=3, depth=4, units=5, time_major=False, clip=0.0,
               act=TANH, seed=0, in_q=(0.05, 3), h_q=(1 / 128, -2), cell_scale=2.0 ** -11,
               w_scale=0.02, bias_range=3000):
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    shape = [steps, batch, depth] if time_major else [batch, steps, depth]
    out_shape = shape[:2] + [units]
    q = dtype in ("int8", "int16")
    if dtype == "int16":            # TFLM's 16x8 scheme: symmetric activations, int64 biases
        in_q, h_q = (in_q[0] / 200, 0), (h_q[0] / 200, 0)
    x = mb.input(shape, dtype, **(dict(scale=in_q[0], zero_point=in_q[1]) if q else {}))

    def weights(rows, cols, gain):
        if q:
            return mb.const(rng.integers(-127, 128, (rows, cols)), "int8", scale=w_scale, zero_point=0)
        return mb.const(rng.standard_normal((rows, cols)) * gain, "float32")

    def bias(k):
        if dtype == "int16":
            return mb.const(rng.integers(-600000, 600000, units), "int64", scale=in_q[0] * w_scale,
                            zero_point=0)
        if q:
            return mb.const(rng.integers(-bias_range, bias_range, units), "int32", scale=in_q[0] * w_scale,
                            zero_point=0)
        return mb.const(rng.standard_normal(units) * 0.3 + (1.0 if k == 1 else 0.0), "float32")

    w_in = [weights(units, depth, 0.5) for _ in range(4)]        # input, forget, cell, output
    w_rec = [weights(units, units, 0.4) for _ in range(4)]
    b = [bias(k) for k in range(4)]
    hq = dict(scale=h_q[0], zero_point=h_q[1]) if q else {}
    h = mb.variable([batch, units], dtype, **hq)
    c = mb.variable([batch, units], "int16" if q else "float32",
                    **(dict(scale=cell_scale, zero_point=0) if q else {}))
    y = mb.tensor(out_shape, dtype, **hq)
    ins = [x] + w_in + w_rec + [-1, -1, -1] + b + [-1, -1, h, c, -1, -1, -1, -1]
    mb.op("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, [y], "UnidirectionalSequenceLSTMOptions",
          fusedActivationFunction=act, cellClip=clip, projClip=0.0, timeMajor=time_major)
    mb.output(y)
    return mb.build(), shape


@pytest.mark.parametrize("kw", [
    dict(),
    dict(time_major=True, batch=2, steps=4),
    dict(batch=3, steps=2, units=3, depth=6),
    dict(clip=0.5, steps=5),
    dict(act=SIGMOID, units=2),
], ids=["basic", "time-major-batch2", "batch-major-batch3", "cell-clip", "sigmoid-cell"])
def test_lstm_float(kw, tmp_path):
    model, shape = lstm_model("float32", **kw)
    xs = random_inputs(shape, "float32", 4, seed=5)
    assert_matches_tflm(model, [xs], tmp_path)


@pytest.mark.parametrize("kw", [
    dict(),
    dict(time_major=True, batch=2, steps=4),
    dict(batch=3, steps=2, units=3, depth=6, h_q=(0.02, 5)),
    dict(clip=0.25, steps=5, cell_scale=2.0 ** -12),
    dict(act=SIGMOID, units=2, cell_scale=2.0 ** -9),
    dict(cell_scale=2.0 ** -15, in_q=(0.1, -7), w_scale=0.05),
], ids=["basic", "time-major-batch2", "batch-major-batch3-hzp", "cell-clip", "sigmoid-cell-p9",
        "cell-p15"])
def test_lstm_int8(kw, tmp_path):
    model, shape = lstm_model("int8", **kw)
    xs = random_inputs(shape, "int8", 4, seed=5)
    got, ref = assert_matches_tflm(model, [xs], tmp_path)
    assert len(np.unique(ref[0])) > 8   # not saturated


def test_lstm_state_is_carried(tmp_path):
    # the same sequence twice: the second invocation starts from the first one's state
    model, shape = lstm_model("int8", steps=2)
    xs = np.repeat(random_inputs(shape, "int8", 1, seed=9), 3, axis=0)
    got, ref = assert_matches_tflm(model, [xs], tmp_path)
    assert not np.array_equal(ref[0][0], ref[0][1])


def test_lstm_builds_for_cortex_m(tmp_path, cross_cc):
    # the C proof and the stack bound with the embedded toolchain (state outside the arena)
    from eerie_c.api import compile_model
    model, _ = lstm_model("int8", time_major=True, batch=2, clip=0.3)
    p = tmp_path / "lstm8.tflite"
    p.write_bytes(model)
    r = compile_model(p, target="cortex-m4")
    assert r.report["state_bytes"] == 2 * 5 + 2 * 5 * 2      # int8 hidden + int16 cell
    assert "void lstm8_reset_state(void)" in r.files["lstm8.c"]


@pytest.mark.parametrize("kw", [
    dict(),
    dict(time_major=True, batch=2, steps=4),
    dict(clip=0.25, steps=5, cell_scale=2.0 ** -12),
    dict(act=SIGMOID, units=2, cell_scale=2.0 ** -9),
], ids=["basic", "time-major-batch2", "cell-clip", "sigmoid-cell-p9"])
def test_lstm_int16(kw, tmp_path):
    """TFLM's 16x8 LSTM: int16 activations and states (zero points 0), int8 weights, int64
    biases, 64-bit gate sums."""
    model, shape = lstm_model("int16", **kw)
    xs = random_inputs(shape, "int16", 4, seed=5)
    got, ref = assert_matches_tflm(model, [xs], tmp_path)
    assert len(np.unique(ref[0])) > 8   # not saturated
