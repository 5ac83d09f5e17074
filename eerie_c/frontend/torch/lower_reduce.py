"""Lowerings of PyTorch reductions: mean, sum, amax / amin, max / min (over everything or
along a dim; the elementwise overload too), argmax / argmin, and softmax / log_softmax along
any dim.
"""
from __future__ import annotations

import numpy as np

from ...errors import EerieError
from .lower_elementwise import _binary
from .registry import lowers


def _reduce_axes(L, x, dims):
    rank = len(L.t(x).shape)
    if dims is None or dims == []:
        return list(range(rank))
    dims = [dims] if isinstance(dims, int) else list(dims)
    return sorted({d % rank for d in dims})


@lowers("mean")
def _mean(L, node, x, dims=None, keepdim=False, **kw):
    x = L.ensure_act(x, node.name)
    axes = _reduce_axes(L, x, dims)
    return L.op("MEAN", [x, L.const(np.array(axes, np.int32), "int32", "axes")], L.meta_shape(),
                "float32", {"keep_dims": bool(keepdim)})


@lowers("sum")
def _sum(L, node, x, dims=None, keepdim=False, **kw):
    x = L.ensure_act(x, node.name)
    axes = _reduce_axes(L, x, dims)
    return L.op("SUM", [x, L.const(np.array(axes, np.int32), "int32", "axes")], L.meta_shape(),
                "float32", {"keep_dims": bool(keepdim)})


@lowers("amax", "amin")
def _amax(L, node, x, dims=None, keepdim=False):
    x = L.ensure_act(x, node.name)
    kind = "REDUCE_MAX" if node.target.__name__.startswith("amax") else "REDUCE_MIN"
    axes = _reduce_axes(L, x, dims)
    return L.op(kind, [x, L.const(np.array(axes, np.int32), "int32", "axes")], L.meta_shape(),
                L.t(x).dtype, {"keep_dims": bool(keepdim)})


def _softmax_like(L, node, x, dim, log):
    x = L.ensure_act(x, node.name)
    rank = len(L.t(x).shape)
    dim %= max(rank, 1)
    perm = list(range(rank))
    if rank and dim != rank - 1:
        perm[dim], perm[-1] = perm[-1], perm[dim]
        x = L.transpose(x, perm)
    y = L.op("SOFTMAX", [x], L.t(x).shape, "float32", {"beta": 1.0})
    if log:
        y = L.op("LOG", [y], L.t(y).shape, "float32")
    if perm != list(range(rank)):
        y = L.transpose(y, perm)
    return y


@lowers("_softmax", "softmax")
def _softmax(L, node, x, dim, half_to_float=False):
    return _softmax_like(L, node, x, dim, False)


@lowers("_log_softmax", "log_softmax")
def _log_softmax(L, node, x, dim, half_to_float=False):
    return _softmax_like(L, node, x, dim, True)


@lowers("max", "min")
def _max_min(L, node, x, *rest, **kw):
    is_max = node.target.__name__.startswith("max")
    overload = node.target.__name__.split(".")[-1]
    if overload == "other":          # elementwise max(x, y)
        return _binary("MAXIMUM" if is_max else "MINIMUM")(L, node, x, rest[0])
    x = L.ensure_act(x, node.name)
    kind = "REDUCE_MAX" if is_max else "REDUCE_MIN"
    if overload == "default":       # over everything, a 0-d result
        axes, keep = list(range(len(L.t(x).shape))), False
    else:                            # max.dim: (values, indices); only values are supported
        axes, keep = [rest[0] % len(L.t(x).shape)], bool(rest[1]) if len(rest) > 1 else False
        if len(node.users) and any(u.args[1] != 0 for u in node.users):
            raise EerieError(f"{node.name}: the indices of max/min along a dim are not supported")
    y = L.op(kind, [x, L.const(np.array(axes, np.int32), "int32", "axes")], L.meta_shape(),
             L.t(x).dtype, {"keep_dims": keep})
    return y if overload == "default" else (y, None)


@lowers("argmax", "argmin")
def _argmax(L, node, x, dim=None, keepdim=False):
    """ARG_MAX / ARG_MIN along one dim (over everything: of the flattened tensor); ties give
    the first index, as torch's do. int32 indices (torch's int64 are int32 in the IR)."""
    x = L.ensure_act(x, node.name)
    kind = "ARG_MAX" if node.target.__name__.startswith("argmax") else "ARG_MIN"
    shape = list(L.t(x).shape)
    if dim is None:
        x, axis = L.reshape(x, (int(np.prod(shape)),)), 0
        shape = [int(np.prod(shape))]
    else:
        axis = dim % max(len(shape), 1)
    out = shape[:axis] + shape[axis + 1:]
    y = L.op(kind, [x, L.const(np.array([axis], np.int32), "int32", "axis")], out, "int32")
    return L.reshape(y, L.meta_shape())
