"""Property-based tests of the arena planner, with the independent checker (prove_plan) as
the oracle: every plan the planner makes for a random graph passes; plans corrupted in the
ways that matter (live tensors overlapping, misaligned offsets, wrong arena size) fail."""
from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from eerie_c.errors import CompilerBug
from eerie_c.ir import Graph, Op, Tensor
from eerie_c.passes.alias_reshape import alias_reshapes
from eerie_c.plan import plan_memory, prove_plan
from eerie_c.plan.proof import _live_ranges

DTYPES = ["int8", "int16", "int32", "float32", "uint8", "int64"]
SETTINGS = settings(max_examples=100, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def graphs(draw):
    """A random DAG of ops in execution order. Each op reads one to three earlier
    activations (and maybe a constant) and writes one or two new tensors; some ops are
    RESHAPEs, which the alias pass turns into storage sharing; some steps need scratch."""
    tensors: dict[str, Tensor] = {}

    def new(dtype, size, data=None):
        tid = f"t{len(tensors)}"
        tensors[tid] = Tensor(tid, (size,), dtype, data=data)
        return tid

    n_in = draw(st.integers(1, 3))
    inputs = [new(draw(st.sampled_from(DTYPES)), draw(st.integers(1, 300))) for _ in range(n_in)]
    avail = list(inputs)
    ops = []
    scratch = {}
    n_ops = draw(st.integers(1, 14))
    for step in range(n_ops):
        if draw(st.booleans()) and draw(st.booleans()):
            # RESHAPE: same bytes, same dtype, output gets a different shape
            src = draw(st.sampled_from(avail))
            t = tensors[src]
            out = new(t.dtype, t.size)
            tensors[out].shape = (1, t.size)
            ops.append(Op("RESHAPE", [src], [out], name=f"r{step}", index=step))
            avail.append(out)
            continue
        k = draw(st.integers(1, min(3, len(avail))))
        ins = draw(st.lists(st.sampled_from(avail), min_size=k, max_size=k))
        if draw(st.booleans()):
            ins.append(new("int8", 4, data=np.zeros(4, np.int8)))   # a weight: never in the arena
        if draw(st.booleans()) and draw(st.booleans()):
            ins.append(None)                                          # omitted optional input
        outs = [new(draw(st.sampled_from(DTYPES)), draw(st.integers(0, 400)))
                for _ in range(draw(st.integers(1, 2)))]
        ops.append(Op(draw(st.sampled_from(["ADD", "CONV_2D", "X"])), ins, outs, name=f"o{step}", index=step))
        avail.extend(outs)
        if draw(st.integers(0, 4)) == 0:
            scratch[step] = (f"l{step}_scratch", draw(st.integers(1, 256)))
    produced = [t for op in ops for t in op.outputs]
    n_out = draw(st.integers(1, min(3, len(produced))))
    outputs = list(dict.fromkeys(draw(st.lists(st.sampled_from(produced), min_size=n_out, max_size=n_out))))
    outputs = [t for t in outputs if t not in inputs]
    assume(outputs)
    g = alias_reshapes(Graph("g", tensors, ops, inputs, outputs))
    return g, scratch


def _plan(g, scratch):
    plan = plan_memory(g, scratch)
    steps = {name: step for step, (name, _) in scratch.items()}
    return plan, steps


@SETTINGS
@given(graphs())
def test_planner_plans_always_pass_the_proof(case):
    g, scratch = case
    plan, steps = _plan(g, scratch)
    r = prove_plan(g, plan, steps)
    assert r["ok"] and r["arena_bytes"] == plan.arena_bytes
    assert plan.arena_bytes % plan.align == 0
    # user buffers are never placed in the arena, and each is its own buffer
    for k, tid in enumerate(g.inputs):
        assert (plan.tensors[tid].base, plan.tensors[tid].index) == ("input", k)
    for k, tid in enumerate(g.outputs):
        assert (plan.tensors[tid].base, plan.tensors[tid].index) == ("output", k)
    # the arena is no bigger than the sum of what it holds (sharing can only help)
    total = sum(-(-b.size // plan.align) * plan.align for b in plan.buffers if b.user is None)
    assert plan.arena_bytes <= total


def _arena_items(g, plan, steps):
    ranges = _live_ranges(g)
    items = []
    for tid, p in plan.tensors.items():
        if p.base == "arena" and p.size > 0:
            items.append(("t", tid, *ranges[tid], p))
    for name, p in plan.scratch.items():
        items.append(("s", name, steps[name], steps[name], p))
    return items


def _root(g, t):
    alias = {op.outputs[0]: op.inputs[0] for op in g.ops if op.attrs.get("alias_of_input")}
    while t in alias:
        t = alias[t]
    return t


@SETTINGS
@given(graphs(), st.data())
def test_overlapping_live_tensors_rejected(case, data):
    g, scratch = case
    plan, steps = _plan(g, scratch)
    items = _arena_items(g, plan, steps)
    pairs = [(a, b) for i, a in enumerate(items) for b in items[i + 1:]
             if a[2] <= b[3] and b[2] <= a[3]
             and not (a[0] == b[0] == "t" and _root(g, a[1]) == _root(g, b[1]))]
    assume(pairs)
    a, b = data.draw(st.sampled_from(pairs))
    bad = copy.deepcopy(plan)
    pa = bad.tensors[a[1]] if a[0] == "t" else bad.scratch[a[1]]
    pb = bad.tensors[b[1]] if b[0] == "t" else bad.scratch[b[1]]
    # Move b onto a's first byte. Every member of b's storage group moves with it, so the
    # corruption is a real overlap, not an inconsistency between alias members.
    if b[0] == "t":
        for tid, p in bad.tensors.items():
            if p.base == "arena" and _root(g, tid) == _root(g, b[1]):
                p.offset = pa.offset
    else:
        pb.offset = pa.offset
    end = max(p.offset + p.size for p in list(bad.tensors.values()) + list(bad.scratch.values())
              if p.base == "arena")
    bad.arena_bytes = max(-(-end // bad.align) * bad.align, bad.arena_bytes)
    with pytest.raises(CompilerBug, match="live together and overlap|reported arena"):
        prove_plan(g, bad, steps)
    # the overlap itself is the reason, even with the arena size made consistent
    used = max(p.offset + p.size for p in list(bad.tensors.values()) + list(bad.scratch.values())
               if p.base == "arena")
    bad.arena_bytes = -(-used // bad.align) * bad.align
    with pytest.raises(CompilerBug, match="live together and overlap"):
        prove_plan(g, bad, steps)


@SETTINGS
@given(graphs(), st.data())
def test_misaligned_offset_rejected(case, data):
    g, scratch = case
    plan, steps = _plan(g, scratch)
    wide = [tid for tid, p in plan.tensors.items()
            if p.base == "arena" and g.t(tid).dtype not in ("int8", "uint8") and p.size > 0]
    assume(wide)
    tid = data.draw(st.sampled_from(wide))
    bad = copy.deepcopy(plan)
    bad.tensors[tid].offset += 1
    bad.arena_bytes += bad.align   # keep it inside the arena: misalignment must be the reason
    with pytest.raises(CompilerBug, match="is not .*-byte aligned"):
        prove_plan(g, bad, steps)


@SETTINGS
@given(graphs(), st.sampled_from([-16, 16, 32, -1, 1]))
def test_wrong_arena_size_rejected(case, delta):
    g, scratch = case
    plan, steps = _plan(g, scratch)
    assume(plan.arena_bytes + delta >= 0)
    bad = copy.deepcopy(plan)
    bad.arena_bytes += delta
    with pytest.raises(CompilerBug, match="reported arena|outside the"):
        prove_plan(g, bad, steps)


def test_chained_reshapes_between_user_buffers_keep_their_own_buffers():
    """input -> RESHAPE -> t -> RESHAPE -> output: each RESHAPE alone has one user side, but
    aliasing both would make the input and the output one storage group (the input would
    be read from the output buffer). At most one of them may be aliased."""
    t = {f"t{i}": Tensor(f"t{i}", (8,), "int8") for i in range(3)}
    g = Graph("g", t, [Op("RESHAPE", ["t0"], ["t1"], index=0), Op("RESHAPE", ["t1"], ["t2"], index=1)],
              ["t0"], ["t2"])
    g = alias_reshapes(g)
    plan = plan_memory(g)
    prove_plan(g, plan, {})
    assert plan.tensors["t0"].base == "input" and plan.tensors["t2"].base == "output"
    assert sum(bool(op.attrs.get("alias_of_input")) for op in g.ops) == 1


def test_proof_rejects_user_buffer_mixup():
    t = {f"t{i}": Tensor(f"t{i}", (8,), "int8") for i in range(3)}
    g = Graph("g", t, [Op("ADD", ["t0"], ["t1"], index=0), Op("ADD", ["t1"], ["t2"], index=1)],
              ["t0"], ["t2"])
    plan = plan_memory(g)
    prove_plan(g, plan, {})
    bad = copy.deepcopy(plan)
    bad.tensors["t0"].base = "output"
    with pytest.raises(CompilerBug, match="graph input t0"):
        prove_plan(g, bad, {})
