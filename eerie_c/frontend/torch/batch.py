"""The dynamic sizes of a PyTorch program, and the per-sample batch.

A symbol on dim 0 of every input (and nowhere else) is a per-sample batch: the graph is lowered
for one sample (the batch dimension set to 1) and NAME_invoke runs it once per sample. That is
exact only when no op mixes samples, which `check_per_sample` checks node by node: every
computed tensor has the batch symbol as its dim 0 and nowhere else, no op with a `dim` argument
works along dim 0, and the batch size is used only as a shape (`aten.sym_size`, lowered here).
Every other dynamic dim is compiled for its maximum and masked (dynamic.py).
"""
from __future__ import annotations

import operator

from ...errors import EerieError
from .registry import lowers
from .values import _src


class _PerSampleError(EerieError):
    """An op combines samples along a dynamic leading dim (see check_per_sample)."""


def find_dynamic_sizes(L, gm, user_inputs):
    """The dynamic sizes: a symbol on dim 0 of every input (and nowhere else) is a per-sample
    batch (L.batch, L.batch_max); every other one a dynamic dim compiled for its maximum
    (L.dyn). A dynamic dim without a maximum is a one-line error."""
    from .dynamic import Dynamic, param_names
    syms: dict = {}
    for node in gm.graph.nodes:
        if node.op != "placeholder" or node.name not in user_inputs:
            continue
        val = node.meta.get("val")
        for k, d in enumerate(getattr(val, "shape", ())):
            if isinstance(d, int):
                continue
            expr = d.node.expr
            if not getattr(expr, "is_Symbol", False):
                raise EerieError(f"input {node.name}: dynamic dimension {k} is {d}; only plain "
                                 f"torch.export.Dim sizes are supported (not expressions of them)")
            syms.setdefault(expr, []).append((node.name, k))
    if not syms:
        return
    ranges = {}
    for sym, where in syms.items():
        vr = L.ep.range_constraints.get(sym)
        upper, lower = getattr(vr, "upper", None), getattr(vr, "lower", 0)
        try:
            mx = int(upper)
        except Exception:
            mx = None
        if mx is None or mx >= 2 ** 31 - 1 or not getattr(upper, "is_finite", True):
            name, k = where[0]
            hint = "batch" if k == 0 else (L.dim_names.get(sym) or "seq")
            raise EerieError(f"input {name}: dynamic dimension {k} has no maximum: declare it as "
                             f"torch.export.Dim(\"{hint}\", max=N) (eerie-c plans memory for the maximum)")
        try:
            mn = max(int(lower), 0)
        except Exception:
            mn = 0
        ranges[sym] = (mn, mx)
    batch = None
    if not L.batch_as_dim:
        for sym, where in syms.items():
            if all(k == 0 for _, k in where) and {n for n, _ in where} == set(user_inputs):
                batch = sym
    if batch is not None:
        L.batch, L.batch_max = batch, ranges[batch][1]
    others = [s for s in syms if s != batch]
    hints = {s: L.dim_names.get(s, "") for s in others}
    L.dyn = Dynamic(others, param_names(others, hints), [ranges[s] for s in others], batch)


def check_per_sample(L, node, result):
    """With a dynamic batch: this node must not mix samples (see the module docstring)."""
    if not L._has_act(result):
        return
    torch = L.torch
    vals = node.meta.get("val")
    vals = vals if isinstance(vals, (list, tuple)) else [vals]
    where = f" ({_src(node)})" if _src(node) else ""
    for v in vals:
        if not isinstance(v, torch.Tensor):
            continue
        shape = list(v.shape)
        ok = bool(shape) and not isinstance(shape[0], int) and _batch_outermost(L, shape[0].node.expr) \
            and all(isinstance(d, int) or L.batch not in d.node.expr.free_symbols for d in shape[1:])
        if not ok:
            op = getattr(node.target, "__name__", node.target)
            raise _PerSampleError(f"{node.name} (aten.{op}) gives shape {[str(d) for d in shape]}: with a "
                                  f"dynamic batch every computed tensor must keep the batch as its dim 0 "
                                  f"(ops must not combine samples){where}")
    packet = getattr(node.target, "__name__", "").split(".")[0]
    if packet in _DIM_OPS:
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
        dims = dim if isinstance(dim, (list, tuple)) else [dim]
        rank = len(vals[0].shape) if isinstance(vals[0], torch.Tensor) else 1
        if any(isinstance(d, int) and d % max(rank, 1) == 0 for d in dims):
            raise _PerSampleError(f"{node.name}: aten.{packet} along dim 0, the dynamic batch dimension, "
                                  f"combines samples, which is not supported{where}")


def _batch_outermost(L, expr) -> bool:
    """dim 0 is the batch, or the batch merged with later dims by a view (batch * T)."""
    if expr == L.batch:
        return True
    if not getattr(expr, "is_Mul", False):
        return False
    rest = [a for a in expr.args if a != L.batch]
    return len(rest) == len(expr.args) - 1 and all(L.batch not in a.free_symbols for a in rest)


# Ops whose `dim` argument (args[1]) may combine samples without changing the shape.
_DIM_OPS = {"_softmax", "softmax", "_log_softmax", "log_softmax", "cumsum", "cumprod", "flip",
            "roll", "sort", "argsort", "logcumsumexp"}
_SHAPE_USERS = {"view", "_unsafe_view", "reshape", "expand", "full", "zeros", "ones", "empty",
                "new_zeros", "new_ones", "new_full", "new_empty", "empty_strided", "full_like"}


@lowers("sym_size")
def _sym_size(L, node, x, dim):
    """A size of a computed tensor: static sizes as they are; the dynamic batch size is 1 in
    the per-sample graph and another dynamic size its maximum, which is right only where it
    is a shape (also through integer arithmetic on sizes), so any other use fails."""
    x = L.ensure_act(x, node.name)
    val = node.meta.get("val")
    if isinstance(val, int):
        return val
    expr = getattr(getattr(val, "node", None), "expr", None)
    if L.batch is not None and expr == L.batch:
        value, what = 1, "the dynamic batch size"
    elif L.dyn is not None and expr in L.dyn.syms:
        value = L.dyn.ranges[L.dyn.syms.index(expr)][1]
        what = f"the dynamic size {L.dyn.names[L.dyn.syms.index(expr)]}"
    else:
        raise EerieError(f"{node.name}: the size {val} is not known at compile time")
    _only_shape_uses(node, what)
    return value


def _only_shape_uses(node, what):
    for u in node.users:
        packet = getattr(u.target, "__name__", "").split(".")[0]
        if u.op == "call_function" and packet in _SHAPE_USERS:
            continue
        if u.op == "call_function" and u.target in (operator.mul, operator.add, operator.sub,
                                                    operator.floordiv):
            _only_shape_uses(u, what)   # size arithmetic: fine if the result is a shape
            continue
        raise EerieError(f"{u.name}: {what} is used as a value "
                         f"({getattr(u.target, '__name__', u.target)}); it may only be a shape"
                         f"{' (' + _src(u) + ')' if _src(u) else ''}")
