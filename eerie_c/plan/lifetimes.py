"""First and last use of every activation buffer, in op steps.

Tensors joined by an aliasing op (RESHAPE) or by an in-place op form one storage group, each
member at a fixed byte offset inside it; a group lives from the first definition of any
member to the last use of any member. Graph inputs are live from
step -1 (before the first op); graph outputs live to the end. Variable (state) tensors are
not activations (Graph.activations() leaves them out): they have static storage of their own.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import Graph


def inplace_mode(op) -> str | None:
    """How an op may run over its input 0 (op.attrs["inplace_of_input"], from
    Lowered.inplace): "start" (output 0 begins at the input's first byte, True means the
    same), "end" (output 0 ends at the input's last byte), or None."""
    v = op.attrs.get("inplace_of_input")
    if v == "shift":   # a patch stage (patch/stage.py): output at input + op.attrs["patch"].shift
        return "shift"
    return "end" if v == "end" else ("start" if v else None)


@dataclass
class Buffer:
    key: str                 # the group's representative tensor id, or "scratch:<fn>"
    members: list[str]
    size: int
    start: int
    end: int
    user: tuple[str, int] | None = None   # ("input", k) / ("output", k) when it is a user buffer
    # member -> its byte offset inside the group's storage (0 unless an "end" in-place op
    # put an input at the tail of its larger output)
    member_offset: dict[str, int] = field(default_factory=dict)
    # what the group really occupies: member (or the scratch key) -> (offset in the group,
    # bytes, first step, last step), so that the placer can use bytes a member of a long
    # group does not need yet; members without bytes or steps have none
    rects: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)


def storage_layout(g: Graph, tail: bool | frozenset = True,
                   inputs_in_arena: bool = False) -> dict[str, tuple[str, int]]:
    """tensor id -> (representative id, byte offset inside the group's storage). Groups join
    the two sides of each aliasing op (same bytes), then the input and output of each in-place
    op whose input storage is read by no later op: "start" puts the output at the input's
    offset, "end" puts the input at the output's offset plus the size difference (for every
    "end" op with tail=True, none with False, or the op steps in a set). Offsets are then
    shifted so each group's lowest member starts at 0."""
    parent: dict[str, tuple[str, int]] = {}   # x -> (parent, offset of x minus offset of parent)
    acts = g.activations()
    groups: dict[str, list[str]] = {t: [t] for t in acts}   # root -> its members
    last_read: dict[str, int] = {}
    for step, op in enumerate(g.ops):
        for t in op.inputs:
            if t is not None:
                last_read[t] = step

    def find(x: str) -> tuple[str, int]:
        off = 0
        while x in parent:
            x, d = parent[x][0], parent[x][1] + off
            off = d
        return x, off

    def join(a: str, b: str, delta: int) -> None:
        """Put b at a's offset + delta (both ends' groups move together)."""
        (ra, oa), (rb, ob) = find(a), find(b)
        if ra != rb:
            parent[rb] = (ra, oa + delta - ob)
            groups.setdefault(ra, [ra]).extend(groups.pop(rb, [rb]))

    for op in g.ops:
        if op.attrs.get("alias_of_input"):
            join(op.inputs[0], op.outputs[0], 0)
    for step, op in enumerate(g.ops):
        mode = inplace_mode(op)
        if mode is None or (mode == "end" and not (tail if isinstance(tail, bool) else step in tail)):
            continue
        if inplace_allowed(g, step, lambda t: find(t)[0], mode, groups, last_read, inputs_in_arena):
            a, b = op.inputs[0], op.outputs[0]
            delta = {"start": 0, "end": g.t(a).nbytes - g.t(b).nbytes}.get(mode)
            join(a, b, op.attrs["patch"].shift if delta is None else delta)
    placed = {tid: find(tid) for tid in acts}
    low: dict[str, int] = {}
    for r, off in placed.values():
        low[r] = min(low.get(r, off), off)
    return {tid: (r, off - low[r]) for tid, (r, off) in placed.items()}


def storage_groups(g: Graph, tail: bool | frozenset = True) -> dict[str, str]:
    """tensor id -> representative id of its storage group (storage_layout without offsets)."""
    return {tid: r for tid, (r, _) in storage_layout(g, tail).items()}


def inplace_allowed(g: Graph, step: int, find, mode: str, groups: dict[str, list[str]],
                    last_read: dict[str, int], inputs_in_arena: bool = False) -> bool:
    """The rule for running op `step` in place: input 0 is an arena activation, no graph input
    or output shares its storage or the output's, no later op reads any tensor of the input's
    storage, and the sizes suit the layout: "start" (output 0 at the input's first byte) needs
    the output no larger than the input; "shift" (a patch stage, patch/stage.py: the output at
    the stage's proven offset from the input; a graph input planned in the arena may take
    part); "end" (the input at the tail of output 0)
    needs the output at least as large as the input, larger by a multiple of 16 bytes (so
    every tensor sharing the input's storage keeps the arena's alignment). plan/proof.py
    checks the same rule independently. `groups` (root -> members) and `last_read` (tensor ->
    last step reading it) are what storage_layout keeps, so the graph is not scanned here."""
    op = g.ops[step]
    if not op.inputs or op.inputs[0] is None or not op.outputs:
        return False
    a, b = op.inputs[0], op.outputs[0]
    if g.t(a).is_const or g.t(a).variable or g.t(b).variable:
        return False   # variable (state) tensors live outside the arena
    ra, rb = find(a), find(b)
    if ra == rb:
        return False
    group_a, group_b = groups.get(ra, [ra]), groups.get(rb, [rb])
    users = set(g.inputs) | set(g.outputs)
    if inputs_in_arena:
        # a graph input in the arena is an arena tensor like any other: a patch stage may
        # write its output over it, and a later op over that output's storage (such as a
        # ResNet shortcut after a stage); only input 0 of an op that is no patch stage must
        # not be one (plan/proof.py's rule)
        users = set(g.outputs) | ({a} & set(g.inputs) if mode != "shift" else set())
    if any(t in users for t in group_a + group_b):
        return False
    if mode == "shift":
        if op.attrs["patch"].shift is None or op.attrs["patch"].shift % 16:
            return False
    elif mode == "end":
        grow = g.t(b).nbytes - g.t(a).nbytes
        if grow < 0 or grow % 16:
            return False
    elif g.t(b).nbytes > g.t(a).nbytes:
        return False
    members = set(group_a)
    if any(last_read.get(t, -1) > step for t in members):
        return False
    # the op itself must not read the input's storage through a second operand
    return sum(1 for t in op.inputs if t is not None and t in members) == 1


def buffers(g: Graph, scratch: dict[int, tuple[str, int]] | None = None,
            inputs_in_arena: bool = False, tail: bool | frozenset = True) -> list[Buffer]:
    """`scratch` maps an op step to (name, bytes) of a scratch buffer it needs. With
    inputs_in_arena, graph inputs (other than pass-through inputs that are outputs too) are
    arena buffers live from step -1, not caller buffers. `tail`: as in storage_layout."""
    layout = storage_layout(g, tail, inputs_in_arena)
    rep = {tid: r for tid, (r, _) in layout.items()}
    last = len(g.ops)
    groups: dict[str, Buffer] = {}
    for tid, (r, off) in layout.items():
        t = g.t(tid)
        b = groups.setdefault(r, Buffer(r, [], 0, last + 1, -2))
        b.members.append(tid)
        b.member_offset[tid] = off
        b.size = max(b.size, off + t.nbytes)
    first: dict[str, int] = {tid: last + 1 for tid in rep}
    final: dict[str, int] = {tid: -2 for tid in rep}
    for tid in g.inputs:
        # Live from before the first op even if no op reads it: with inputs_in_arena the caller
        # writes every input before NAME_invoke, so an unread input must not share bytes
        # with another input (an end of -2 made it overlap nothing, found by the property test).
        first[tid], final[tid] = -1, max(final[tid], -1)
    for step, op in enumerate(g.ops):
        for tid in op.outputs:
            if tid in rep:   # else a variable (state) tensor: static storage, not the arena
                first[tid], final[tid] = min(first[tid], step), max(final[tid], step)
        for tid in op.inputs:
            if tid is not None and tid in rep:
                final[tid] = max(final[tid], step)
    for tid in g.outputs:
        final[tid] = last
    for tid, r in rep.items():
        b = groups[r]
        b.start, b.end = min(b.start, first[tid]), max(b.end, final[tid])
        if first[tid] <= final[tid] and g.t(tid).nbytes:
            b.rects[tid] = (b.member_offset[tid], g.t(tid).nbytes, first[tid], final[tid])
    for k, tid in enumerate(g.inputs):
        if not inputs_in_arena or tid in g.outputs:
            groups[rep[tid]].user = ("input", k)
    for k, tid in enumerate(g.outputs):
        groups[rep[tid]].user = ("output", k)
    out = sorted(groups.values(), key=lambda b: (b.start, b.key))
    for step, (name, nbytes) in sorted((scratch or {}).items()):
        key = f"scratch:{name}"
        out.append(Buffer(key, [], nbytes, step, step, rects={key: (0, nbytes, step, step)}))
    return out
