"""Lowerings of PyTorch's layer_norm and group_norm (native_layer_norm / native_group_norm),
decomposed into existing float ops, as torch computes them:

    mean = MEAN(x), d = x - mean, var = MEAN(d * d), rstd = RSQRT(var + eps),
    y = d * rstd (* weight) (+ bias)

over the normalized trailing dims (layer_norm) or over each group of channels with
everything after them (group_norm: x viewed as [N, G, C / G * H * W]). The variance is the
biased one (divided by the count), as torch's. The op's other two results, mean and rstd,
are the intermediate values (torch's shapes: keepdim for layer_norm, [N, G] for group_norm).
"""
from __future__ import annotations

import numpy as np

from ...errors import EerieError
from .registry import lowers
from .values import Act

NONE = {"fused_activation_function": "NONE"}


def _binary(L, kind, a, b, shape):
    return L.op(kind, [a, L.act_of(b, a)], shape, "float32", NONE)


def _normalize(L, x, axes, eps):
    """(d * rstd, mean, rstd) of x over `axes` (kept as size-1 dims)."""
    shape = L.t(x).shape
    kept = tuple(1 if k in axes else n for k, n in enumerate(shape))
    ax = L.const(np.array(axes, np.int32), "int32", "axes")
    mean = L.op("MEAN", [x, ax], kept, "float32", {"keep_dims": True})
    d = _binary(L, "SUB", x, mean, shape)
    sq = L.op("MUL", [d, d], shape, "float32", NONE)
    var = L.op("MEAN", [sq, ax], kept, "float32", {"keep_dims": True})
    rstd = L.op("RSQRT", [_binary(L, "ADD", var, float(eps), kept)], kept, "float32")
    return _binary(L, "MUL", d, rstd, shape), mean, rstd


def _affine(L, y, weight, bias, param_shape):
    """y * weight + bias, each (when given) viewed as `param_shape` to broadcast."""
    shape = L.t(y).shape
    for kind, p in (("MUL", weight), ("ADD", bias)):
        if p is None:
            continue
        p = L.reshape(p, param_shape) if isinstance(p, Act) else p.reshape(param_shape)
        y = _binary(L, kind, y, p, shape)
    return y


def _float_act(L, node, x):
    x = L.ensure_act(x, node.name)
    if L.t(x).dtype != "float32":
        raise EerieError(f"{node.name}: normalization of a {L.t(x).dtype} tensor is not supported")
    return x


@lowers("native_layer_norm")
def _layer_norm(L, node, x, normalized_shape, weight=None, bias=None, eps=1e-5):
    x = _float_act(L, node, x)
    rank, k = len(L.t(x).shape), len(normalized_shape)
    if not 0 < k <= rank or list(L.t(x).shape[rank - k:]) != [int(n) for n in normalized_shape]:
        raise EerieError(f"{node.name}: normalized_shape {list(normalized_shape)} does not end "
                         f"the input's shape {list(L.t(x).shape)}")
    y, mean, rstd = _normalize(L, x, list(range(rank - k, rank)), eps)
    return _affine(L, y, weight, bias, tuple(int(n) for n in normalized_shape)), mean, rstd


@lowers("native_group_norm")
def _group_norm(L, node, x, weight, bias, n, c, hxw, groups, eps):
    x = _float_act(L, node, x)
    shape = L.t(x).shape
    n, c, hxw, groups = int(n), int(c), int(hxw), int(groups)
    if c % groups or int(np.prod(shape)) != n * c * hxw:
        raise EerieError(f"{node.name}: {groups} groups of {c} channels do not fit {list(shape)}")
    g = L.reshape(x, (n, groups, c // groups * hxw))
    y, mean, rstd = _normalize(L, g, [2], eps)
    y = L.reshape(y, shape)
    y = _affine(L, y, weight, bias, (c,) + (1,) * (len(shape) - 2))
    if not _stats_read(node):
        return y, None, None
    return y, L.reshape(mean, (n, groups)), L.reshape(rstd, (n, groups))


def _stats_read(node) -> bool:
    """Whether anything reads the op's mean or rstd (results 1 and 2)."""
    return any(u.args[1] != 0 for u in node.users)
