"""The arena proof's own reading of the IR for the facts it would otherwise take from the
planner: which activations exist (so a tensor the planner forgot cannot slip past the overlap
check) and which ops really are views (so a mislabelled op cannot merge two storages and be
exempted from it). Nothing here looks at the planner's buffers or storage groups.

  * every activation any op reads or writes, every graph input and output, and every tensor
    of a control-flow region still attached to an op, has a placement; nothing else has one;
  * no op still carries regions: live ranges come from the flat op list, so regions must have
    been linearized (passes/control_flow.py) before planning;
  * a user-buffer placement (input k / output k) holds graph input k / output k or a view of it;
  * an op marked alias_of_input is a shape-only op (RESHAPE, SQUEEZE, EXPAND_DIMS) over
    activations of equal byte size and dtype, and its two sides are placed at the same bytes."""
from __future__ import annotations

from ..errors import CompilerBug
from ..ir import Graph

# The proof's own list, not the alias pass's: ops whose output is the input's bytes unchanged.
VIEW_KINDS = frozenset({"RESHAPE", "SQUEEZE", "EXPAND_DIMS"})
BASES = frozenset({"arena", "input", "output", "state"})


def _walk(g: Graph, seen: dict[str, None]) -> None:
    for tid in list(g.inputs) + list(g.outputs):
        seen[tid] = None
    for op in g.ops:
        for tid in list(op.inputs) + list(op.outputs):
            if tid is not None:
                seen[tid] = None
        for region in op.regions:
            _walk(region, seen)


def used_activations(g: Graph) -> list[str]:
    """Every non-constant, non-variable tensor the graph (regions included) mentions."""
    seen: dict[str, None] = {}
    _walk(g, seen)
    return [t for t in seen if not g.t(t).is_const and not g.t(t).variable]


def prove_placed(g: Graph, plan) -> None:
    used = used_activations(g)
    missing = [t for t in used if t not in plan.tensors]
    if missing:
        raise CompilerBug(f"arena proof: {len(missing)} activation(s) used by the graph have no "
                          f"placement: {', '.join(missing[:6])}{', ...' if len(missing) > 6 else ''}")
    known = set(used)
    for tid, p in plan.tensors.items():
        if p.base not in BASES:
            raise CompilerBug(f"arena proof: {tid} is placed in unknown storage {p.base!r}")
        if tid in g.tensors and g.t(tid).variable:
            continue   # variable tensors: _prove_state in proof.py checks their storage
        if tid not in known:
            raise CompilerBug(f"arena proof: {tid} is placed in {p.base} but no op and no graph "
                              f"input or output uses it")
    for op in g.ops:
        if op.regions:
            raise CompilerBug(f"arena proof: op {op.index} ({op.kind}) still has control-flow "
                              f"regions; plans are proved on the linearized op list only")


def alias_links(g: Graph, plan) -> list[tuple[str, str]]:
    """(input, output) of every op marked alias_of_input, each checked to be a real view."""
    links = []
    for op in g.ops:
        if not op.attrs.get("alias_of_input"):
            continue
        where = f"op {op.index} ({op.kind} {op.name})"
        if op.kind not in VIEW_KINDS:
            raise CompilerBug(f"arena proof: {where} is marked alias_of_input but is not a "
                              f"shape-only view op ({', '.join(sorted(VIEW_KINDS))})")
        if len(op.outputs) != 1 or not op.inputs or op.inputs[0] is None:
            raise CompilerBug(f"arena proof: {where} is marked alias_of_input without one data "
                              f"input and one output")
        a, b = g.t(op.inputs[0]), g.t(op.outputs[0])
        if a.is_const or a.variable or b.is_const or b.variable:
            raise CompilerBug(f"arena proof: {where} aliases a constant or variable tensor")
        if a.nbytes != b.nbytes or a.dtype != b.dtype:
            raise CompilerBug(f"arena proof: {where} is marked alias_of_input but views "
                              f"{a.nbytes} B of {a.dtype} as {b.nbytes} B of {b.dtype}")
        pa, pb = plan.tensors[a.id], plan.tensors[b.id]
        if (pa.base, pa.index, pa.offset) != (pb.base, pb.index, pb.offset):
            raise CompilerBug(f"arena proof: {where} aliases {a.id} ({pa.base} {pa.index} +{pa.offset}) "
                              f"and {b.id} ({pb.base} {pb.index} +{pb.offset}), placed apart")
        links.append((a.id, b.id))
    return links


def prove_user_placements(g: Graph, plan, root) -> None:
    """Only graph input k (or a view of it) sits in input buffer k; likewise for outputs."""
    for tid, p in plan.tensors.items():
        if p.base not in ("input", "output"):
            continue
        users = g.inputs if p.base == "input" else g.outputs
        if not 0 <= p.index < len(users) or root(tid) != root(users[p.index]):
            raise CompilerBug(f"arena proof: {tid} is placed in {p.base} buffer {p.index}, which "
                              f"belongs to another tensor")
