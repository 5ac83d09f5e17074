"""Property-based tests of the arena planner, with the independent checker (prove_plan) as
the oracle: every plan the planner makes for a random graph (arena_graphs.py: aliases, in-place
ops, variables, IF / WHILE, scratch, inputs in the arena) passes; plans and graphs corrupted in
the ways that matter fail: live tensors overlapping, misaligned offsets, a wrong arena size, a
tensor left unplaced, a non-view op or a resized one marked as an alias, and each condition of
the in-place rule broken (input read again later, output larger than input, offsets apart)."""
from __future__ import annotations

import copy
import re

import pytest
from hypothesis import HealthCheck, Phase, assume, event, find, given, settings
from hypothesis import strategies as st

from arena_graphs import (arena_items, conflicts, declared_inplace, graphs, plan_of, refit_arena,
                          root_of)
from eerie_c.errors import CompilerBug
from eerie_c.ir import Op, Tensor
from eerie_c.plan import Placement, prove_plan
from eerie_c.plan.lifetimes import storage_groups
from eerie_c.plan.proof_inputs import VIEW_KINDS

# Not derandomized: every run explores new graphs (a failure is kept in .hypothesis/ and
# replayed first next time). The whole file stays well under a minute.
SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def _inplace_used(g, plan):
    """Steps of in-place ops the planner really ran in place (input and output share bytes)."""
    groups, root = storage_groups(g, plan.tail_inplace), root_of(g)
    return [s for s, op in enumerate(g.ops)
            if op.attrs.get("inplace_of_input") and op.inputs and op.inputs[0] is not None
            and op.inputs[0] in groups and op.outputs[0] in groups
            and root(op.inputs[0]) != root(op.outputs[0])
            and groups[op.inputs[0]] == groups[op.outputs[0]]]


@SETTINGS
@given(graphs())
def test_planner_plans_always_pass_the_proof(case):
    g, _, in_arena = case
    plan, steps = plan_of(case)
    r = prove_plan(g, plan, steps)
    assert r["ok"] and r["arena_bytes"] == plan.arena_bytes
    assert plan.arena_bytes % plan.align == 0
    for k, tid in enumerate(g.inputs):
        want = ("arena", 0) if in_arena else ("input", k)
        assert (plan.tensors[tid].base, plan.tensors[tid].index) == want
    for k, tid in enumerate(g.outputs):
        assert (plan.tensors[tid].base, plan.tensors[tid].index) == ("output", k)
    assert all(plan.tensors[v].base == "state" for v in g.variables())
    # the arena is no bigger than the sum of what it holds (sharing can only help)
    total = sum(-(-b.size // plan.align) * plan.align for b in plan.buffers if b.user is None)
    assert plan.arena_bytes <= total
    for what, yes in (("in place", _inplace_used(g, plan)), ("in place at the tail", _tail_used(g, plan)),
                      ("loop", any(o.kind == "CF_LOOP" for o in g.ops)),
                      ("if", any(o.kind == "CF_IF" for o in g.ops)), ("state", plan.state),
                      ("inputs in arena", in_arena)):
        event(f"{what}: {bool(yes)}")


def test_zero_byte_tensor_inside_a_live_one_is_no_overlap():
    """A zero-byte tensor has no bytes: its offset may fall inside a live tensor's range (the
    planner puts it anywhere). Hypothesis found the proof calling [16, 16) and [0, 17) an
    overlap; a one-byte tensor at the same place must still be one."""
    from eerie_c.ir import Graph
    from eerie_c.plan import plan_memory
    tensors = {"x": Tensor("x", (17,), "int8"), "big": Tensor("big", (17,), "int8"),
               "empty": Tensor("empty", (0,), "int8"), "y": Tensor("y", (1,), "int8")}
    ops = [Op("A", ["x"], ["big"], name="a", index=0), Op("B", ["big"], ["empty"], name="b", index=1),
           Op("C", ["big", "empty"], ["y"], name="c", index=2)]
    g = Graph("g", tensors, ops, ["x"], ["y"])
    plan = plan_memory(g, {}, inputs_in_arena=False)
    big = plan.tensors["big"]
    inside = big.offset + 16
    plan.tensors["empty"] = Placement("arena", 0, inside, 0)
    assert prove_plan(g, plan, {})["ok"]
    g.tensors["empty"] = Tensor("empty", (1,), "int8")
    plan.tensors["empty"] = Placement("arena", 0, inside, 1)
    with pytest.raises(CompilerBug, match="overlap"):
        prove_plan(g, plan, {})


def _tail_used(g, plan):
    """Steps of "end" in-place ops the planner ran so (input at the tail of its output)."""
    return [s for s in _inplace_used(g, plan) if g.ops[s].attrs["inplace_of_input"] == "end"
            and g.t(g.ops[s].outputs[0]).nbytes > g.t(g.ops[s].inputs[0]).nbytes]


@pytest.mark.parametrize("feature", ["in place", "in place at the tail", "loop", "if", "state",
                                     "inputs in arena"])
def test_random_graphs_exercise_every_feature(feature):
    """The strategy really makes what the properties are meant to cover (each found quickly)."""
    def has(case):
        g, _, in_arena = case
        plan, _ = plan_of(case)
        return {"in place": lambda: bool(_inplace_used(g, plan)),
                "in place at the tail": lambda: bool(_tail_used(g, plan)),
                "loop": lambda: any(o.kind == "CF_LOOP" for o in g.ops),
                "if": lambda: any(o.kind == "CF_IF" for o in g.ops),
                "state": lambda: bool(plan.state),
                "inputs in arena": lambda: in_arena and plan.tensors[g.inputs[0]].base == "arena"}[feature]()
    # generate only: the first graph found will do, shrinking it would take most of the time
    # ("in place at the tail" also needs the "end" plan to beat the plain one: rarer)
    n = 3000 if feature == "in place at the tail" else 300
    find(graphs(), has, settings=settings(max_examples=n, database=None, deadline=None,
                                          phases=[Phase.generate], suppress_health_check=list(HealthCheck)))


def _move_storage(g, plan, r, offset):
    """Move every arena tensor of storage root r (all its aliases with it) to `offset`."""
    root = root_of(g)
    for tid, p in plan.tensors.items():
        if p.base == "arena" and root(tid) == r:
            p.offset = offset


@SETTINGS
@given(graphs(), st.data())
def test_overlapping_live_tensors_rejected(case, data):
    g, _, _ = case
    plan, steps = plan_of(case)
    items = arena_items(g, plan, steps)
    inplace = declared_inplace(g, root_of(g))
    pairs = [(a, b) for i, a in enumerate(items) for b in items[i + 1:]
             if a[0] != b[0] and a[1] <= b[2] and b[1] <= a[2] and frozenset((a[0], b[0])) not in inplace]
    assume(pairs)
    a, b = data.draw(st.sampled_from(pairs))
    bad = copy.deepcopy(plan)
    # Move b (its whole storage) onto a's first byte: a real overlap, not an alias mismatch.
    if b[0].startswith("scratch:"):
        bad.scratch[b[0][len("scratch:"):]].offset = a[3]
    else:
        _move_storage(g, bad, b[0], a[3])
    refit_arena(g, bad)
    with pytest.raises(CompilerBug, match="live together and overlap"):
        prove_plan(g, bad, steps)


@SETTINGS
@given(graphs(), st.data())
def test_misaligned_offset_rejected(case, data):
    g, _, _ = case
    plan, steps = plan_of(case)
    wide = [tid for tid, p in plan.tensors.items()
            if p.base == "arena" and g.t(tid).dtype not in ("int8", "uint8", "bool") and g.t(tid).nbytes > 0]
    assume(wide)
    tid = data.draw(st.sampled_from(wide))
    bad = copy.deepcopy(plan)
    _move_storage(g, bad, root_of(g)(tid), bad.tensors[tid].offset + 1)
    bad.arena_bytes += bad.align   # keep it inside the arena: misalignment must be the reason
    with pytest.raises(CompilerBug, match="is not .*-byte aligned"):
        prove_plan(g, bad, steps)


@SETTINGS
@given(graphs(), st.sampled_from([-16, 16, 32, -1, 1]))
def test_wrong_arena_size_rejected(case, delta):
    g, _, _ = case
    plan, steps = plan_of(case)
    assume(plan.arena_bytes + delta >= 0)
    bad = copy.deepcopy(plan)
    bad.arena_bytes += delta
    with pytest.raises(CompilerBug, match="reported arena|outside the"):
        prove_plan(g, bad, steps)


@SETTINGS
@given(graphs(), st.data())
def test_dropped_placement_rejected(case, data):
    g, _, _ = case
    plan, steps = plan_of(case)
    tid = data.draw(st.sampled_from(sorted(plan.tensors)))
    bad = copy.deepcopy(plan)
    del bad.tensors[tid]
    with pytest.raises(CompilerBug, match="have no placement" if not g.t(tid).variable else "state storage"):
        prove_plan(g, bad, steps)


@SETTINGS
@given(graphs(), st.data())
def test_non_view_op_marked_alias_rejected(case, data):
    """Even with its output moved onto its input's bytes (so that the plan looks consistent),
    an op that computes something cannot be declared a view."""
    g, _, _ = case
    plan, steps = plan_of(case)
    root, users = root_of(g), set(g.inputs) | set(g.outputs)
    act = lambda t: t is not None and not g.t(t).is_const and not g.t(t).variable   # noqa: E731
    ops = [s for s, op in enumerate(g.ops)
           if op.kind not in VIEW_KINDS and op.inputs and op.outputs and act(op.inputs[0])
           and act(op.outputs[0]) and not any(root(t) == root(op.outputs[0]) for t in users)]
    assume(ops)
    s = data.draw(st.sampled_from(ops))
    bad_g, bad = copy.deepcopy(g), copy.deepcopy(plan)
    op = bad_g.ops[s]
    src, moved = bad.tensors[op.inputs[0]], root(op.outputs[0])
    for tid, p in bad.tensors.items():
        if root(tid) == moved:
            p.base, p.index, p.offset = src.base, src.index, src.offset
    op.attrs["alias_of_input"] = True
    refit_arena(bad_g, bad)
    with pytest.raises(CompilerBug, match="is not a shape-only view op"):
        prove_plan(bad_g, bad, steps)


@SETTINGS
@given(graphs(), st.data(), st.sampled_from(["grow", "shrink", "dtype"]))
def test_alias_of_another_size_rejected(case, data, how):
    g, _, _ = case
    plan, steps = plan_of(case)
    ops = [s for s, op in enumerate(g.ops) if op.attrs.get("alias_of_input")]
    assume(ops)
    bad_g = copy.deepcopy(g)
    t = bad_g.t(bad_g.ops[data.draw(st.sampled_from(ops))].outputs[0])
    if how == "grow":
        t.shape = (t.size + 1,)
    elif how == "shrink":
        assume(t.size > 0)
        t.shape = (t.size - 1,)
    else:
        t.dtype = "int16" if t.dtype != "int16" else "uint8"
    bad = copy.deepcopy(plan)
    refit_arena(bad_g, bad)
    with pytest.raises(CompilerBug, match="marked alias_of_input but views"):
        prove_plan(bad_g, bad, steps)


# ---- the in-place rule ------------------------------------------------------------------------

def _named_pair(msg, root):
    m = re.search(r"arena proof: (\S+) and (\S+) are live together and overlap", msg)
    assert m, msg
    return frozenset(root(t) for t in m.groups())


@SETTINGS
@given(graphs(), st.data(), st.sampled_from(["read later", "output larger", "offsets differ"]))
def test_broken_inplace_rule_rejected(case, data, how):
    """Take an op the planner ran in place and break one condition of the rule: the proof
    must then see its input and output as two live tensors sharing bytes. Only cases where
    that pair is the sole new conflict count, so the rule itself must be what rejects them."""
    g, _, _ = case
    plan, steps = plan_of(case)
    used = _inplace_used(g, plan)
    assume(used)
    step = data.draw(st.sampled_from(used))
    root = root_of(g)
    a, b = g.ops[step].inputs[0], g.ops[step].outputs[0]
    pair = frozenset((root(a), root(b)))
    assume(g.t(a).nbytes > 0 and g.t(b).nbytes > 0)
    before = conflicts(g, plan, steps)
    bad_g, bad, bad_steps = copy.deepcopy(g), copy.deepcopy(plan), dict(steps)
    if how == "read later":
        # a new op right after it reads the input again; its own output sits past the arena
        n = f"t{len(bad_g.tensors)}"
        bad_g.tensors[n] = Tensor(n, (1,), "int8")
        bad_g.ops.insert(step + 1, Op("X", [a], [n], name="reader", index=999))
        bad.tensors[n] = Placement("arena", 0, bad.arena_bytes, 1)
        bad_steps = {k: s + (s > step) for k, s in steps.items()}
    elif how == "output larger":
        # "start": one element larger than its input; "end" (a larger output is its point):
        # one element past the input's last byte. Either way it still covers the input.
        item = bad_g.t(b).nbytes // bad_g.t(b).size
        grown = g.t(b) if g.ops[step].attrs["inplace_of_input"] == "end" else g.t(a)
        for tid, t in bad_g.tensors.items():
            if root(tid) == root(b) and not t.is_const:
                t.shape = (grown.nbytes // item + 1,)
    else:
        assume(g.t(a).nbytes > plan.align)
        _move_storage(bad_g, bad, root(b), bad.tensors[b].offset + plan.align)
    refit_arena(bad_g, bad)
    assume(conflicts(bad_g, bad, bad_steps) <= before)
    with pytest.raises(CompilerBug, match="live together and overlap") as e:
        prove_plan(bad_g, bad, bad_steps)
    assert _named_pair(str(e.value), root_of(bad_g)) == pair
