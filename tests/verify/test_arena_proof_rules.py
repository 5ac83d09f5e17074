"""The arena proof re-derives from the IR what it checks, on small hand-made graphs and a real
IF-in-WHILE model: every used activation (control-flow regions included) must be placed, only
real views may alias, user buffers hold only their own tensor, and each condition of the
in-place rule is enforced. Each corruption is shown rejected, next to the intact plan passing."""
from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest

from eerie_c.errors import CompilerBug
from eerie_c.ir import Graph, Op, Tensor
from eerie_c.passes.alias_reshape import alias_reshapes
from eerie_c.plan import Placement, plan_memory, prove_plan


def _chain(kinds, size=8, **attrs):
    """t0 -> kinds[0] -> t1 -> ... -> tN, t0 the input and tN the output."""
    t = {f"t{i}": Tensor(f"t{i}", (size,), "int8") for i in range(len(kinds) + 1)}
    ops = [Op(k, [f"t{i}"], [f"t{i + 1}"], dict(attrs.get(f"a{i}", {})), f"o{i}", i) for i, k in enumerate(kinds)]
    return Graph("g", t, ops, ["t0"], [f"t{len(kinds)}"])


def test_chained_reshapes_between_user_buffers_keep_their_own_buffers():
    """input -> RESHAPE -> t -> RESHAPE -> output: each RESHAPE alone has one user side, but
    aliasing both would make the input and the output one storage group (the input would
    be read from the output buffer). At most one of them may be aliased."""
    g = alias_reshapes(_chain(["RESHAPE", "RESHAPE"]))
    plan = plan_memory(g)
    prove_plan(g, plan, {})
    assert plan.tensors["t0"].base == "input" and plan.tensors["t2"].base == "output"
    assert sum(bool(op.attrs.get("alias_of_input")) for op in g.ops) == 1


def test_proof_rejects_user_buffer_mixup():
    g = _chain(["ADD", "ADD"])
    plan = plan_memory(g)
    prove_plan(g, plan, {})
    bad = copy.deepcopy(plan)
    bad.tensors["t0"].base = "output"
    with pytest.raises(CompilerBug, match="graph input t0"):
        prove_plan(g, bad, {})
    # an intermediate tensor put in the output buffer, over the output
    bad = copy.deepcopy(plan)
    bad.tensors["t1"] = Placement("output", 0, 0, 8)
    with pytest.raises(CompilerBug, match="t1 is placed in output buffer 0, which belongs to another"):
        prove_plan(g, bad, {})


def test_proof_rejects_missing_and_unknown_placements():
    g = _chain(["ADD", "ADD", "ADD"])
    plan = plan_memory(g)
    prove_plan(g, plan, {})
    bad = copy.deepcopy(plan)
    del bad.tensors["t2"]
    with pytest.raises(CompilerBug, match="1 activation.* have no placement: t2"):
        prove_plan(g, bad, {})
    bad = copy.deepcopy(plan)
    g.tensors["ghost"] = Tensor("ghost", (4,), "int8")
    bad.tensors["ghost"] = Placement("arena", 0, 0, 4)
    with pytest.raises(CompilerBug, match="ghost is placed in arena but no op"):
        prove_plan(g, bad, {})


def test_proof_rejects_bogus_aliases():
    g = _chain(["ADD", "ADD", "ADD"])
    plan = plan_memory(g)
    # ADD marked as an alias with its output on its input's bytes: the plan looks consistent,
    # but an op that computes cannot share its input's storage
    g.ops[1].attrs["alias_of_input"] = True
    bad = copy.deepcopy(plan)
    bad.tensors["t2"].offset = bad.tensors["t1"].offset
    with pytest.raises(CompilerBug, match=r"op 1 \(ADD o1\) is marked alias_of_input but is not a shape-only"):
        prove_plan(g, bad, {})
    # a real RESHAPE, but of another byte size
    g = alias_reshapes(_chain(["ADD", "RESHAPE", "ADD"]))
    plan = plan_memory(g)
    prove_plan(g, plan, {})
    assert g.ops[1].attrs["alias_of_input"]
    g.t("t2").shape = (12,)
    with pytest.raises(CompilerBug, match="views 8 B of int8 as 12 B of int8"):
        prove_plan(g, plan, {})
    # the right size, but the two sides placed at different bytes
    g.t("t2").shape = (8,)
    bad = copy.deepcopy(plan)
    bad.tensors["t2"].offset += 16
    bad.arena_bytes += 16
    with pytest.raises(CompilerBug, match="placed apart"):
        prove_plan(g, bad, {})


def _inplace_graph(size_in=32, size_out=32):
    """input -> X -> t1 -> U (in place) -> t2 -> X -> output; the planner puts t2 on t1."""
    g = _chain(["X", "U", "X"], a1={"inplace_of_input": True})
    g.t("t1").shape, g.t("t2").shape = (size_in,), (size_out,)
    plan = plan_memory(g)
    prove_plan(g, plan, {})
    assert plan.tensors["t1"].offset == plan.tensors["t2"].offset
    return g, plan


def test_inplace_rule_input_read_again_later_rejected():
    g, plan = _inplace_graph()
    g.tensors["t9"] = Tensor("t9", (1,), "int8")
    g.ops.insert(2, Op("X", ["t1"], ["t9"], name="reader", index=9))
    plan.tensors["t9"] = Placement("arena", 0, plan.arena_bytes, 1)
    plan.arena_bytes += plan.align
    with pytest.raises(CompilerBug, match="t1 and t2 are live together and overlap|t2 and t1 are live"):
        prove_plan(g, plan, {})


def test_inplace_rule_output_larger_than_input_rejected():
    g, plan = _inplace_graph()
    g.t("t2").shape = (33,)
    plan.arena_bytes = max(plan.arena_bytes, 48)
    with pytest.raises(CompilerBug, match="t1 and t2 are live together and overlap|t2 and t1 are live"):
        prove_plan(g, plan, {})


def test_inplace_rule_offsets_differ_rejected():
    g, plan = _inplace_graph()
    plan.tensors["t2"].offset += 16
    plan.arena_bytes = plan.tensors["t2"].offset + 32
    with pytest.raises(CompilerBug, match="t1 and t2 are live together and overlap|t2 and t1 are live"):
        prove_plan(g, plan, {})


def test_inplace_rule_input_read_twice_by_the_op_rejected():
    g, plan = _inplace_graph()
    g.ops[1].inputs.append("t1")
    with pytest.raises(CompilerBug, match="t1 and t2 are live together and overlap|t2 and t1 are live"):
        prove_plan(g, plan, {})


def _tail_graph(size_in=32, size_out=64):
    """input -> X -> t1 -> E ("end": t1 at the tail of t2) -> t2 -> X -> output."""
    g = _chain(["X", "E", "X"], a1={"inplace_of_input": "end"})
    g.t("t1").shape, g.t("t2").shape = (size_in,), (size_out,)
    plan = plan_memory(g)
    prove_plan(g, plan, {})
    return g, plan


def test_inplace_end_puts_the_input_at_the_output_tail():
    """The "end" layout saves the input's bytes at the op: arena = the output alone."""
    g, plan = _tail_graph()
    assert plan.tail_inplace and plan.arena_bytes == 64
    assert plan.tensors["t1"].offset == plan.tensors["t2"].offset + 32
    same, _ = _tail_graph(32, 32)          # equal sizes: input and output at one offset
    assert same.t("t1").nbytes == 32 and plan_memory(same).arena_bytes == 32


@pytest.mark.parametrize("size_in,size_out", [(64, 32), (32, 40)],
                         ids=["output-smaller", "growth-not-16-aligned"])
def test_inplace_end_rule_refused_by_the_planner(size_in, size_out):
    """A smaller output cannot hold its input at its tail; a growth that is not a multiple of
    16 bytes would misalign the input's storage: the planner keeps them apart."""
    g, plan = _tail_graph(size_in, size_out)
    a, b = plan.tensors["t1"], plan.tensors["t2"]
    assert a.offset + a.size <= b.offset or b.offset + b.size <= a.offset
    assert plan.arena_bytes == -(-size_in // 16) * 16 + -(-size_out // 16) * 16


def test_inplace_end_rule_input_not_at_the_tail_rejected():
    g, plan = _tail_graph()
    plan.tensors["t1"].offset -= 16          # inside t2, but not ending where t2 ends
    with pytest.raises(CompilerBug, match="t1 and t2 are live together and overlap|t2 and t1 are live"):
        prove_plan(g, plan, {})


def test_inplace_end_rule_layout_must_be_the_declared_one():
    """A kernel that declared "start" (or nothing) gets no "end" layout, and vice versa."""
    g, plan = _tail_graph()
    for declared in (True, False):
        g.ops[1].attrs["inplace_of_input"] = declared
        with pytest.raises(CompilerBug, match="t1 and t2 are live together and overlap|t2 and t1 are live"):
            prove_plan(g, plan, {})
    g, plan = _inplace_graph()
    g.ops[1].attrs["inplace_of_input"] = "end"
    g.t("t2").shape = (16,)                  # t2 at t1's first byte, smaller: a "start" layout
    with pytest.raises(CompilerBug, match="t1 and t2 are live together and overlap|t2 and t1 are live"):
        prove_plan(g, plan, {})


def test_inplace_end_rule_output_smaller_than_input_rejected():
    """Placed so it ends at the input's last byte, but smaller than the input."""
    g, plan = _tail_graph(64, 32)
    plan.tensors["t2"].offset = plan.tensors["t1"].offset + 32
    plan.arena_bytes = max(p.offset + p.size for p in plan.tensors.values() if p.base == "arena")
    with pytest.raises(CompilerBug, match="t1 and t2 are live together and overlap|t2 and t1 are live"):
        prove_plan(g, plan, {})


# ---- a real control-flow model -----------------------------------------------------------------

def _nested_model(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ops"))
    from test_tflite_control_flow import nested_if_in_while
    p = tmp_path / "nested.tflite"
    p.write_bytes(nested_if_in_while())
    return p


def test_control_flow_tensors_must_be_placed(tmp_path):
    """IF nested in WHILE, through the real frontend, passes and lowering: the planned graph
    passes; dropping a tensor made inside the loop body (between CF_LOOP and CF_END_LOOP) is
    caught; and a graph whose regions were never linearized cannot be proved at all (its
    region tensors have no placements, and no live ranges could be derived for them)."""
    from eerie_c.frontend import load_model
    from eerie_c.kernels import lower_graph
    from eerie_c.passes import run_passes
    path = _nested_model(tmp_path)
    raw = load_model(path, "nested")
    assert any(op.regions for op in raw.ops)
    g = run_passes(copy.deepcopy(raw))
    lower_graph(g)
    plan = plan_memory(g)
    prove_plan(g, plan, {})
    kinds = [op.kind for op in g.ops]
    inside = {t for op in g.ops[kinds.index("CF_LOOP") + 1:kinds.index("CF_END_LOOP")]
              for t in op.outputs if plan.tensors.get(t) and plan.tensors[t].base == "arena"}
    assert inside
    for tid in sorted(inside):
        bad = copy.deepcopy(plan)
        del bad.tensors[tid]
        with pytest.raises(CompilerBug, match=f"have no placement: {tid}"):
            prove_plan(g, bad, {})
    # planned as if the nested graph were flat: its region tensors are nowhere
    flat = plan_memory(raw)
    with pytest.raises(CompilerBug, match="have no placement"):
        prove_plan(raw, flat, {})
    # every region tensor given a (bogus) placement: still rejected, regions must be linearized
    from eerie_c.plan.proof_inputs import used_activations
    for tid in set(used_activations(raw)) - set(flat.tensors):
        flat.tensors[tid] = Placement("arena", 0, flat.arena_bytes, raw.t(tid).nbytes)
    with pytest.raises(CompilerBug, match="still has control-flow regions"):
        prove_plan(raw, flat, {})


def test_unread_input_in_the_arena_keeps_its_own_bytes():
    """Regression (found by the property test): with inputs_in_arena, an input no op reads was
    given the lifetime [-1, -2], overlapping nothing, and shared bytes with another input;
    the caller writes every input before NAME_invoke, so one clobbered the other."""
    t = {f"t{i}": Tensor(f"t{i}", (8,), "int8") for i in range(3)}
    g = Graph("g", t, [Op("ADD", ["t0"], ["t2"], index=0)], ["t0", "t1"], ["t2"])
    plan = plan_memory(g, inputs_in_arena=True)
    prove_plan(g, plan, {})
    a, b = plan.tensors["t0"], plan.tensors["t1"]
    assert a.base == b.base == "arena" and (a.offset + 8 <= b.offset or b.offset + 8 <= a.offset)
    bad = copy.deepcopy(plan)
    bad.tensors["t1"].offset = a.offset   # what the planner did before the fix
    with pytest.raises(CompilerBug, match="live together and overlap"):
        prove_plan(g, bad, {})
