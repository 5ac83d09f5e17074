"""Arena offset assignment.

Every activation that is not a user buffer gets an offset in one static arena. Buffers
whose lifetimes overlap must not overlap in bytes; others may share. A storage group (tensors
joined by aliasing or in-place ops) is placed as one piece, but only its members' own
rectangles (bytes x steps) must stay clear of others. Placement is greedy first fit (TFLM's
greedy planner idea), tried under a few orderings; the smallest arena wins.
Ties and orderings are fully deterministic.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import Graph
from .lifetimes import Buffer, buffers, inplace_mode

ALIGN = 16


@dataclass
class Placement:
    base: str          # "arena", "input" or "output"
    index: int         # user buffer index for input/output, 0 for the arena
    offset: int        # byte offset inside the arena (0 for user buffers)
    size: int


@dataclass
class Plan:
    arena_bytes: int
    tensors: dict[str, Placement]
    scratch: dict[str, Placement]
    buffers: list[Buffer] = field(default_factory=list)
    align: int = ALIGN
    # Variable (state) tensors: own static storage (also listed in `tensors` with base
    # "state", index k = their storage NAME_stateK), never in the arena.
    state: dict[str, Placement] = field(default_factory=dict)
    state_bytes: int = 0
    # graph inputs planned in the arena (NAME_inputK_buffer()) instead of caller buffers
    inputs_in_arena: bool = False
    # the op steps whose "end" in-place layout was used (lifetimes.storage_layout's `tail`)
    tail_inplace: frozenset = frozenset()


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def _place(bufs: list[Buffer], align: int) -> dict[str, int]:
    """First fit, one buffer at a time in the given order: the lowest aligned offset at which
    none of the buffer's member rectangles (bytes x steps) overlaps a placed one. Trying 0
    and every offset that puts some member just above a placed rectangle live at the same
    time finds it (the highest of those is always free)."""
    placed: list[tuple[int, int, int, int]] = []   # (lo, hi, first step, last step)
    offsets = {}
    for b in bufs:
        rects = list(b.rects.values())
        if not rects:
            offsets[b.key] = 0
            continue
        first, last = min(r[2] for r in rects), max(r[3] for r in rects)
        near = [p for p in placed if p[2] <= last and first <= p[3]]
        if len(rects) > 1:
            near = [p for p in near if any(p[2] <= e and s <= p[3] for _, _, s, e in rects)]
        cands = sorted({0} | {_align(hi - off, align) for off, _, s, e in rects
                              for lo, hi, ps, pe in near if ps <= e and s <= pe and hi > off})
        for offset in cands:
            if not any(ps <= e and s <= pe and offset + off < hi and lo < offset + off + size
                       for off, size, s, e in rects for lo, hi, ps, pe in near):
                break
        offsets[b.key] = offset
        placed += [(offset + off, offset + off + size, s, e) for off, size, s, e in rects]
    return offsets


def live_bytes(bufs: list[Buffer], step: int) -> int:
    """Bytes of the arena buffers live at `step` (a group's live members counted once where
    they overlap): no placement of these buffers makes an arena smaller."""
    total = 0
    for b in bufs:
        if b.user is not None:
            continue
        spans = sorted((off, off + size) for off, size, s, e in b.rects.values() if s <= step <= e)
        end = None
        for lo, hi in spans:
            start = lo if end is None else max(lo, end)
            total += max(hi - start, 0)
            end = hi if end is None else max(end, hi)
    return total


# At most this many extra plans when choosing which "end" in-place layouts to use, and fewer
# for big graphs: a plan costs about (buffers)^2 steps of the placer, and the trials may
# spend PLACEMENT_WORK of them (a count, not a time: the output must not depend on the machine).
MAX_LAYOUT_TRIALS = 32
PLACEMENT_WORK = 4_000_000


def scratch_by_step(g: Graph, lowered) -> dict[int, tuple[str, int]]:
    """The kernels' scratch as plan_memory takes it: op step -> (kernel function, bytes), for
    the lowered ops (kernels' Lowered) that ask for any."""
    step_of = {id(op): k for k, op in enumerate(g.ops)}
    return {step_of[id(low.op)]: (low.fn_name, low.scratch_bytes) for low in lowered if low.scratch_bytes}


def plan_memory(g: Graph, scratch: dict[int, tuple[str, int]] | None = None, align: int = ALIGN,
                inputs_in_arena: bool = False, tail: frozenset | None = None) -> Plan:
    """Choose which "end" in-place layouts to use, then plan. Joining an input into the tail of
    a larger output saves the input's bytes at that op, but the joined group is one rectangle
    over both lifetimes, which can cost more elsewhere (vww: joining a stride-2 depthwise's
    output into the next 1x1 conv's keeps that conv's whole output reserved a step early). So:
    plan with none and with all of them, then toggle them one at a time, keeping a change
    only when it makes the arena smaller (a tie keeps fewer joins). `tail`: use exactly
    these op steps' "end" layouts instead (for tests and comparisons)."""
    if tail is not None:
        return _plan(g, scratch, align, inputs_in_arena, frozenset(tail))
    ends = [s for s, op in enumerate(g.ops) if inplace_mode(op) == "end"]
    best = _plan(g, scratch, align, inputs_in_arena, frozenset())
    trials = [frozenset(ends)] if ends else []
    trials += [None] * min(2 * len(ends), MAX_LAYOUT_TRIALS,
                           PLACEMENT_WORK // max(1, len(best.buffers)) ** 2)
    for k, trial in enumerate(trials):
        if trial is None:   # toggle one op, two rounds over them
            trial = best.tail_inplace ^ {ends[(k - 1) % len(ends)]}
        plan = _plan(g, scratch, align, inputs_in_arena, frozenset(trial))
        if plan.arena_bytes < best.arena_bytes:
            best = plan
    return best


def _plan(g: Graph, scratch, align: int, inputs_in_arena: bool, tail: frozenset) -> Plan:
    bufs = buffers(g, scratch, inputs_in_arena, tail)
    arena_bufs = [b for b in bufs if b.user is None and b.size > 0]
    orderings = [
        sorted(arena_bufs, key=lambda b: (-b.size, b.start, b.key)),
        sorted(arena_bufs, key=lambda b: (-(b.end - b.start), -b.size, b.key)),
        sorted(arena_bufs, key=lambda b: (b.start, -b.size, b.key)),
        sorted(arena_bufs, key=lambda b: (-b.size * (b.end - b.start + 1), b.key)),
    ]
    best = None
    for order in orderings:
        offs = _place(order, align)
        size = _align(max((offs[b.key] + b.size for b in arena_bufs), default=0), align)
        if best is None or size < best[0]:
            best = (size, offs)
    arena_bytes, offsets = best
    tensors, scratch_pl = {}, {}
    group_of = {tid: b for b in bufs for tid in b.members}
    for tid in g.activations():
        b = group_of[tid]
        if b.user is not None:
            tensors[tid] = Placement(b.user[0], b.user[1], 0, g.t(tid).nbytes)
        else:
            tensors[tid] = Placement("arena", 0, offsets.get(b.key, 0) + b.member_offset[tid],
                                     g.t(tid).nbytes)
    for b in bufs:
        if b.key.startswith("scratch:"):
            scratch_pl[b.key[len("scratch:"):]] = Placement("arena", 0, offsets.get(b.key, 0), b.size)
    state = {tid: Placement("state", k, 0, g.t(tid).nbytes) for k, tid in enumerate(g.variables())}
    tensors.update(state)
    plan = Plan(arena_bytes, tensors, scratch_pl, bufs, align, state,
                sum(p.size for p in state.values()))
    plan.inputs_in_arena = inputs_in_arena
    plan.tail_inplace = tail
    return plan
