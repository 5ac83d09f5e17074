"""Fold shape-only ops whose input is constant: the output becomes a constant, the op goes."""
from ..ir import SHAPE_ONLY, Graph


def fold_constant_reshapes(g: Graph) -> Graph:
    keep = []
    for op in g.ops:
        src = g.t(op.inputs[0]) if op.inputs and op.inputs[0] else None
        if op.kind in SHAPE_ONLY and src is not None and src.is_const and op.outputs[0] not in g.outputs:
            out = g.t(op.outputs[0])
            out.data = src.data.reshape(out.shape).copy()
            continue
        keep.append(op)
    g.ops = keep
    return g
