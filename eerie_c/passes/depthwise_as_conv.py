"""A DEPTHWISE_CONV_2D over one input channel is a CONV_2D: each output channel c is the
window of the single input channel times filter c, which is what a convolution with one input
channel computes. TFLM's micro_speech runs its whole model through such a layer (49x40x1 in,
a 10x8 window, depth multiplier 8); the depthwise kernels' fast paths need four channels and
one filter per channel, so it ran the generic loop at 9.5 instructions per MAC on the M4,
where the convolution kernels take many output channels at once.

    y = DEPTHWISE_CONV_2D(x[.., 1], w[1, kh, kw, M], b)  ->  y = CONV_2D(x, w'[M, kh, kw, 1], b)

Exact: TFLM's int8 depthwise and convolution kernels requantize each output channel with the
same multiplier (input scale x filter scale of that channel / output scale), and the float
ones add the same taps in the same order (rows, then columns, then the one input channel)
before the bias. Conditions: the input has one channel, int8 or float32 (not 16x8), the
weights are constant and not 4-bit (their packing is per kernel, kernels/_int4.py), and the
op lies outside control-flow bodies.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..ir import Graph, Quant


def depthwise_as_conv(g: Graph) -> Graph:
    ops = []
    for op in g.ops:
        ops.append(_as_conv(g, op) or op)
    # in place, not a new Graph: a graph carries attributes beyond its fields
    g.ops = ops
    return g


def _as_conv(g: Graph, op):
    if op.kind != "DEPTHWISE_CONV_2D" or op.regions or len(op.inputs) < 2 \
            or op.inputs[0] is None or op.inputs[1] is None:
        return None
    x, w = g.t(op.inputs[0]), g.t(op.inputs[1])
    if len(x.shape) != 4 or x.shape[3] != 1 or x.dtype not in ("int8", "float32") \
            or not w.is_const or w.int4 or len(w.shape) != 4 or w.shape[0] != 1:
        return None
    if w.dtype != x.dtype or g.t(op.outputs[0]).dtype != x.dtype:
        return None
    quant = w.quant
    if quant is not None and quant.per_channel:
        if quant.axis != 3:
            return None
        quant = Quant(quant.scale, quant.zero_point, axis=0)
    wid = f"{w.id}_as_conv"
    g.tensors[wid] = replace(w, id=wid, shape=(w.shape[3], w.shape[1], w.shape[2], 1),
                             data=np.ascontiguousarray(w.data.transpose(3, 1, 2, 0)), quant=quant)
    attrs = {k: v for k, v in op.attrs.items() if k != "depth_multiplier"}
    return replace(op, kind="CONV_2D", inputs=[op.inputs[0], wid] + list(op.inputs[2:]), attrs=attrs)
