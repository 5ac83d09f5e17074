"""RESHAPE (and SQUEEZE / EXPAND_DIMS) change only the shape: mark them so that the output
shares the input's bytes and no code runs. A copy is kept when aliasing would put two user
buffers in one storage group: a graph input reshaped straight into a graph output, but also
through a chain of reshapes (input -> RESHAPE -> t -> RESHAPE -> output), or two outputs
that are reshapes of one tensor. Each user buffer must stay its own storage."""
from ..ir import SHAPE_ONLY, Graph


def alias_reshapes(g: Graph) -> Graph:
    user = set(g.inputs) | set(g.outputs)
    parent: dict[str, str] = {}
    users: dict[str, set[str]] = {}     # group root -> user tensors in the group

    def find(x: str) -> str:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    def users_of(root: str) -> set[str]:
        return users.get(root, {root} & user)

    for op in g.ops:
        if op.kind not in SHAPE_ONLY:
            continue
        src, dst = g.t(op.inputs[0]), g.t(op.outputs[0])
        if src.nbytes != dst.nbytes or src.dtype != dst.dtype:
            continue
        a, b = find(src.id), find(dst.id)
        joined = users_of(a) | users_of(b)
        if len(joined) > 1:
            continue
        op.attrs["alias_of_input"] = True
        if a != b:
            parent[b] = a
            users[a] = joined
    return g
