"""Quantization schemes that TFLite allows but eerie-c does not compile, found in one pass over
the graph before lowering. check_supported reports them together with unsupported ops and
dtypes in one error line with counts and op indices, instead of the first kernel that meets
one stopping the compile with a one-op message (the user then fixes one op at a time)."""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Op

# Ops with constant weights, and which input carries the activation (TRANSPOSE_CONV's inputs
# are output_shape, weights, input). A float activation with int8 weights is TFLite's hybrid
# (dynamic-range) scheme: the kernel quantizes the input at run time.
WEIGHT_OPS = {"CONV_2D": 0, "DEPTHWISE_CONV_2D": 0, "FULLY_CONNECTED": 0, "TRANSPOSE_CONV": 2,
              "BATCH_MATMUL": 0, "SVDF": 0, "UNIDIRECTIONAL_SEQUENCE_LSTM": 0,
              "BIDIRECTIONAL_SEQUENCE_LSTM": 0, "UNIDIRECTIONAL_SEQUENCE_RNN": 0, "RNN": 0,
              "LSTM": 0}
# Ops whose weights (input 1) must be symmetric: TFLite's integer kernels take the weights'
# zero point as 0 (the reference kernels ignore any other value, so a model with one is not
# computed as its quantization parameters say).
SYMMETRIC_WEIGHT_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV")

HYBRID = "hybrid/dynamic-range quantization (float32 input, int8 weights)"
# passes/dequantize_hybrid.py compiles the symmetric hybrid ops of these kinds; what reaches
# check_supported of them has weights with a zero point (TFLite's hybrid kernels ignore it)
HYBRID_ASYMMETRIC = "hybrid/dynamic-range quantization (float32 input, int8 weights with zero point != 0)"
DEQUANTIZED_HYBRID = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")
ASYMMETRIC = "asymmetric int8 weights (zero point != 0)"


def _t(g: Graph, op: Op, k: int):
    return g.t(op.inputs[k]) if k < len(op.inputs) and op.inputs[k] is not None else None


def quant_problem(op: Op, g: Graph) -> str | None:
    """Why op's quantization scheme is not supported, or None."""
    act_k = WEIGHT_OPS.get(op.kind)
    if act_k is None:
        return None
    x = _t(g, op, act_k)
    if x is None:
        return None
    if x.dtype == "float32":
        consts = [t for k in range(len(op.inputs)) if k != act_k and (t := _t(g, op, k)) is not None
                  and t.is_const]
        if any(t.dtype in ("int8", "uint8") for t in consts):
            w = _t(g, op, 1)
            if op.kind in DEQUANTIZED_HYBRID and w is not None and w.dtype == "int8":
                return HYBRID_ASYMMETRIC
            return HYBRID
        return None
    if op.kind in SYMMETRIC_WEIGHT_OPS and x.dtype in ("int8", "int16"):
        w = _t(g, op, 1)
        if w is not None and w.dtype == "int8" and w.quant is not None \
                and np.any(np.asarray(w.quant.zero_point) != 0):
            return ASYMMETRIC
    return None
