"""PyTorch programs quantized with PT2E compile to int8 kernels (passes/fold_qdq.py).

From both quantizers (torchao's XNNPACK-style one, ExecuTorch's CortexMQuantizer), given as an
nn.Module, an ExportedProgram or a .pt2 file: the heavy ops run in int8, outputs keep the
accuracy contract against the converted program's own eager run, a conv matches TFLM bit for
bit, float islands are reported (never silent), and what cannot be compiled fails in one line.
"""
import json
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import eerie_c
from eerie_c.errors import EerieError
from pt2e import (QUANTIZERS, assert_contract, eager, output_step, quantize, random_inputs,
                  smooth_inputs)
from zoo import build

# CI installs torchao and executorch (.ci/setup): without them this fails, never skips.
pytest.importorskip("torchao", reason="PT2E tests need torchao (pip install torchao==0.18.0)")

HEAVY = {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"}


def int8_kinds(graph) -> dict:
    """op kind -> dtypes of its first input, over the compiled graph."""
    out: dict = {}
    for op in graph.ops:
        if op.inputs and op.inputs[0] is not None:
            out.setdefault(op.kind, set()).add(graph.t(op.inputs[0]).dtype)
    return out


@pytest.mark.parametrize("qname", QUANTIZERS)
def test_image_cnn_runs_in_int8_within_one_step(qname):
    m, x = build("image_cnn")
    cm, ex = quantize(m, x, qname)
    res = eerie_c.compile(cm, (ex,))
    kinds = int8_kinds(res.graph)
    for k in ("CONV_2D", "FULLY_CONNECTED", "MAX_POOL_2D"):
        assert kinds.get(k) == {"int8"}, (k, kinds)
    assert res.graph.float_islands == []
    assert res.report["quantization"]["float_islands"] == []
    xs = np.concatenate([random_inputs(x.shape, 8, 1), smooth_inputs(tuple(x.shape), 8, 2)])
    outs, _ = eerie_c.run(cm, [xs], example_args=(ex,))
    exact = assert_contract(outs[0], eager(cm, xs), output_step(res.graph), classifier=True)
    print(f"{qname}: {exact:.1%} of outputs exactly equal to eager")


def test_per_tensor_weights():
    m, x = build("ds_cnn")
    cm, ex = quantize(m, x, "xnnpack", per_channel=False)
    res = eerie_c.compile(cm, (ex,))
    conv = next(op for op in res.graph.ops if op.kind == "CONV_2D")
    assert res.graph.t(conv.inputs[1]).dtype == "int8"
    assert not res.graph.t(conv.inputs[1]).quant.per_channel
    xs = random_inputs(x.shape, 6, 3)
    outs, _ = eerie_c.run(cm, [xs], example_args=(ex,))
    assert_contract(outs[0], eager(cm, xs), output_step(res.graph), classifier=True)


def test_exported_program_and_pt2_file(tmp_path):
    m, x = build("autoencoder")
    cm, ex = quantize(m, x, "xnnpack")
    ep = torch.export.export(cm, (ex,))
    res = eerie_c.compile(ep)
    assert {"FULLY_CONNECTED"} <= {op.kind for op in res.graph.ops}
    assert int8_kinds(res.graph)["FULLY_CONNECTED"] == {"int8"}
    # The CLI on the saved program: compile, build, run on the host, save the outputs.
    path = tmp_path / "ae.pt2"
    torch.export.save(ep, str(path))
    xs = random_inputs(x.shape, 4, 5)
    np.save(tmp_path / "x.npy", xs)
    r = subprocess.run([sys.executable, "-m", "eerie_c.cli", "run", str(path), "--input",
                        str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy"),
                        "-o", str(tmp_path / "out")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    got = np.load(tmp_path / "y.npy")
    assert_contract(got, eager(cm, xs), output_step(res.graph))
    rep = json.loads((tmp_path / "out" / "report.json").read_text())
    assert rep["quantization"]["from"] == "pt2e"
    assert rep["quantization"]["int8_ops"] > 0


class ConvOnly(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 5, 3, stride=2, padding=1)

    def forward(self, x):
        return F.relu(self.conv(x))


def test_conv_is_bit_exact_with_tflm(tmp_path):
    """A conv's int8 meaning (TFLite's: int8 weights per channel, int32 bias at scale
    input * weight, the same requantization) matches TFLM bit for bit. The TFLite model is
    built from the converted program's own int8 weights and scales, not from ours."""
    from conftest import tflm_run
    from tflite_builder import ACT, PAD, ModelBuilder
    torch.manual_seed(3)
    cm, ex = quantize(ConvOnly(), torch.randn(1, 3, 9, 9), "xnnpack")
    nodes = {n.name: n for n in cm.graph.nodes}
    q_in = next(n for n in nodes.values() if "quantize_per_tensor" in str(n.target))
    s_in, zp_in = float(q_in.args[1]), int(q_in.args[2])
    dq_w = next(n for n in nodes.values() if "dequantize_per_channel" in str(n.target))
    w_q = getattr(cm, dq_w.args[0].target).detach().numpy()          # int8 [O, I, kh, kw]
    s_w = getattr(cm, dq_w.args[1].target).detach().numpy().astype(np.float32)
    q_out = [n for n in nodes.values() if "quantize_per_tensor" in str(n.target)][-1]
    s_out, zp_out = float(q_out.args[1]), int(q_out.args[2])
    bias = cm.conv.bias.detach().numpy() if hasattr(cm, "conv") else None
    if bias is None:
        bias = next(getattr(cm, n.target) for n in nodes.values()
                    if n.op == "get_attr" and "bias" in str(n.target)).detach().numpy()
    b_q = np.round(bias.astype(np.float64) / (np.float64(np.float32(s_in)) * s_w.astype(np.float64))).astype(np.int32)

    mb = ModelBuilder()
    xi = mb.input([1, 9, 9, 3], "int8", scale=s_in, zero_point=zp_in)
    w = mb.const(np.ascontiguousarray(w_q.transpose(0, 2, 3, 1)), "int8", scale=list(s_w),
                 zero_point=[0] * 5, axis=0)
    b = mb.const(b_q, "int32", scale=list(np.float32(s_in) * s_w), zero_point=[0] * 5, axis=0)
    y = mb.tensor([1, 5, 5, 5], "int8", scale=s_out, zero_point=zp_out)
    mb.op("CONV_2D", [xi, w, b], [y], "Conv2DOptions", padding=PAD["SAME"], strideW=2, strideH=2,
          fusedActivationFunction=ACT["RELU"])
    mb.output(y)
    model = mb.build()

    rng = np.random.default_rng(0)
    q = rng.integers(-128, 128, size=(6, 1, 9, 9, 3)).astype(np.int8)
    # Inputs on the quantization grid, so PT2E's and TFLite's input rounding agree.
    xs = ((q.astype(np.float32) - zp_in) * np.float32(s_in)).transpose(0, 1, 4, 2, 3)
    ours, _ = eerie_c.run(cm, [np.ascontiguousarray(xs)], example_args=(ex,))
    ref_q = tflm_run(model, [q])[0]      # int8 NHWC, one inference per row
    ref = ((ref_q.astype(np.float32) - zp_out) * np.float32(s_out)).transpose(0, 1, 4, 2, 3)
    assert np.array_equal(ours[0].reshape(ref.shape), ref)


class WithFloatIsland(nn.Module):
    """XNNPACK's quantizer leaves layer_norm unannotated, and eerie-c has no int8 layer norm:
    a float island between two int8 convs. (A lone GELU is no island any more: a function of
    one int8 value, it runs as a table, frontend/torch/lut_regions.py.)"""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(2, 4, 3, padding=1)
        self.b = nn.Conv2d(4, 3, 3, padding=1)

    def forward(self, x):
        y = self.a(x)
        y = F.layer_norm(y, y.shape[1:])      # the island's line
        return self.b(y)


ISLAND_KINDS = ["MEAN", "SUB", "MUL", "MEAN", "ADD", "RSQRT", "MUL"]


def test_float_island_is_reported_everywhere(tmp_path, capsys):
    torch.manual_seed(4)
    cm, ex = quantize(WithFloatIsland(), torch.randn(1, 2, 6, 6), "xnnpack")
    res = eerie_c.compile(cm, (ex,), out_dir=tmp_path / "o")
    islands = res.report["quantization"]["float_islands"]
    assert [i["kinds"] for i in islands] == [ISLAND_KINDS]
    assert "test_pt2e.py" in islands[0]["sources"][0] and "layer_norm" not in islands[0]["reason"]
    assert islands[0]["reason"]
    md = (tmp_path / "o" / "report.md").read_text()
    assert "## Quantization" in md and "RSQRT" in md and "test_pt2e.py" in md
    # The convolutions around it are int8.
    assert int8_kinds(res.graph)["CONV_2D"] == {"int8"}
    xs = random_inputs(ex.shape, 4, 6)
    outs, _ = eerie_c.run(cm, [xs], example_args=(ex,))
    assert_contract(outs[0], eager(cm, xs), output_step(res.graph))
    # --report (the CLI's summary) lists it too.
    path = tmp_path / "island.pt2"
    torch.export.save(torch.export.export(cm, (ex,)), str(path))
    r = subprocess.run([sys.executable, "-m", "eerie_c.cli", str(path), "--report", "-q",
                        "-o", str(tmp_path / "cli")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "float island: MEAN SUB MUL MEAN ... at test_pt2e.py:" in r.stdout, r.stdout
    # eerie-c check names the op that falls back and why.
    result = eerie_c.check(cm, (ex,))
    assert result.ok
    text = result.text()
    assert "float island" in text and "native_layer_norm (MEAN)" in text and "test_pt2e.py" in text, text


class NarrowRange(nn.Module):
    """Hand-written quantize/dequantize with an activation range the kernels cannot honour."""

    def forward(self, x):
        q = torch.ops.quantized_decomposed.quantize_per_tensor(x, 0.05, 0, -127, 127, torch.int8)
        return torch.ops.quantized_decomposed.dequantize_per_tensor(q, 0.05, 0, -127, 127, torch.int8)


def test_unsupported_quantization_is_one_line_error():
    with pytest.raises(EerieError) as e:
        eerie_c.compile(NarrowRange(), (torch.randn(1, 8),))
    msg = str(e.value)
    assert "\n" not in msg and "[-127, 127]" in msg and "test_pt2e.py" in msg


class HandQDQ(nn.Module):
    """The quantized_decomposed representation written by hand (no quantizer): a linear layer
    with int8 per-channel weights between quantize/dequantize pairs."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(7)
        self.register_buffer("w", torch.randint(-127, 128, (4, 6), generator=g, dtype=torch.int8))
        self.register_buffer("ws", torch.rand(4, generator=g) * 0.01 + 0.001)
        self.register_buffer("wz", torch.zeros(4, dtype=torch.int64))

    def forward(self, x):
        qd = torch.ops.quantized_decomposed
        x = qd.dequantize_per_tensor(qd.quantize_per_tensor(x, 0.02, 3, -128, 127, torch.int8),
                                     0.02, 3, -128, 127, torch.int8)
        w = qd.dequantize_per_channel(self.w, self.ws, self.wz, 0, -127, 127, torch.int8)
        y = F.linear(x, w)
        return qd.dequantize_per_tensor(qd.quantize_per_tensor(y, 0.01, -5, -128, 127, torch.int8),
                                        0.01, -5, -128, 127, torch.int8)


def test_hand_written_quantized_decomposed_ops():
    m = HandQDQ()
    res = eerie_c.compile(m, (torch.randn(1, 6),))
    fc = next(op for op in res.graph.ops if op.kind == "FULLY_CONNECTED")
    assert res.graph.t(fc.inputs[1]).dtype == "int8"
    assert np.array_equal(res.graph.t(fc.inputs[1]).data, m.w.numpy())   # the int8 weights, recovered exactly
    xs = random_inputs((1, 6), 8, 8) * 2
    outs, _ = eerie_c.run(m, [xs], example_args=(torch.randn(1, 6),))
    assert_contract(outs[0], eager(m, xs), 0.01)


def test_input_quantize_rounds_like_pt2e():
    """The program's QUANTIZE multiplies by the float reciprocal and rounds half to even, as
    quantized_decomposed.quantize_per_tensor: exact on ties and on values a division would
    round the other way."""
    class Q(nn.Module):
        def forward(self, x):
            qd = torch.ops.quantized_decomposed
            q = qd.quantize_per_tensor(x, 0.1, 0, -128, 127, torch.int8)
            return qd.dequantize_per_tensor(q, 0.1, 0, -128, 127, torch.int8)
    m = Q()
    ties = (np.arange(-40, 40, dtype=np.float32) + 0.5) * np.float32(0.1)
    noise = np.random.default_rng(9).standard_normal(80).astype(np.float32) * 5
    xs = np.stack([ties, noise])[:, None, :]
    outs, _ = eerie_c.run(m, [xs], example_args=(torch.randn(1, 80),))
    assert np.array_equal(outs[0].reshape(2, 1, 80), eager(m, xs))


class PaddedInput(nn.Module):
    """The kws_ref_model's SAME padding written as a ZeroPad2d on the float input."""

    def __init__(self):
        super().__init__()
        self.pad = nn.ZeroPad2d((1, 1, 4, 5))
        self.conv = nn.Conv2d(1, 4, (10, 4), stride=2)

    def forward(self, x):
        return self.conv(self.pad(x))


def test_input_is_quantized_before_it_moves():
    """A zero pad between the float input and its quantize runs in int8 after the quantize
    (0 quantizes to the zero point): no float op, a quarter of the bytes moved."""
    torch.manual_seed(8)
    cm, ex = quantize(PaddedInput(), torch.randn(1, 1, 49, 10), "xnnpack")
    res = eerie_c.compile(cm, (ex,))
    kinds = [(op.kind, res.graph.t(op.outputs[0]).dtype) for op in res.graph.ops]
    assert kinds[0] == ("QUANTIZE", "int8") and ("PAD", "int8") in kinds, kinds
    assert res.graph.float_islands == []
    xs = random_inputs(ex.shape, 4, 10)
    outs, _ = eerie_c.run(cm, [xs], example_args=(ex,))
    assert_contract(outs[0], eager(cm, xs), output_step(res.graph))


def test_4bit_weight_observer_packs_weights(tmp_path):
    """A weight observer with quant_min -8, quant_max 7 (the XNNPACK-style config's bounds):
    the convolutions' and the linear layer's weights are 4-bit, two per byte in the C, and the
    outputs keep the contract against the converted program (per-channel weights; per-tensor
    4-bit weights are the same kernels, tests/ops/test_int4.py)."""
    import re
    m, x = build("ds_cnn")
    cm, ex = quantize(m, x, "xnnpack", weight_bits=4)
    res = eerie_c.compile(cm, (ex,), target="cortex-m4")
    heavy = [op for op in res.graph.ops if op.kind in HEAVY]
    assert heavy and all(res.graph.t(op.inputs[1]).int4 for op in heavy), \
        [(op.kind, res.graph.t(op.inputs[1]).int4) for op in heavy]
    code = next(v for k, v in res.files.items() if k.endswith(".c"))
    assert len(re.findall(r"\w+_weights_int4\w*\[", code)) == len(heavy)
    xs = random_inputs(x.shape, 6, 3)
    outs, _ = eerie_c.run(cm, [xs], example_args=(ex,))
    assert_contract(outs[0], eager(cm, xs), output_step(res.graph), classifier=True)
