"""RESHAPE (and SQUEEZE / EXPAND_DIMS) change only the shape: mark them so that the output
shares the input's bytes and no code runs. A copy is kept only when both sides are user
buffers (a graph input reshaped straight into a graph output)."""
from ..ir import Graph

SHAPE_ONLY = ("RESHAPE", "SQUEEZE", "EXPAND_DIMS")


def alias_reshapes(g: Graph) -> Graph:
    user = set(g.inputs) | set(g.outputs)
    for op in g.ops:
        if op.kind not in SHAPE_ONLY:
            continue
        src, dst = g.t(op.inputs[0]), g.t(op.outputs[0])
        if src.nbytes != dst.nbytes or src.dtype != dst.dtype:
            continue
        if src.id in user and dst.id in user:
            continue
        op.attrs["alias_of_input"] = True
    return g
