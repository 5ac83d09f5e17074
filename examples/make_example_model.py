#!/usr/bin/env python3
"""Build examples/tiny_conv.tflite, the small int8 model the README's main job compiles.

A 10x10 one-channel "image" -> CONV_2D (3x3, 8 filters, stride 2, SAME, fused RELU,
per-channel int8 weights) -> RESHAPE -> FULLY_CONNECTED (200 -> 4) -> SOFTMAX: the same
operator mix as the keyword-spotting and wake-word networks, in 1.5 KB of weights.

Weights are random with a fixed seed; activation scales are calibrated in float on random
inputs, as a post-training quantizer would. The result is deterministic and committed, so the
main job needs nothing but eerie-c; run this script only to regenerate it (it uses the TFLite
schema's object API from the `ai-edge-litert` package, plus `flatbuffers`).

    python3 examples/make_example_model.py [OUT.tflite]
"""
from __future__ import annotations

import sys
from pathlib import Path

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as fb

H = W = 10
FILTERS, UNITS = 8, 4
IN_SCALE, IN_ZP = 1 / 128, 0


def _stable(v: float) -> float:
    """A calibrated value rounded to 6 significant digits. Calibration sums thousands of
    products, whose last bits depend on the numpy / BLAS build; rounded like this, the value
    (and every byte of the model) is the same on any machine."""
    return float(f"{float(v):.6g}")


def main(out: Path):
    rng = np.random.default_rng(2024)
    # ---- float network, then quantize it (per-channel weights, per-tensor activations)
    conv_w = rng.normal(0, 0.4, (FILTERS, 3, 3, 1)).astype(np.float32)
    conv_b = rng.normal(0, 0.1, FILTERS).astype(np.float32)
    fc_w = rng.normal(0, 0.15, (UNITS, 5 * 5 * FILTERS)).astype(np.float32)
    fc_b = rng.normal(0, 0.1, UNITS).astype(np.float32)

    conv_ws = np.abs(conv_w).reshape(FILTERS, -1).max(1) / 127
    conv_wq = np.clip(np.round(conv_w / conv_ws[:, None, None, None]), -127, 127).astype(np.int8)
    conv_bs = IN_SCALE * conv_ws
    conv_bq = np.round(conv_b / conv_bs).astype(np.int32)

    # Calibrate the activation ranges on random inputs in [-1, 1), in float64, rounded (_stable).
    x = rng.uniform(-1, 1, (64, H, W, 1)).astype(np.float32).astype(np.float64)
    xp = np.pad(x, ((0, 0), (0, 1), (0, 1), (0, 0)))   # SAME, stride 2, 10 -> 5: pad after by 1
    conv = np.zeros((64, 5, 5, FILTERS), np.float64)
    for i in range(5):
        for j in range(5):
            patch = xp[:, 2 * i:2 * i + 3, 2 * j:2 * j + 3, :]
            conv[:, i, j, :] = np.einsum("nhwc,fhwc->nf", patch, conv_w.astype(np.float64)) + conv_b
    conv = np.maximum(conv, 0)
    conv_scale = _stable(conv.max() / 255)         # RELU output: zero point -128, range [0, max]
    fc = conv.reshape(64, -1) @ fc_w.T.astype(np.float64) + fc_b
    fc_scale = _stable(np.abs(fc).max() / 127)

    fc_ws = np.abs(fc_w).max(1) / 127
    fc_wq = np.clip(np.round(fc_w / fc_ws[:, None]), -127, 127).astype(np.int8)
    fc_bs = conv_scale * fc_ws
    fc_bq = np.round(fc_b / fc_bs).astype(np.int32)

    # ---- the flatbuffer
    tensors, buffers = [], [fb.BufferT()]

    def tensor(name, shape, ttype, scale, zp, axis=0, data=None):
        t = fb.TensorT()
        t.name, t.shape, t.type = name, list(shape), ttype
        q = fb.QuantizationParametersT()
        q.scale = [float(s) for s in np.atleast_1d(scale)]
        q.zeroPoint = [int(z) for z in np.broadcast_to(zp, len(q.scale))]
        q.quantizedDimension = axis
        t.quantization = q
        if data is not None:
            b = fb.BufferT()
            b.data = np.frombuffer(np.ascontiguousarray(data).tobytes(), np.uint8)
            buffers.append(b)
            t.buffer = len(buffers) - 1
        tensors.append(t)
        return len(tensors) - 1

    I8, I32 = fb.TensorType.INT8, fb.TensorType.INT32
    t_in = tensor("input", [1, H, W, 1], I8, IN_SCALE, IN_ZP)
    t_cw = tensor("conv/weights", conv_wq.shape, I8, conv_ws, 0, 0, conv_wq)
    t_cb = tensor("conv/bias", [FILTERS], I32, conv_bs, 0, 0, conv_bq)
    t_conv = tensor("conv/relu", [1, 5, 5, FILTERS], I8, conv_scale, -128)
    t_shape = tensor("flatten/shape", [2], I32, 1.0, 0, 0, np.array([1, 5 * 5 * FILTERS], np.int32))
    tensors[t_shape].quantization = None
    t_flat = tensor("flatten", [1, 5 * 5 * FILTERS], I8, conv_scale, -128)
    t_fw = tensor("fc/weights", fc_wq.shape, I8, fc_ws, 0, 0, fc_wq)
    t_fb = tensor("fc/bias", [UNITS], I32, fc_bs, 0, 0, fc_bq)
    t_fc = tensor("fc", [1, UNITS], I8, fc_scale, 0)
    t_out = tensor("probabilities", [1, UNITS], I8, 1 / 256, -128)

    codes, ops = [], []

    def op(kind, ins, outs, options, **fields):
        code = getattr(fb.BuiltinOperator, kind)
        oc = fb.OperatorCodeT()
        oc.builtinCode, oc.deprecatedBuiltinCode, oc.version = code, min(code, 127), 1
        codes.append(oc)
        o = fb.OperatorT()
        o.opcodeIndex, o.inputs, o.outputs = len(codes) - 1, ins, outs
        opts = getattr(fb, options + "T")()
        for k, v in fields.items():
            setattr(opts, k, v)
        o.builtinOptionsType, o.builtinOptions = getattr(fb.BuiltinOptions, options), opts
        ops.append(o)

    op("CONV_2D", [t_in, t_cw, t_cb], [t_conv], "Conv2DOptions", padding=fb.Padding.SAME,
       strideW=2, strideH=2, dilationWFactor=1, dilationHFactor=1,
       fusedActivationFunction=fb.ActivationFunctionType.RELU)
    op("RESHAPE", [t_conv, t_shape], [t_flat], "ReshapeOptions", newShape=[1, 5 * 5 * FILTERS])
    op("FULLY_CONNECTED", [t_flat, t_fw, t_fb], [t_fc], "FullyConnectedOptions",
       fusedActivationFunction=fb.ActivationFunctionType.NONE)
    op("SOFTMAX", [t_fc], [t_out], "SoftmaxOptions", beta=1.0)

    sg = fb.SubGraphT()
    sg.name, sg.tensors, sg.operators, sg.inputs, sg.outputs = "main", tensors, ops, [t_in], [t_out]
    m = fb.ModelT()
    m.version, m.description = 3, "eerie-c example: tiny int8 conv + fc classifier"
    m.operatorCodes, m.subgraphs, m.buffers = codes, [sg], buffers
    b = flatbuffers.Builder(4096)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    out.write_bytes(bytes(b.Output()))
    print(f"wrote {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("tiny_conv.tflite"))
