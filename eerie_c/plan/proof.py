"""Independent check of a memory plan: re-derives lifetimes straight from the IR (not from
the planner's buffers) and proves that simultaneously live arena tensors never share a byte,
that every offset is aligned, and that the arena is exactly as large as reported.
Variable (state) tensors must each have their own static storage, outside the arena.

A patch stage (patch/stage.py) may also run with its output over its input ("shift", any
offset): patch/proof.py prove_shift then checks, tile by tile, that no output byte is written over
an input byte a later tile reads; the other conditions below are the same.

One exception to "never share a byte", the in-place rule: the output 0 of an op whose kernel
declared it safe (op.attrs["inplace_of_input"], from Lowered.inplace) may overlap its input 0
(and tensors aliased with either through RESHAPE) if and only if
  * in the layout the kernel declared: "start", the output starts at exactly the input's
    offset and is no larger than the input; "end", the output ends at exactly the input's
    last byte and is no smaller than the input,
  * the input's live range, joined over its aliases, ends at that op (no later op reads it),
  * the op reads the input's storage through that one operand only,
  * neither is a graph input or output (those live in caller buffers anyway).
The kernel guarantees that it reads every input byte before writing an output byte over it;
the rule guarantees no one else needs the input's bytes afterwards.

What the proof would otherwise take from the planner (which tensors need storage, which ops
are views) it re-derives from the IR first (proof_inputs.py)."""
from __future__ import annotations

from ..errors import CompilerBug
from ..ir import DTYPE_NP, Graph
from .arena import Plan
from ..patch.proof import prove_shift
from .proof_inputs import alias_links, prove_placed, prove_user_placements

import numpy as np


def _live_ranges(g: Graph) -> dict[str, tuple[int, int]]:
    # Aliased tensors share storage, so a tensor's bytes stay live for as long as any tensor
    # aliased with it is: join the ranges over each aliasing chain.
    first, last = {}, {}
    for tid in g.inputs:
        first[tid] = -1
        last[tid] = -1
    for step, op in enumerate(g.ops):
        for tid in op.inputs:
            if tid is not None and not g.t(tid).is_const and not g.t(tid).variable:
                last[tid] = step
                first.setdefault(tid, step)
        for tid in op.outputs:
            if g.t(tid).variable:
                continue
            first.setdefault(tid, step)
            last[tid] = max(last.get(tid, step), step)
    for tid in g.outputs:
        last[tid] = len(g.ops)
    links = [(op.inputs[0], op.outputs[0]) for op in g.ops if op.attrs.get("alias_of_input")]
    changed = True
    while changed:
        changed = False
        for a, b in links:
            lo, hi = min(first[a], first[b]), max(last[a], last[b])
            for t in (a, b):
                if (first[t], last[t]) != (lo, hi):
                    first[t], last[t], changed = lo, hi, True
    return {t: (first[t], last[t]) for t in first}


def _prove_user_buffers(g: Graph, plan: Plan) -> None:
    """Each graph input / output lives in its own caller-owned buffer, never in the arena
    and never in another user buffer (aliasing must not merge two of them); except that a
    plan made with inputs_in_arena keeps the inputs in the arena."""
    for base, tids in (("input", g.inputs), ("output", g.outputs)):
        for k, tid in enumerate(tids):
            if tid in g.inputs and tid in g.outputs:
                continue   # a pass-through tensor is both; either buffer is right
            p = plan.tensors.get(tid)
            if base == "input" and getattr(plan, "inputs_in_arena", False):
                # inputs planned in the arena: live from before the first op, overlap-checked
                # below like every other arena tensor
                if p is None or p.base != "arena":
                    raise CompilerBug(f"arena proof: graph input {tid} should be in the arena, "
                                      f"not in {'nowhere' if p is None else p.base}")
                continue
            if p is None or (p.base, p.index) != (base, k):
                got = "nowhere" if p is None else f"{p.base} {p.index}"
                raise CompilerBug(f"arena proof: graph {base} {tid} is placed in {got}, not in "
                                  f"its own {base} buffer {k}")


def _prove_state(g: Graph, plan: Plan) -> None:
    """Every variable (state) tensor an op uses has its own static storage of its full size,
    one per tensor, and is never placed in the arena; nothing else is placed as state."""
    used = [t for t in dict.fromkeys(t for op in g.ops for t in list(op.inputs) + list(op.outputs))
            if t is not None and g.t(t).variable]
    if set(plan.state) != set(used):
        raise CompilerBug(f"arena proof: state storage for {sorted(plan.state)}, but the ops use "
                          f"variable tensors {sorted(used)}")
    seen = set()
    for tid, p in plan.state.items():
        if p.base != "state" or plan.tensors.get(tid) != p or p.index in seen:
            raise CompilerBug(f"arena proof: variable tensor {tid} is not in its own state storage")
        if p.size != g.t(tid).nbytes:
            raise CompilerBug(f"arena proof: state storage of {tid} holds {p.size} B, the tensor "
                              f"needs {g.t(tid).nbytes} B")
        seen.add(p.index)
    for tid, p in plan.tensors.items():
        if p.base == "state" and tid not in plan.state:
            raise CompilerBug(f"arena proof: {tid} is placed in state storage but is no variable")
    if plan.state_bytes != sum(p.size for p in plan.state.values()):
        raise CompilerBug(f"arena proof: reported state {plan.state_bytes} B, variables need "
                          f"{sum(p.size for p in plan.state.values())} B")


def _inplace_pairs(g: Graph, plan: Plan, ranges, root) -> set[frozenset]:
    """{root(input), root(output)} of every in-place op that satisfies the rule above."""
    users = set(g.inputs) | set(g.outputs)
    pairs = set()
    for step, op in enumerate(g.ops):
        mode = op.attrs.get("inplace_of_input")
        if not mode or not op.inputs or op.inputs[0] is None:
            continue
        a, b = op.inputs[0], op.outputs[0]
        pa, pb = plan.tensors.get(a), plan.tensors.get(b)
        if pa is None or pb is None or pa.base != "arena" or pb.base != "arena":
            continue
        arena_input = mode == "shift" and a in g.inputs and a not in g.outputs   # placed in the arena
        if (a in users and not arena_input) or b in users or root(a) == root(b):
            continue
        na, nb = g.t(a).nbytes, g.t(b).nbytes
        if mode == "shift":
            # a patch stage's output over its input: byte by byte, no tile writes over an
            # input byte a later tile reads (patch/proof.py prove_shift raises if one does)
            if op.kind != "PATCH_STAGE":
                continue
            prove_shift(g, op, pa.offset, pb.offset)
        elif mode == "end":
            if pb.offset + nb != pa.offset + na or nb < na:
                continue
        elif pa.offset != pb.offset or nb > na:
            continue
        if ranges[a][1] != step:
            continue
        if sum(1 for t in op.inputs if t is not None and t in ranges and root(t) == root(a)) != 1:
            continue
        pairs.add(frozenset((root(a), root(b))))
    return pairs


def prove_plan(g: Graph, plan: Plan, scratch_steps: dict[str, int] | None = None) -> dict:
    # Coverage and views first: the overlap check below iterates plan.tensors, so a tensor
    # missing from it, or two storages merged by a bogus alias, would otherwise go unchecked.
    prove_placed(g, plan)
    alias = {b: a for a, b in alias_links(g, plan)}

    def root(t):
        while t in alias:
            t = alias[t]
        return t

    _prove_user_buffers(g, plan)
    prove_user_placements(g, plan, root)
    _prove_state(g, plan)
    ranges = _live_ranges(g)
    items = []   # (name, start, end, offset, size, align)
    for tid, p in plan.tensors.items():
        if p.base != "arena":
            continue
        t = g.t(tid)
        align = np.dtype(DTYPE_NP[t.dtype]).itemsize
        items.append((tid, *ranges[tid], p.offset, t.nbytes, align))
    for name, p in plan.scratch.items():
        step = (scratch_steps or {}).get(name)
        if step is None:
            raise CompilerBug(f"arena proof: scratch buffer {name} has no owning op")
        items.append((f"scratch:{name}", step, step, p.offset, p.size, 8))
    allowed = _inplace_pairs(g, plan, ranges, root)
    for name, s, e, off, size, align in items:
        if off % align:
            raise CompilerBug(f"arena proof: {name} at offset {off} is not {align}-byte aligned")
        if off < 0 or off + size > plan.arena_bytes:
            raise CompilerBug(f"arena proof: {name} [{off}, {off + size}) lies outside the "
                              f"{plan.arena_bytes}-byte arena")
    for i in range(len(items)):
        a = items[i]
        for j in range(i + 1, len(items)):
            b = items[j]
            if root(a[0]) == root(b[0]):
                continue   # the same storage seen through an aliasing op
            if frozenset((root(a[0]), root(b[0]))) in allowed:
                continue   # an in-place op's input and output (rule checked above)
            if not (a[4] and b[4]):
                continue   # a zero-byte tensor has no bytes to share (its offset may fall inside another)
            if a[1] <= b[2] and b[1] <= a[2] and a[3] < b[3] + b[4] and b[3] < a[3] + a[4]:
                raise CompilerBug(f"arena proof: {a[0]} and {b[0]} are live together and overlap "
                                  f"in the arena ([{a[3]}, {a[3] + a[4]}) and [{b[3]}, {b[3] + b[4]}))")
    used = max((off + size for _, _, _, off, size, _ in items), default=0)
    expected = (used + plan.align - 1) // plan.align * plan.align
    if plan.arena_bytes != expected:
        raise CompilerBug(f"arena proof: reported arena {plan.arena_bytes} B, tensors need {expected} B")
    return {"check": "arena_plan", "ok": True, "buffers": len(items), "arena_bytes": plan.arena_bytes,
            "state_bytes": plan.state_bytes}
