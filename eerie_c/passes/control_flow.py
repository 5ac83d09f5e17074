"""Flatten IF / WHILE regions into one op sequence with control markers (kernels/control.py).

    IF(pred, ...) {then} {else} -> CF_IF(pred) then-ops, CF_COPY results -> outputs,
                                   CF_ELSE, else-ops, CF_COPY results -> outputs (rewrite), CF_END_IF
    WHILE(init...) {cond} {body} -> CF_COPY init -> carried, CF_LOOP, cond-ops,
                                   CF_BREAK_UNLESS(c), body-ops, CF_COPY results -> carried
                                   (rewrite), CF_END_LOOP(every tensor the loop reads from outside,
                                   and the carried buffers)

The copies that write a tensor a second time carry `rewrites` (the IR verifier allows those).
The planner then needs nothing new: a tensor's lifetime runs from its first write to its last
read in this order, and CF_END_LOOP reads every value that the loop reads from before it and
the carried buffers, so they stay live (and unshared) through every trip. Values made inside a
trip live inside it; the two branches of an IF may share bytes since only one runs.
"""
from __future__ import annotations

from ..ir import Graph, Op


def _copy(src: str, dst: str, name: str, index: int, rewrite: bool) -> Op:
    return Op("CF_COPY", [src], [dst], {"rewrites": True} if rewrite else {}, name, index)


def linearize_control_flow(g: Graph) -> Graph:
    if not any(op.regions for op in g.ops):
        return g
    out: list[Op] = []
    loops = [0]

    def emit(ops):
        for op in ops:
            if op.kind == "IF":
                pred = op.inputs[0]
                then_g, else_g = op.regions
                out.append(Op("CF_IF", [pred], [], {}, op.name, op.index))
                emit(then_g.ops)
                for r, y in zip(then_g.outputs, op.outputs):
                    out.append(_copy(r, y, op.name, op.index, False))
                out.append(Op("CF_ELSE", [pred], [], {}, op.name, op.index))
                emit(else_g.ops)
                for r, y in zip(else_g.outputs, op.outputs):
                    out.append(_copy(r, y, op.name, op.index, True))
                out.append(Op("CF_END_IF", [pred], [], {}, op.name, op.index))
            elif op.kind == "WHILE":
                cond_g, body_g = op.regions
                attrs = {"counter": f"trip{loops[0]}", "max_iterations": int(op.attrs["max_iterations"])}
                loops[0] += 1
                for init, v in zip(op.inputs, op.outputs):
                    out.append(_copy(init, v, op.name, op.index, False))
                start = len(out)
                out.append(Op("CF_LOOP", [op.outputs[0]], [], dict(attrs), op.name, op.index))
                emit(cond_g.ops)
                out.append(Op("CF_BREAK_UNLESS", [cond_g.outputs[0]], [], dict(attrs), op.name, op.index))
                emit(body_g.ops)
                for r, v in zip(body_g.outputs, op.outputs):
                    out.append(_copy(r, v, op.name, op.index, True))
                made = {t for o in out[start:] if not o.attrs.get("rewrites") for t in o.outputs}
                reads: dict[str, None] = {}
                for o in out[start:]:
                    for t in o.inputs:
                        if t is not None and t not in made and not g.t(t).is_const:
                            reads[t] = None
                for v in op.outputs:
                    reads[v] = None
                out.append(Op("CF_END_LOOP", list(reads), [], dict(attrs), op.name, op.index))
            else:
                out.append(op)

    emit(g.ops)
    g.ops = out
    return g
