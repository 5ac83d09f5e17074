"""CONV_2D_ADD: a residual ADD fused into the int8 CONV_2D producing one of its operands
(passes/fuse_conv_add.py, kernels/conv_add.py), written in place over the residual, vs TFLM.

Residual blocks built with tflite_builder: identity blocks (ADD of the block input and the
second convolution), ADD operand orders, odd pixel counts (the DSP kernel's single last
pixel), 1x1 and 3x3 second convolutions (the pixels' outputs staged in the im2col bytes or
after them), per-tensor weights, fused activations, and a downsampling block whose shortcut
convolution is moved before the main path's second convolution. Each runs with the portable
kernels (host target) and the DSP kernels (cortex-m4 C built on the host), and a few in QEMU
on mps2-an386. The plan proof (plan/proof.py) runs on every compile; the tests also check
that the fused output really sits on the residual's bytes and what is and is not fused.
"""
from __future__ import annotations


import numpy as np
import pytest

from conftest import assert_matches_tflm, random_inputs, tflm_run
from eerie_c.api import compile_model, run_model
from tflite_builder import ACT, PAD, ModelBuilder

from test_dsp_kernels import dsp_target_run

QS = dict(scale=0.05, zero_point=-3)


class Block:
    """A small int8 model builder for residual blocks (random weights, fixed scales)."""

    def __init__(self, shape, seed=0):
        self.mb = ModelBuilder()
        self.rng = np.random.default_rng(seed)
        self.x = self.mb.input(list(shape), "int8", **QS)
        self.shape = {self.x: list(shape)}

    def conv(self, x, out_c, k=3, stride=1, act="RELU", per_channel=True, scale=0.08, zp=2):
        n, h, w, c = self.shape[x]
        oh, ow = (h + stride - 1) // stride, (w + stride - 1) // stride
        ws = self.rng.uniform(0.002, 0.02, out_c) if per_channel else [0.01]
        wt = self.mb.const(self.rng.integers(-127, 128, (out_c, k, k, c)), "int8", scale=ws,
                           zero_point=[0] * len(ws), axis=0)
        bs = 0.05 * np.asarray(ws, np.float32)
        bt = self.mb.const(self.rng.integers(-3000, 3000, out_c), "int32", scale=bs,
                           zero_point=[0] * len(bs), axis=0)
        y = self.mb.tensor([n, oh, ow, out_c], "int8", scale=scale, zero_point=zp)
        self.mb.op("CONV_2D", [x, wt, bt], [y], "Conv2DOptions", padding=PAD["SAME"],
                   strideH=stride, strideW=stride, fusedActivationFunction=ACT[act])
        self.shape[y] = [n, oh, ow, out_c]
        return y

    def add(self, a, b, act="RELU", scale=0.1, zp=-1):
        y = self.mb.tensor(self.shape[a], "int8", scale=scale, zero_point=zp)
        self.mb.op("ADD", [a, b], [y], "AddOptions", fusedActivationFunction=ACT[act])
        self.shape[y] = self.shape[a]
        return y

    def build(self, *outs):
        for o in outs:
            self.mb.output(o)
        return self.mb.build()


def identity_block(shape=(1, 6, 7, 8), k2=3, conv_first=False, act="RELU", per_channel=True,
                   seed=0, tail=False):
    """stem conv -> x; conv1(x) -> y; conv2(y) -> z; ADD(x, z) (or ADD(z, x)) -> out
    (-> a 1x1 convolution with tail, so the ADD's output lives in the arena)."""
    b = Block(shape, seed)
    c = shape[3]
    x = b.conv(b.x, c, k=3)
    y = b.conv(x, c, k=3)
    z = b.conv(y, c, k=k2, act="NONE", per_channel=per_channel, scale=0.12, zp=-4)
    out = b.add(z, x, act) if conv_first else b.add(x, z, act)
    if tail:
        out = b.conv(out, c, k=1)
    return b.build(out), list(shape)


def downsample_block(shape=(1, 8, 6, 4), seed=0):
    """stem -> x; main: conv3x3 s2 -> conv3x3; shortcut: conv1x1 s2 on x; ADD(main, short)
    -> 1x1 convolution."""
    b = Block(shape, seed)
    x = b.conv(b.x, shape[3], k=3)
    m = b.conv(x, 2 * shape[3], k=3, stride=2)
    m = b.conv(m, 2 * shape[3], k=3, act="NONE", scale=0.12, zp=-4)
    s = b.conv(x, 2 * shape[3], k=1, stride=2, act="NONE", scale=0.09, zp=5)
    return b.build(b.conv(b.add(m, s), 4, k=1)), list(shape)


def two_readers_block(shape=(1, 5, 5, 4), seed=0):
    """ADD(x, conv(conv(x))) where x is read again after the ADD: fused, not in place."""
    b = Block(shape, seed)
    x = b.conv(b.x, shape[3], k=3)
    z = b.conv(b.conv(x, shape[3]), shape[3], act="NONE", scale=0.12, zp=-4)
    y = b.add(x, z)
    return b.build(b.add(y, x, act="NONE")), list(shape)


CASES = {
    "identity-3x3": lambda: identity_block(),
    "identity-conv-first-operand": lambda: identity_block(conv_first=True, act="RELU6"),
    "identity-odd-pixels": lambda: identity_block(shape=(1, 5, 3, 8), seed=1),
    "identity-1x1-per-tensor": lambda: identity_block(k2=1, per_channel=False, act="NONE", seed=2),
    "identity-batch2-16ch": lambda: identity_block(shape=(2, 4, 4, 16), seed=3, tail=True),
    "downsample-hoisted-shortcut": lambda: downsample_block(),
    "residual-read-again": lambda: two_readers_block(),
}


def _compile(tmp_path, model, target):
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    return compile_model(p, target=target, name="m", patch="off")   # the layer-by-layer plan


def _fused_ops(report):
    return [o for o in report["ops"] if o["kind"] == "CONV_2D_ADD"]


@pytest.mark.parametrize("case", list(CASES))
def test_host_portable_kernels(tmp_path, case):
    model, shape = CASES[case]()
    assert_matches_tflm(model, [random_inputs(shape, "int8", 3, seed=4)], tmp_path)


@pytest.mark.parametrize("case", list(CASES))
def test_dsp_kernels_host_build(tmp_path, case):
    model, shape = CASES[case]()
    xs = [random_inputs(shape, "int8", 3, seed=5)]
    got = dsp_target_run(model, xs, tmp_path)
    np.testing.assert_array_equal(got[0], tflm_run(model, xs)[0])


@pytest.mark.parametrize("target", ["host", "cortex-m4"])
def test_fused_and_in_place(tmp_path, target):
    """The ADD disappears into the convolution, whose output starts at the residual's bytes;
    the block then needs two live tensors + scratch, not three."""
    model, _ = identity_block(shape=(1, 8, 8, 16), tail=True)
    res = _compile(tmp_path, model, target)
    kinds = [o["kind"] for o in res.report["ops"]]
    assert "ADD" not in kinds and kinds.count("CONV_2D_ADD") == 1
    (op,) = _fused_ops(res.report)
    assert op["inputs"][0]["storage"] == "arena" == op["outputs"][0]["storage"]
    assert op["outputs"][0]["offset"] == op["inputs"][0]["offset"]
    scratch = max(o["scratch_bytes"] for o in res.report["ops"])
    assert res.report["arena_bytes"] <= 2 * 8 * 8 * 16 + scratch + 16


def test_downsample_shortcut_moved_before_second_conv(tmp_path):
    model, _ = downsample_block()
    res = _compile(tmp_path, model, "cortex-m4")
    ops = res.report["ops"]
    (op,) = _fused_ops(res.report)
    # the fused op is the main path's second 3x3 convolution; its residual (the shortcut's
    # output) was computed just before it and is overwritten in place
    k = ops.index(op)
    assert ops[k - 1]["kind"] == "CONV_2D" and ops[k - 1]["outputs"][0]["offset"] == op["inputs"][0]["offset"]
    assert op["outputs"][0]["offset"] == op["inputs"][0]["offset"]
    assert op["macs"] == 4 * 3 * 8 * 9 * 8


def test_residual_read_again_is_not_in_place(tmp_path):
    model, _ = two_readers_block()
    res = _compile(tmp_path, model, "cortex-m4")
    (op,) = _fused_ops(res.report)
    assert op["outputs"][0]["offset"] != op["inputs"][0]["offset"]
    assert [o["kind"] for o in res.report["ops"]].count("ADD") == 1   # the second ADD stays


def test_not_fused_when_conv_output_has_two_readers(tmp_path):
    b = Block((1, 4, 4, 4))
    x = b.conv(b.x, 4)
    z = b.conv(x, 4, act="NONE")
    model = b.build(b.add(x, z), z)     # z is a graph output too
    res = _compile(tmp_path, model, "cortex-m4")
    assert not _fused_ops(res.report) and "ADD" in [o["kind"] for o in res.report["ops"]]
    xs = [random_inputs([1, 4, 4, 4], "int8", 2, seed=6)]
    got = dsp_target_run(model, xs, tmp_path)
    for g_, r in zip(got, tflm_run(model, xs)):
        np.testing.assert_array_equal(g_, r)




@pytest.mark.usefixtures("board_tools")   # fails (never skips) without the tools
@pytest.mark.parametrize("case", ["identity-odd-pixels", "downsample-hoisted-shortcut"])
def test_on_cortex_m4_qemu(tmp_path, case):
    model, shape = CASES[case]()
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    xs = [random_inputs(shape, "int8", 2, seed=7)]
    # layer by layer: the test is about the fused kernel, which a patch stage would absorb
    got, rep = run_model(p, xs, board="mps2-an386", patch="off")
    assert rep["target"] == "cortex-m4"
    assert _fused_ops(rep)
    np.testing.assert_array_equal(got[0], tflm_run(model, xs)[0])
