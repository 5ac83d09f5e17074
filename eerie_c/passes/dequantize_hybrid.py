"""Hybrid (dynamic-range quantized) CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED: float32
activations with int8 weights, what the TFLite converter writes for
`optimizations=[tf.lite.Optimize.DEFAULT]` without a representative data set. TFLM refuses these
ops ("Hybrid models are not supported on TFLite Micro"). eerie-c dequantizes the weights at
compile time, scale x (q - zero point) per tensor or per output channel, into float32
constants, and the op runs on the float kernel: the result of the float model the weights came
from, to float rounding. The weights take 4x the flash they took in the file; the report says so
(one note per op).

TFLite's own hybrid kernels (ai-edge-litert) also quantize the *input* to int8 at run time and
accumulate in integers, so they differ from this float result by the input's quantization
error (about max|x| / 254 per input element); the float result is the one the model's weights
mean. Other hybrid ops (SVDF, LSTM, BATCH_MATMUL, TRANSPOSE_CONV), uint8 weights and weights
with a non-zero zero point (TFLite's hybrid kernels ignore it) stay unsupported: check_supported
names them in its one-line error.
"""
from __future__ import annotations

import numpy as np

from ..ir.describe import op_where, tensor_where
from ..ir import Graph, Tensor

# op kind -> the weights' output-channel dimension (the per-channel scales run along it)
CHANNEL_DIM = {"CONV_2D": 0, "FULLY_CONNECTED": 0, "DEPTHWISE_CONV_2D": 3}


def _hybrid_weights(op, g: Graph) -> Tensor | None:
    if op.kind not in CHANNEL_DIM or len(op.inputs) < 2 or None in op.inputs[:2]:
        return None
    x, w = g.t(op.inputs[0]), g.t(op.inputs[1])
    if x.dtype != "float32" or w.dtype != "int8" or not w.is_const or w.quant is None:
        return None
    if np.any(np.asarray(w.quant.zero_point) != 0):
        return None   # asymmetric: left to check_supported's error
    return w


def _dequantized(w: Tensor, dim: int) -> np.ndarray:
    scale = np.asarray(w.quant.scale, np.float32)
    if len(scale) > 1:   # per channel: the validator checked len == w.shape[dim]
        shape = [1] * len(w.shape)
        shape[dim] = len(scale)
        scale = scale.reshape(shape)
    # |q| <= 128 and a float32 scale: the product is exact in float64, one rounding to float32
    return (w.data.astype(np.float64) * scale.astype(np.float64)).astype(np.float32)


def dequantize_hybrid(g: Graph) -> Graph:
    done: dict[str, str] = {}   # int8 weights id -> its float32 copy (weights shared by ops)
    for op in g.ops:
        w = _hybrid_weights(op, g)
        if w is None:
            continue
        if w.id not in done:
            fid = f"{w.id}_dequantized"
            g.tensors[fid] = Tensor(id=fid, shape=w.shape, dtype="float32", label=w.label,
                                    data=_dequantized(w, CHANNEL_DIM[op.kind]))
            done[w.id] = fid
        op.inputs[1] = done[w.id]
        scheme = "per channel" if w.quant.per_channel else "per tensor"
        g.notes.append(f"{op_where(op)}: hybrid (dynamic-range) int8 weights {tensor_where(w)} "
                       f"({scheme}) dequantized at compile time; the op runs in float32 "
                       f"({4 * w.size} bytes of weights instead of {w.size})")
    return g
