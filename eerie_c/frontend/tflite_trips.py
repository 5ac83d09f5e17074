"""Compile-time trip counts of TFLite WHILE loops (frontend/tflite_control.py).

A loop is proved bounded when its condition (or one side of a LOGICAL_AND; both sides of a
LOGICAL_OR) compares an int32 counter with a compile-time value: the counter starts at a
constant and the body steps it by a constant ADD / SUB; the other side is a constant or a loop
value the body hands back unchanged. The counter is then run forward at compile time (int32
wrap-around included) until the comparison fails, so the bound is exact, not a formula's guess.
"""
from __future__ import annotations

import operator

import numpy as np

from ..ir import Graph, Tensor

# A counted loop is proved by running its counter at compile time, up to this many trips.
MAX_PROVED_TRIPS = 1_000_000
_COMPARE = {"LESS": operator.lt, "LESS_EQUAL": operator.le, "GREATER": operator.gt,
            "GREATER_EQUAL": operator.ge, "EQUAL": operator.eq, "NOT_EQUAL": operator.ne}


def _wrap32(v: int) -> int:
    return (v + 2 ** 31) % 2 ** 32 - 2 ** 31


def prove_trips(tensors: dict[str, Tensor], resources: set[str], inits, vs, cond_g: Graph,
                body_g: Graph, body_out) -> int | None:
    """Most body runs of a loop whose condition (or one side of its LOGICAL_AND) compares
    an int32 counter, started at a constant and stepped by a constant ADD / SUB in the
    body, with a constant; None when the loop does not have that form."""
    cprod = {t: o for o in cond_g.ops for t in o.outputs}
    bprod = {t: o for o in body_g.ops for t in o.outputs}
    carried = {v: k for k, v in enumerate(vs)}

    def origin(t, prod):
        for _ in range(64):   # follow copies back to their source
            o = prod.get(t)
            if o is None or o.kind != "CF_COPY":
                break
            t = o.inputs[0]
        return t

    def const_int(t):
        x = tensors.get(t)
        if x is not None and x.is_const and x.size == 1 and x.dtype == "int32":
            return int(np.asarray(x.data).reshape(-1)[0])
        return None

    def value(t):
        """A compile-time value: a constant, or a loop value the body hands back unchanged."""
        t = origin(t, cprod)
        v = const_int(t)
        if v is None and t in carried:
            k = carried[t]
            if body_out[k] not in resources and origin(body_out[k], bprod) == t:
                v = const_int(inits[k])
        return v

    def counter(t):
        """(start, step) of a loop value stepped by a constant in the body."""
        t = origin(t, cprod)
        if t not in carried:
            return None
        k = carried[t]
        x = tensors[t]
        start = const_int(inits[k])
        p = bprod.get(origin(body_out[k], bprod)) if body_out[k] not in resources else None
        if start is None or x.dtype != "int32" or x.size != 1 or p is None or len(p.inputs) != 2:
            return None
        if p.attrs.get("fused_activation_function", "NONE") not in ("NONE", None, 0):
            return None
        a, b = (origin(i, bprod) for i in p.inputs)
        if p.kind == "ADD" and a == t and const_int(b) is not None:
            return start, const_int(b)
        if p.kind == "ADD" and b == t and const_int(a) is not None:
            return start, const_int(a)
        if p.kind == "SUB" and a == t and const_int(b) is not None:
            return start, -const_int(b)
        return None

    def bound(t, depth=0):
        p = cprod.get(origin(t, cprod))
        if p is None or depth > 16:
            return None
        if p.kind in ("LOGICAL_AND", "LOGICAL_OR") and len(p.inputs) == 2:
            b = [bound(i, depth + 1) for i in p.inputs]
            if p.kind == "LOGICAL_AND":
                b = [x for x in b if x is not None]
                return min(b) if b else None
            return None if None in b else max(b)
        if p.kind not in _COMPARE or len(p.inputs) != 2:
            return None
        cmp = _COMPARE[p.kind]
        for side in (0, 1):
            c, other = counter(p.inputs[side]), value(p.inputs[1 - side])
            if c is None or other is None:
                continue
            v, step = c
            for n in range(MAX_PROVED_TRIPS + 1):
                if not (cmp(v, other) if side == 0 else cmp(other, v)):
                    return n
                v = _wrap32(v + step)
            return None
        return None

    return bound(cond_g.outputs[0])
