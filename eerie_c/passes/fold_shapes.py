"""Shape arithmetic on static shapes is done here, at compile time: SHAPE becomes a constant
(every shape is static), and so does every small integer op whose inputs are all constants
(BROADCAST_ARGS, and the STRIDED_SLICE / SLICE / GATHER / PACK / CONCATENATION / CAST / ADD /
SUB / MUL / FLOOR_DIV chains TensorFlow builds from `tf.shape(x)`), so that a RESHAPE or
BROADCAST_TO fed by them costs nothing at run time. An op whose output is a model output
stays (its kernel writes the constant). Only int32 / int64 tensors are folded; each folding
rule is TFLite's semantics for the cases it handles, and anything else is left to its kernel.
"""
from __future__ import annotations

import numpy as np

from ..ir import DTYPE_NP, Graph

INT = ("int32", "int64")


def _strided_slice(x, begin, end, strides, a):
    """TFLite STRIDED_SLICE on a 1-D constant (the `tf.shape(x)[i]` pattern); None otherwise."""
    if x.ndim != 1 or len(begin) != 1 or a.get("ellipsis_mask", 0) or a.get("new_axis_mask", 0) \
            or a.get("offset", False):
        return None
    b, e, s = int(begin[0]), int(end[0]), int(strides[0])
    if s == 0:
        return None
    if a.get("shrink_axis_mask", 0) & 1:
        i = b + len(x) if b < 0 else b
        return x[i] if 0 <= i < len(x) else None
    start = None if a.get("begin_mask", 0) & 1 else b
    stop = None if a.get("end_mask", 0) & 1 else e
    return x[slice(start, stop, s)]


def _broadcast_args(a, b):
    n = max(len(a), len(b))
    a = [1] * (n - len(a)) + [int(v) for v in a]
    b = [1] * (n - len(b)) + [int(v) for v in b]
    if any(p != q and 1 not in (p, q) for p, q in zip(a, b)):
        return None
    return np.array([q if p == 1 else p for p, q in zip(a, b)])


def _evaluate(op, g, vals):
    """The op's single output from its constant inputs, or None when not folded here."""
    a = op.attrs
    act = a.get("fused_activation_function", "NONE") or "NONE"
    kind = op.kind
    if kind == "BROADCAST_ARGS":
        return _broadcast_args(vals[0], vals[1])
    if kind == "STRIDED_SLICE":
        return _strided_slice(vals[0], vals[1], vals[2], vals[3], a)
    if kind == "SLICE":
        if vals[0].ndim != 1:
            return None
        b, size = int(vals[1][0]), int(vals[2][0])
        return vals[0][b:] if size == -1 else vals[0][b:b + size]
    if kind == "GATHER" and vals[0].ndim == 1 and int(a.get("axis", 0)) in (0, -1):
        idx = vals[1].astype(np.int64)
        return vals[0][idx] if np.all((idx >= 0) & (idx < len(vals[0]))) else None
    if kind == "PACK":
        return np.stack(vals, axis=int(a.get("axis", 0)))
    if kind == "CONCATENATION" and act == "NONE":
        return np.concatenate(vals, axis=int(a.get("axis", 0)))
    if kind == "CAST":
        return vals[0]
    if kind in ("ADD", "SUB", "MUL") and act == "NONE":
        x, y = (v.astype(np.int64) for v in vals)
        return {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply}[kind](x, y)
    if kind == "FLOOR_DIV" and np.all(vals[1] != 0):
        return np.floor_divide(vals[0].astype(np.int64), vals[1].astype(np.int64))
    return None


def fold_shapes(g: Graph) -> Graph:
    keep = []
    for op in g.ops:
        outs = [g.t(t) for t in op.outputs]
        if len(outs) != 1 or op.outputs[0] in g.outputs or outs[0].dtype not in INT:
            keep.append(op)
            continue
        y = outs[0]
        value = None
        if op.kind == "SHAPE" and op.inputs[0] is not None:
            value = np.array(g.t(op.inputs[0]).shape, np.int64)
        else:
            ins = [g.t(t) for t in op.inputs if t is not None]
            if ins and all(t.is_const and t.dtype in INT for t in ins):
                value = _evaluate(op, g, [np.asarray(t.data) for t in ins])
        if value is None or np.size(value) != y.size:
            keep.append(op)
            continue
        value = np.asarray(value)
        info = np.iinfo(DTYPE_NP[y.dtype])
        if value.size and (value.min() < info.min or value.max() > info.max):
            keep.append(op)     # would wrap: the kernel computes it as TFLM does
            continue
        y.data = value.astype(DTYPE_NP[y.dtype]).reshape(y.shape)
    g.ops = keep
    return g
