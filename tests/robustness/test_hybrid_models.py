"""Hybrid (dynamic-range quantized) models: float32 activations, int8 weights (the TFLite
converter's Optimize.DEFAULT without a representative data set). TFLM refuses every one of
them (asked of the tflite-micro runtime here, not assumed). eerie-c dequantizes the weights of
CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED at compile time and runs the float kernels
(passes/dequantize_hybrid.py); anything else hybrid gets a one-line error. Never a wrong result:

- exact: the same model with its weights dequantized into float32 in the file (numpy,
  dequantize_weights below) runs on TFLM's float kernels; eerie-c matches it within the float
  tolerance (conftest.assert_float_close, 1e-5 relative);
- against TFLite's own hybrid kernels (ai-edge-litert's interpreter): those quantize the input
  to int8 at run time, so they differ from the float result by that rounding; a single op is
  within its bound, step / 2 x sum |w| per output channel (step = max|x| / 127); the MLPerf
  Tiny KWS model (tests/corpus) agrees on every top-1 and within 0.05 in probability.
"""
from __future__ import annotations

import flatbuffers
import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as fb

from conftest import ROOT, assert_float_close, eerie_run, random_inputs, tflm_run
from tflite_builder import ModelBuilder
from eerie_c.api import compile_model
from eerie_c.errors import EerieError

KWS_HYBRID = ROOT / "tests" / "corpus" / "mlcommons-tiny" / "kws_ref_model_float32.tflite"
WEIGHT_OPS = (fb.BuiltinOperator.CONV_2D, fb.BuiltinOperator.DEPTHWISE_CONV_2D,
              fb.BuiltinOperator.FULLY_CONNECTED)
CHANNEL_DIM = {"FULLY_CONNECTED": 0, "CONV_2D": 0, "DEPTHWISE_CONV_2D": 3}


def hybrid_model(kind, per_channel, w_zero_point=0):
    """One hybrid op: float input, int8 weights (per tensor or per output channel), float bias."""
    rng = np.random.default_rng(0)
    mb = ModelBuilder()
    if kind == "FULLY_CONNECTED":
        x, wshape, yshape = mb.input([2, 16], "float32"), (6, 16), [2, 6]
    elif kind == "CONV_2D":
        x, wshape, yshape = mb.input([1, 6, 6, 3], "float32"), (4, 3, 3, 3), [1, 4, 4, 4]
    else:   # depth multiplier 2
        x, wshape, yshape = mb.input([1, 6, 6, 3], "float32"), (1, 3, 3, 6), [1, 4, 4, 6]
    dim = CHANNEL_DIM[kind]
    n = wshape[dim] if per_channel else 1
    w = mb.const(rng.integers(-127, 128, wshape), "int8", scale=list(rng.uniform(0.005, 0.02, n)),
                 zero_point=[w_zero_point] * n, axis=dim, name="w")
    b = mb.const(rng.standard_normal(wshape[dim]), "float32")
    y = mb.tensor(yshape, "float32")
    if kind == "FULLY_CONNECTED":
        mb.op(kind, [x, w, b], [y], "FullyConnectedOptions")
    elif kind == "CONV_2D":
        mb.op(kind, [x, w, b], [y], "Conv2DOptions", padding=1, strideW=1, strideH=1)
    else:
        mb.op(kind, [x, w, b], [y], "DepthwiseConv2DOptions", padding=1, strideW=1, strideH=1,
              depthMultiplier=2)
    mb.output(y)
    return mb.build()


def dequantize_weights(data: bytes) -> bytes:
    """The model with every hybrid CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED weight tensor
    replaced by scale x q in float32: the float model TFLM can run, the exact reference."""
    m = fb.ModelT.InitFromPackedBuf(data, 0)
    sg = m.subgraphs[0]
    for op in sg.operators:
        code = m.operatorCodes[op.opcodeIndex]
        if max(code.builtinCode, code.deprecatedBuiltinCode) not in WEIGHT_OPS:
            continue
        x, w = sg.tensors[op.inputs[0]], sg.tensors[op.inputs[1]]
        if x.type != fb.TensorType.FLOAT32 or w.type != fb.TensorType.INT8:
            continue
        q = np.frombuffer(bytes(m.buffers[w.buffer].data), np.int8).reshape(w.shape).astype(np.float64)
        s = np.asarray(w.quantization.scale, np.float64)
        if s.size > 1:
            shape = [1] * q.ndim
            shape[w.quantization.quantizedDimension] = s.size
            s = s.reshape(shape)
        m.buffers[w.buffer].data = np.frombuffer((q * s).astype(np.float32).tobytes(), np.uint8)
        w.type, w.quantization = fb.TensorType.FLOAT32, None
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def litert_run(data: bytes, x: np.ndarray) -> np.ndarray:
    from ai_edge_litert.interpreter import Interpreter
    it = Interpreter(model_content=data)
    it.allocate_tensors()
    outs = []
    for xi in x:
        it.set_tensor(it.get_input_details()[0]["index"], xi)
        it.invoke()
        outs.append(it.get_tensor(it.get_output_details()[0]["index"]).copy())
    return np.stack(outs)


def tflm_refuses(data: bytes, xs) -> None:
    with pytest.raises(Exception):
        tflm_run(data, xs)


CASES = [(k, pc) for k in ("FULLY_CONNECTED", "CONV_2D", "DEPTHWISE_CONV_2D") for pc in (False, True)]


@pytest.mark.parametrize("kind,per_channel", CASES)
def test_hybrid_op_runs_as_its_float_model(kind, per_channel, tmp_path):
    data = hybrid_model(kind, per_channel)
    in_shape = {"FULLY_CONNECTED": [2, 16]}.get(kind, [1, 6, 6, 3])
    xs = [random_inputs(in_shape, "float32", 3, seed=4, scale=3.0)]
    tflm_refuses(data, xs)
    got, report = eerie_run(data, xs, tmp_path)
    assert_float_close(got[0], tflm_run(dequantize_weights(data), xs)[0])
    scheme = "per channel" if per_channel else "per tensor"
    assert any("hybrid (dynamic-range) int8 weights" in n and scheme in n and "dequantized at compile time" in n
               for n in report["notes"]), report["notes"]

    # TFLite's hybrid kernel: within the input's quantization error (litert refuses a hybrid
    # depthwise with one scale for all channels: nothing to compare there)
    if kind == "DEPTHWISE_CONV_2D" and not per_channel:
        with pytest.raises(Exception):
            litert_run(data, xs[0])
        return
    lite = litert_run(data, xs[0])
    w = fb.ModelT.InitFromPackedBuf(dequantize_weights(data), 0)
    wt = w.subgraphs[0].tensors[w.subgraphs[0].operators[0].inputs[1]]
    wf = np.frombuffer(bytes(w.buffers[wt.buffer].data), np.float32).reshape(wt.shape)
    per_out = np.abs(wf).sum(axis=tuple(d for d in range(wf.ndim) if d != CHANNEL_DIM[kind]))
    for g, r, x in zip(got[0], lite, xs[0]):
        bound = np.abs(x).max() / 127 / 2 * per_out * 1.01 + 1e-5 * np.abs(g).max()
        assert np.all(np.abs(g - r) <= bound), (np.abs(g - r).max(axis=tuple(range(g.ndim - 1))), bound)


def test_mlperf_tiny_hybrid_kws_on_host_and_board(tmp_path, board_tools):
    """MLPerf Tiny's kws_ref_model_float32.tflite is hybrid (CONV_2D with int8 weights): TFLM
    refuses it; eerie-c matches its float model on the host and on mps2-an386, and TFLite's
    hybrid kernels to within their input rounding."""
    data = KWS_HYBRID.read_bytes()
    xs = [random_inputs([1, 49, 10, 1], "float32", 4, seed=3, scale=20.0)]
    tflm_refuses(data, xs)
    ref = tflm_run(dequantize_weights(data), xs)[0]
    host, report = eerie_run(KWS_HYBRID, xs, tmp_path)
    assert_float_close(host[0], ref)
    assert sum("dequantized at compile time" in n for n in report["notes"]) == 5, report["notes"]
    board, _ = eerie_run(KWS_HYBRID, xs, tmp_path, board="mps2-an386")
    assert_float_close(board[0], ref)
    lite = litert_run(data, xs[0])
    assert np.array_equal(host[0].argmax(-1), lite.argmax(-1))
    assert np.abs(host[0] - lite).max() < 0.05


def refused(data: bytes, tmp_path, *needles):
    (tmp_path / "m.tflite").write_bytes(data)
    with pytest.raises(EerieError) as e:
        compile_model(tmp_path / "m.tflite", tmp_path / "out")
    msg = str(e.value)
    assert "\n" not in msg and all(n in msg for n in needles), msg


def test_hybrid_with_asymmetric_weights_is_refused(tmp_path):
    """A weight zero point TFLite's hybrid kernels ignore: no result to match, refused."""
    data = hybrid_model("FULLY_CONNECTED", False, w_zero_point=3)
    tflm_refuses(data, [random_inputs([2, 16], "float32", 1)])
    refused(data, tmp_path, "unsupported quantization: FULLY_CONNECTED with hybrid")


def test_hybrid_transpose_conv_is_refused(tmp_path):
    """Hybrid ops other than CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED: one-line error."""
    mb = ModelBuilder()
    shape = mb.const(np.array([1, 6, 6, 4]), "int32")
    w = mb.const(np.random.default_rng(0).integers(-127, 128, (4, 3, 3, 2)), "int8", scale=0.01,
                 zero_point=0)
    x = mb.input([1, 4, 4, 2], "float32")
    y = mb.tensor([1, 6, 6, 4], "float32")
    mb.op("TRANSPOSE_CONV", [shape, w, x], [y], "TransposeConvOptions", padding=1, strideW=1, strideH=1)
    mb.output(y)
    data = mb.build()
    tflm_refuses(data, [random_inputs([1, 4, 4, 2], "float32", 1)])
    refused(data, tmp_path, "unsupported quantization: TRANSPOSE_CONV with hybrid")
