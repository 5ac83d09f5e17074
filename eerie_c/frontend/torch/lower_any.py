"""Lowerings of aten.any / aten.all over dims of a computed tensor (the ones known at compile
time are evaluated by torch in the walker): the truth of each element (`!= 0`, a bool as it
is) as float32 0 / 1, REDUCE_MAX (any) or REDUCE_MIN (all) over the dims, then `!= 0`.
nn.TransformerEncoderLayer's attention checks for fully masked rows this way.
"""
from __future__ import annotations

import numpy as np

from .lower_reduce import _reduce_axes
from .registry import lowers


def _any_all(L, node, x, dims=None, keepdim=False, **kw):
    x = L.ensure_act(x, node.name)
    shape = L.t(x).shape
    if L.t(x).dtype != "bool":
        x = L.op("NOT_EQUAL", [x, L.act_of(0, x)], shape, "bool")
    f = L.op("CAST", [x], shape, "float32")
    kind = "REDUCE_MAX" if node.target.__name__.startswith("any") else "REDUCE_MIN"
    axes = _reduce_axes(L, f, dims)
    r = L.op(kind, [f, L.const(np.array(axes, np.int32), "int32", "axes")], L.meta_shape(),
             "float32", {"keep_dims": bool(keepdim)})
    return L.op("NOT_EQUAL", [r, L.act_of(0.0, r)], L.meta_shape(), "bool")


@lowers("any", "all")
def _any(L, node, x, *rest, **kw):
    return _any_all(L, node, x, *rest, **kw)
