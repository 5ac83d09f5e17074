"""Split a grouped CONV_2D into one CONV_2D per group (Keras Conv2D(groups=G) in a .tflite):

    y = CONV_2D(x[.., C], w[O, kh, kw, C / G], b[O])
 ->
    x_0 .. x_G-1 = SPLIT(axis 3, x)                  each [.., C / G]
    y_g = CONV_2D(x_g, w[g*O/G:(g+1)*O/G], b[same])  each [.., O / G], y's quantization
    y = CONCATENATION(y_0 .. y_G-1, axis 3)

This is TFLite's definition of the grouped convolution (filter input channels = C / G, output
channel o reads the input channels of its group o // (O / G)), as TFLM's reference kernels
compute it. Every group's CONV_2D is an ordinary one, so each target's kernel (the DSP and
Helium fast paths included) applies unchanged; int8 groups keep their slice of the per-channel
weight scales, requantize to the output's scale and zero point (with the fused activation),
and CONCATENATION of equal quantization only copies bytes: the result is the reference's, bit
for bit. The model's own weight layout stays the same per group ([O/G, kh, kw, C/G] rows).
"""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Op, Quant, Tensor


def _group_count(g: Graph, op) -> int:
    if op.kind != "CONV_2D" or len(op.inputs) < 2 or op.inputs[1] is None:
        return 1
    x, w = g.t(op.inputs[0]), g.t(op.inputs[1])
    b = op.inputs[2] if len(op.inputs) > 2 else None
    if len(x.shape) != 4 or len(w.shape) != 4 or not w.is_const or w.shape[3] < 1 \
            or (b is not None and not g.t(b).is_const):
        return 1   # (the kernel refuses computed weights or bias with its own message)
    in_c, w_in_c, out_c = x.shape[3], w.shape[3], w.shape[0]
    if in_c == w_in_c or in_c % w_in_c:
        return 1   # plain, or no whole number of groups (the kernel's check says so)
    groups = in_c // w_in_c
    return groups if out_c % groups == 0 else 1


def _slice_quant(q: Quant | None, lo: int, hi: int) -> Quant | None:
    if q is None or not q.per_channel:
        return q
    return Quant(scale=np.asarray(q.scale)[lo:hi].copy(),
                 zero_point=np.asarray(q.zero_point)[lo:hi].copy(), axis=q.axis)


def _fresh(g: Graph, base: str) -> str:
    tid, k = base, 1
    while tid in g.tensors:
        tid, k = f"{base}_{k}", k + 1
    return tid


def _split(g: Graph, op, groups: int) -> list[Op]:
    x, w, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
    b = g.t(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] is not None else None
    cg, og = x.shape[3] // groups, w.shape[0] // groups
    axis = _fresh(g, f"{op.outputs[0]}_group_axis")
    g.tensors[axis] = Tensor(axis, (), "int32", f"{y.label} group axis", data=np.array(3, np.int32))
    parts_in, parts_out, convs = [], [], []
    for k in range(groups):
        xi = _fresh(g, f"{op.outputs[0]}_group{k}_in")
        g.tensors[xi] = Tensor(xi, x.shape[:3] + (cg,), x.dtype, f"{x.label} group {k}", quant=x.quant)
        lo, hi = k * og, (k + 1) * og
        wi = _fresh(g, f"{op.outputs[0]}_group{k}_w")
        g.tensors[wi] = Tensor(wi, (og,) + tuple(w.shape[1:]), w.dtype, f"{w.label} group {k}",
                               quant=_slice_quant(w.quant, lo, hi), data=w.data[lo:hi].copy(),
                               int4=w.int4)
        bi = None
        if b is not None:
            bi = _fresh(g, f"{op.outputs[0]}_group{k}_b")
            g.tensors[bi] = Tensor(bi, (og,), b.dtype, f"{b.label} group {k}",
                                   quant=_slice_quant(b.quant, lo, hi),
                                   data=np.asarray(b.data).reshape(-1)[lo:hi].copy())
        yi = _fresh(g, f"{op.outputs[0]}_group{k}_out")
        g.tensors[yi] = Tensor(yi, y.shape[:3] + (og,), y.dtype, f"{y.label} group {k}", quant=y.quant)
        parts_in.append(xi)
        parts_out.append(yi)
        convs.append(Op("CONV_2D", [xi, wi] + ([bi] if len(op.inputs) > 2 else []), [yi],
                        dict(op.attrs), f"{op.name}_group{k}", op.index, op.subgraph))
    split = Op("SPLIT", [axis, op.inputs[0]], parts_in, {"num_splits": groups},
               f"{op.name}_groups", op.index, op.subgraph)
    concat = Op("CONCATENATION", parts_out, list(op.outputs),
                {"axis": 3, "fused_activation_function": "NONE"}, op.name, op.index, op.subgraph)
    return [split] + convs + [concat]


def split_grouped_conv(g: Graph) -> Graph:
    ops = []
    for op in g.ops:
        groups = _group_count(g, op)
        ops.extend(_split(g, op, groups) if groups > 1 else [op])
    g.ops = ops   # in place: a graph carries attributes beyond its fields
    return g
