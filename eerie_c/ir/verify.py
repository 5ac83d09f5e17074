"""IR verifier, run after every stage: ids resolve, no use before definition, one writer
per tensor (variable tensors excepted: state is always defined and may be rewritten),
constants are never written, data matches declared shape and dtype."""
from __future__ import annotations

import numpy as np

from ..errors import CompilerBug
from .graph import DTYPE_NP, Graph


def verify_graph(g: Graph, stage: str) -> Graph:
    def bug(msg: str):
        raise CompilerBug(f"IR verifier after {stage}: {msg}")

    for tid, t in g.tensors.items():
        if t.id != tid:
            bug(f"tensor key {tid} holds tensor {t.id}")
        if t.dtype not in DTYPE_NP:
            bug(f"tensor {tid} has unknown dtype {t.dtype}")
        if any(d < 0 for d in t.shape):
            bug(f"tensor {tid} has negative dimension {t.shape}")
        if t.data is not None:
            if t.data.dtype != np.dtype(DTYPE_NP[t.dtype]):
                bug(f"constant {tid} data is {t.data.dtype}, declared {t.dtype}")
            if tuple(t.data.shape) != tuple(t.shape):
                bug(f"constant {tid} data shape {t.data.shape}, declared {t.shape}")
        if t.variable:
            if t.data is not None:
                bug(f"variable tensor {tid} also has constant data")
            if tid in g.inputs or tid in g.outputs:
                bug(f"variable tensor {tid} is a graph input or output")
            if t.init is not None and (t.init.dtype != np.dtype(DTYPE_NP[t.dtype])
                                       or tuple(t.init.shape) != tuple(t.shape)):
                bug(f"variable {tid} initial contents are {t.init.dtype} {t.init.shape}, "
                    f"declared {t.dtype} {t.shape}")
    # Variable (state) tensors hold their previous contents at every point: always defined.
    defined = set(g.inputs) | {tid for tid, t in g.tensors.items() if t.is_const or t.variable}
    for tid in g.inputs:
        if tid not in g.tensors:
            bug(f"graph input {tid} is not a tensor")
    for op in g.ops:
        where = f"op {op.index} ({op.kind} {op.name})"
        for tid in op.inputs:
            if tid is None:
                continue
            if tid not in g.tensors:
                bug(f"{where} reads unknown tensor {tid}")
            if tid not in defined:
                bug(f"{where} reads {tid} before it is defined")
        for tid in op.outputs:
            if tid not in g.tensors:
                bug(f"{where} writes unknown tensor {tid}")
            if g.tensors[tid].variable:
                continue   # state is updated in place by any number of ops
            if op.attrs.get("rewrites"):
                # A control-flow copy (else branch, loop-carried value) writes a tensor that
                # an earlier copy defined.
                if tid not in defined or g.tensors[tid].is_const:
                    bug(f"{where} rewrites {tid}, which is not an earlier defined activation")
                continue
            if tid in defined:
                bug(f"{where} writes {tid}, which is already defined or constant")
            defined.add(tid)
    for tid in g.outputs:
        # A dangling id is a different bug from an output no op writes: say which.
        if tid not in g.tensors:
            bug(f"graph output {tid} is not a tensor")
        if tid not in defined:
            bug(f"graph output {tid} is never produced")
    return g
