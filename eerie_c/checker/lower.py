"""The step of `eerie_c.check` after a successful export: the Core ATen graph lowered through
eerie-c's own frontend, noting every node it cannot lower (with the user's line) and carrying
on past it, then every IR op checked against the kernel registry.
"""
from __future__ import annotations

import re

from ..errors import EerieError
from .findings import _Collector, _node_frame, _one_line, _quiet, _user_frame_in_text


class _Poison:
    """Stands for the result of a node that could not be lowered: whatever uses it is not
    reported again."""

    def __repr__(self):
        return "<not lowered>"


POISON = _Poison()


def _poisoned(v) -> bool:
    if isinstance(v, _Poison):
        return True
    if isinstance(v, (list, tuple)):
        return any(_poisoned(x) for x in v)
    if isinstance(v, dict):
        return any(_poisoned(x) for x in v.values())
    return False


def _collecting_lowerer(ep, name, max_iterations):
    from ..frontend.torch.walker import Lowerer

    class Collecting(Lowerer):
        """The frontend's own walk, noting each node it cannot lower and carrying on."""

        def __init__(self, *a):
            super().__init__(*a)
            self.problems: list = []

        def call(self, node, args, kwargs, env):
            if _poisoned((args, kwargs)):
                return POISON
            before = len(self.problems)
            try:
                return super().call(node, args, kwargs, env)
            except Exception as e:
                if len(self.problems) == before:
                    msg = str(e) if isinstance(e, EerieError) else f"{type(e).__name__}: {e}"
                    self.problems.append((node, msg))
                    return self.stand_in(node.meta.get("val"))
                return POISON

        def stand_in(self, val):
            """A tensor of the node's shape in place of its result, so the ops after it are
            still checked; POISON when the shape is not static."""
            if isinstance(val, (list, tuple)):
                parts = [self.stand_in(v) for v in val]
                return POISON if any(p is POISON for p in parts) else type(val)(parts)
            if not isinstance(val, self.torch.Tensor):
                return POISON
            try:
                from ..frontend.torch.values import _ir_dtype
                return self.tensor(tuple(int(d) for d in val.shape), _ir_dtype(val.dtype), "not_lowered")
            except Exception:
                return POISON

        def finish_outputs(self, outs, g, what):
            if self.problems or _poisoned(outs):
                return []
            return super().finish_outputs(outs, g, what)

    return Collecting(ep, name, max_iterations)


def _ir_ops(g):
    for op in g.ops:
        if op.regions:
            for r in op.regions:
                yield from _ir_ops(r)
        else:
            yield op


def _lower(ep, name, max_iterations, col: _Collector):
    """The exported program through eerie-c's frontend; returns the IR graph or None."""
    from ..kernels import REGISTRY, load_all, op_dtype
    from ..frontend.torch.capture import _decompositions   # compile's table: the same ops kept whole
    try:
        with _quiet():
            ep = ep.run_decompositions(_decompositions())
    except Exception as e:
        col.add("other", f"decomposition to the Core ATen opset failed: {_one_line(e)}", None, "eerie-c frontend")
        return None
    L = _collecting_lowerer(ep, name, max_iterations)
    try:
        g = L.run()
    except Exception as e:   # before the walk: inputs (dynamic dimensions, non-tensor inputs)
        msg = str(e) if isinstance(e, EerieError) else f"{type(e).__name__}: {e}"
        col.add(None, msg, None, "eerie-c frontend")
        return None
    for node, msg in L.problems:
        where = _node_frame(node)
        reason = re.sub(r"\s*\(File \"[^\"]*\", line \d+, in [^)]*\)$", "", msg)
        if getattr(node.target, "__name__", "").startswith("_local_scalar_dense"):
            reason = f"{msg} (the value of a tensor taken as a Python number)"
        col.add(None, reason, where, "eerie-c frontend")
    if L.problems:
        return None
    load_all()
    bad = False
    for op in _ir_ops(g):
        if op.kind in ("IF", "WHILE"):
            continue
        info, dt = REGISTRY.get(op.kind), op_dtype(op, g)
        if info is not None and dt in info.dtypes:
            continue
        bad = True
        what = op.kind if info is None else f"{op.kind} with {dt} tensors"
        where = _user_frame_in_text(op.attrs.get("torch_source", "") or "")
        col.add("op", f"eerie-c has no kernel for {what} (made from torch node {op.name})", where,
                "eerie-c kernels")
    return None if bad else g
