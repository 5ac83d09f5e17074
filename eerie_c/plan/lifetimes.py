"""First and last use of every activation buffer, in op steps.

Tensors joined by an aliasing op (RESHAPE) form one storage group; a group lives from the
first definition of any member to the last use of any member. Graph inputs are live from
step -1 (before the first op); graph outputs live to the end. Variable (state) tensors are
not activations (Graph.activations() leaves them out): they have static storage of their own.
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
    """tensor id -> representative id, joining the two sides of each aliasing op, then the
    input and output of each in-place op whose input storage is read by no later op."""
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
    for step, op in enumerate(g.ops):
        if op.attrs.get("inplace_of_input") and inplace_allowed(g, step, find):
            parent[find(op.outputs[0])] = find(op.inputs[0])
    return {tid: find(tid) for tid in g.activations()}


def inplace_allowed(g: Graph, step: int, find) -> bool:
    """The rule for running op `step` in place (its output 0 starting at the first byte of its
    input 0's storage): input 0 is an arena activation, no graph input or output shares its
    storage or the output's, no later op reads any tensor of the input's storage, and the
    output is no larger than that storage. plan/proof.py checks the same rule independently."""
    op = g.ops[step]
    if not op.inputs or op.inputs[0] is None or not op.outputs:
        return False
    a, b = op.inputs[0], op.outputs[0]
    if g.t(a).is_const or g.t(a).variable or g.t(b).variable:
        return False   # variable (state) tensors live outside the arena
    ra, rb = find(a), find(b)
    if ra == rb:
        return False
    acts = g.activations()
    group_a = [t for t in acts if find(t) == ra]
    group_b = [t for t in acts if find(t) == rb]
    users = set(g.inputs) | set(g.outputs)
    if any(t in users for t in group_a + group_b):
        return False
    if g.t(b).nbytes > max(g.t(t).nbytes for t in group_a):
        return False
    members = set(group_a)
    for later in g.ops[step + 1:]:
        if any(t in members for t in later.inputs if t is not None):
            return False
    # the op itself must not read the input's storage through a second operand
    return sum(1 for t in op.inputs if t is not None and t in members) == 1


def buffers(g: Graph, scratch: dict[int, tuple[str, int]] | None = None,
            inputs_in_arena: bool = False) -> list[Buffer]:
    """`scratch` maps an op step to (name, bytes) of a scratch buffer it needs. With
    inputs_in_arena, graph inputs (other than pass-through inputs that are outputs too) are
    arena buffers live from step -1, not caller buffers."""
    rep = storage_groups(g)
    last = len(g.ops)
    groups: dict[str, Buffer] = {}
    for tid, r in rep.items():
        t = g.t(tid)
        b = groups.setdefault(r, Buffer(r, [], 0, last + 1, -2))
        b.members.append(tid)
        b.size = max(b.size, t.nbytes)
    for tid in g.inputs:
        # Live from before the first op even if no op reads it: with inputs_in_arena the caller
        # writes every input before NAME_invoke, so an unread input must not share bytes
        # with another input (an end of -2 made it overlap nothing, found by the property test).
        b = groups[rep[tid]]
        b.start, b.end = -1, max(b.end, -1)
    for step, op in enumerate(g.ops):
        for tid in op.outputs:
            if tid not in rep:
                continue   # a variable (state) tensor: static storage, not the arena
            b = groups[rep[tid]]
            b.start, b.end = min(b.start, step), max(b.end, step)
        for tid in op.inputs:
            if tid is not None and tid in rep:
                b = groups[rep[tid]]
                b.end = max(b.end, step)
    for k, tid in enumerate(g.inputs):
        if not inputs_in_arena or tid in g.outputs:
            groups[rep[tid]].user = ("input", k)
    for k, tid in enumerate(g.outputs):
        groups[rep[tid]].user = ("output", k)
        groups[rep[tid]].end = last
    out = sorted(groups.values(), key=lambda b: (b.start, b.key))
    for step, (name, nbytes) in sorted((scratch or {}).items()):
        out.append(Buffer(f"scratch:{name}", [], nbytes, step, step))
    return out
