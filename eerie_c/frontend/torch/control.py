"""torch.cond and torch.while_loop (higher-order ops in the exported graph) -> IF / WHILE ops
whose branches and bodies are nested graphs (`Op.regions`), lowered by the same walker.

Region graphs share the program's tensor table and read outer values directly (no copies
in); their outputs are always tensors made inside the region, so a copy is added where a
branch or body hands back one of its inputs, an outer value or a constant. A predicate known at
compile time picks its branch here. Loops carry the `max_iterations` bound of the compile.
"""
from __future__ import annotations

import numpy as np

from ...errors import EerieError
from ...ir import Graph, Op
from .values import Act


def lower_higher_order(L, node, args, kwargs, env):
    name = getattr(node.target, "_name", None) or getattr(node.target, "__name__", str(node.target))
    if name == "cond":
        return _cond(L, node, *args, **kwargs)
    if name == "while_loop":
        return _while(L, node, *args, **kwargs)
    raise EerieError(f"unsupported higher-order op {name} at node {node.name}")


def _region(L, gm, bound: list, what: str) -> tuple[Graph, list]:
    """Walk `gm` with its placeholders bound to `bound`, into a new region graph."""
    outer = L.scope
    g = Graph(f"{outer.name}_{what}", L.top.tensors, [], [], [])
    L.scope = g
    try:
        env = {}
        phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
        if len(phs) != len(bound):
            raise EerieError(f"{what}: {len(phs)} inputs but {len(bound)} values")
        for n, v in zip(phs, bound):
            env[n] = v
        outs = L.walk(gm, env)
        made = {t for op in g.ops for t in op.outputs}
        ids = []
        for k, v in enumerate(outs):
            if not isinstance(v, Act):
                if not isinstance(v, L.torch.Tensor):
                    v = L.torch.tensor(v)
                v = Act(L.const(v, None, f"{what}_value"))
            if v.tid not in made or v.tid in ids:
                t = L.t(v)
                v = L.op("CF_COPY", [v], t.shape, t.dtype, label=f"{what}_out{k}")
            ids.append(v.tid)
        g.outputs = ids
        return g, [Act(t) for t in ids]
    finally:
        L.scope = outer


def _as_bound(L, v):
    return v


def _cond(L, node, pred, true_gm, false_gm, operands, *rest):
    operands = list(operands)
    if not isinstance(pred, Act):
        take = bool(pred.item() if hasattr(pred, "item") else pred)
        return L.walk(true_gm if take else false_gm, {
            n: v for n, v in zip([n for n in (true_gm if take else false_gm).graph.nodes
                                  if n.op == "placeholder"], operands)})
    pt = L.t(pred)
    if pt.size != 1:
        raise EerieError(f"torch.cond at {node.name}: the predicate must have one element")
    if pt.dtype != "bool":
        pred = L.op("NOT_EQUAL", [pred, L.const(np.zeros((), dtype=np.float32), pt.dtype)], pt.shape, "bool")
    then_g, then_out = _region(L, true_gm, operands, f"{node.name}_then")
    else_g, else_out = _region(L, false_gm, operands, f"{node.name}_else")
    metas = node.meta["val"]
    outs = []
    for k, (a, b) in enumerate(zip(then_out, else_out)):
        ta, tb = L.t(a), L.t(b)
        if ta.shape != tb.shape or ta.dtype != tb.dtype:
            raise EerieError(f"torch.cond at {node.name}: output {k} is {tb.dtype} {list(tb.shape)} in one "
                             f"branch and {ta.dtype} {list(ta.shape)} in the other")
        outs.append(L.tensor(ta.shape, ta.dtype, f"{node.name}_{k}"))
    del metas
    ins = [pred.tid] + [v.tid if isinstance(v, Act) else L.const(v, None, "operand") for v in operands]
    L.ops_made += 1
    L.scope.ops.append(Op("IF", ins, [o.tid for o in outs], {}, node.name, L.ops_made,
                          regions=[then_g, else_g]))
    return tuple(outs)


def _while(L, node, cond_gm, body_gm, carried, additional=(), *rest):
    carried, additional = list(carried), list(additional)
    init = [v.tid if isinstance(v, Act) else L.const(v, None, "init") for v in carried]
    vs = [L.tensor(L.tensors[t].shape, L.tensors[t].dtype, f"{node.name}_v{k}") for k, t in enumerate(init)]
    bound = vs + additional
    cond_g, cond_out = _region(L, cond_gm, bound, f"{node.name}_cond")
    if len(cond_out) != 1 or L.t(cond_out[0]).size != 1 or L.t(cond_out[0]).dtype != "bool":
        raise EerieError(f"torch.while_loop at {node.name}: the condition must return one bool")
    body_g, body_out = _region(L, body_gm, bound, f"{node.name}_body")
    if len(body_out) != len(vs):
        raise EerieError(f"torch.while_loop at {node.name}: the body returns {len(body_out)} values "
                         f"for {len(vs)} loop-carried ones")
    for k, (r, v) in enumerate(zip(body_out, vs)):
        if L.t(r).shape != L.t(v).shape or L.t(r).dtype != L.t(v).dtype:
            raise EerieError(f"torch.while_loop at {node.name}: loop value {k} changes from "
                             f"{L.t(v).dtype} {list(L.t(v).shape)} to {L.t(r).dtype} {list(L.t(r).shape)}")
    L.ops_made += 1
    L.scope.ops.append(Op("WHILE", init, [v.tid for v in vs], {"max_iterations": L.max_iterations},
                          node.name, L.ops_made, regions=[cond_g, body_g]))
    return tuple(vs)
