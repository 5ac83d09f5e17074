"""Fuse a float RELU / RELU6 / RELU_N1_TO_1 into the float CONV_2D, DEPTHWISE_CONV_2D or
FULLY_CONNECTED right before it, as TFLite's converter does (PyTorch programs keep them apart):

    z = CONV_2D(x, w, b)                  y = CONV_2D(x, w, b, fused_activation_function=RELU)
    y = RELU(z)                 ->

The kernel then clamps each output once, as it writes it, and the RELU's pass over memory is
gone. Exact for every input: the unfused kernel clamps to [-FLT_MAX, FLT_MAX] and the RELU op
then to [0, +inf) (RELU6: [0, 6], RELU_N1_TO_1: [-1, 1]); the fused clamp to [0, FLT_MAX] (and
the others) gives the same value for every float, infinities and NaN (kept by both) included.

Conditions (anything else is left alone): the layer is float32 with no fused activation and
one output z, z is not a graph output, and the activation is the very next op and z's only
reader (so no control-flow marker or other use lies between)."""
from __future__ import annotations

from dataclasses import replace

from ..ir import Graph

LAYERS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")
ACTIVATIONS = ("RELU", "RELU6", "RELU_N1_TO_1")


def _fusable(g: Graph, op, act, readers) -> bool:
    if op.kind not in LAYERS or act.kind not in ACTIVATIONS or op.regions or act.regions:
        return False
    if op.attrs.get("fused_activation_function", "NONE") not in ("NONE", None) or len(op.outputs) != 1:
        return False
    z = op.outputs[0]
    if z in g.outputs or act.inputs != [z] or len(act.outputs) != 1 or readers.get(z) != [act]:
        return False
    if not op.inputs or op.inputs[0] is None:
        return False
    zt, yt = g.t(z), g.t(act.outputs[0])
    return (g.t(op.inputs[0]).dtype == zt.dtype == yt.dtype == "float32"
            and list(zt.shape) == list(yt.shape))


def fuse_float_activation(g: Graph) -> Graph:
    readers = g.readers(regions=True)
    ops, i = [], 0
    while i < len(g.ops):
        op = g.ops[i]
        nxt = g.ops[i + 1] if i + 1 < len(g.ops) else None
        if nxt is not None and _fusable(g, op, nxt, readers):
            attrs = {**op.attrs, "fused_activation_function": nxt.kind}
            ops.append(replace(op, attrs=attrs, outputs=list(nxt.outputs)))
            i += 2
            continue
        ops.append(op)
        i += 1
    # in place, not dataclasses.replace: a graph carries attributes beyond its fields (a torch
    # program's dynamic_dims, say) that a new Graph would drop
    g.ops = ops
    return g
