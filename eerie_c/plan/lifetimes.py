"""First and last use of every activation buffer, in op steps.

Tensors joined by an aliasing op (RESHAPE) form one storage group; a group lives from the
first definition of any member to the last use of any member. Graph inputs are live from
step -1 (before the first op); graph outputs live to the end.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import Graph


@dataclass
class Buffer:
    key: str                 # the group's representative tensor id, or "scratch:<fn>"
    members: list[str]
    size: int
    start: int
    end: int
    user: tuple[str, int] | None = None   # ("input", k) / ("output", k) when it is a user buffer


def storage_groups(g: Graph) -> dict[str, str]:
    """tensor id -> representative id, joining the two sides of each aliasing op."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    for op in g.ops:
        if op.attrs.get("alias_of_input"):
            a, b = find(op.inputs[0]), find(op.outputs[0])
            if a != b:
                parent[b] = a
    return {tid: find(tid) for tid in g.activations()}


def buffers(g: Graph, scratch: dict[int, tuple[str, int]] | None = None) -> list[Buffer]:
    """`scratch` maps an op step to (name, bytes) of a scratch buffer it needs."""
    rep = storage_groups(g)
    last = len(g.ops)
    groups: dict[str, Buffer] = {}
    for tid, r in rep.items():
        t = g.t(tid)
        b = groups.setdefault(r, Buffer(r, [], 0, last + 1, -2))
        b.members.append(tid)
        b.size = max(b.size, t.nbytes)
    for tid in g.inputs:
        groups[rep[tid]].start = -1
    for step, op in enumerate(g.ops):
        for tid in op.outputs:
            b = groups[rep[tid]]
            b.start, b.end = min(b.start, step), max(b.end, step)
        for tid in op.inputs:
            if tid is not None and tid in rep:
                b = groups[rep[tid]]
                b.end = max(b.end, step)
    for k, tid in enumerate(g.inputs):
        groups[rep[tid]].user = ("input", k)
    for k, tid in enumerate(g.outputs):
        groups[rep[tid]].user = ("output", k)
        groups[rep[tid]].end = last
    out = sorted(groups.values(), key=lambda b: (b.start, b.key))
    for step, (name, nbytes) in sorted((scratch or {}).items()):
        out.append(Buffer(f"scratch:{name}", [], nbytes, step, step))
    return out
