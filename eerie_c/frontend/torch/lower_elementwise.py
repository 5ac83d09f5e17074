"""Lowerings of PyTorch elementwise ops: unary activations and math, clamp / hardtanh / relu6,
binary arithmetic (with alpha, division by a constant as a multiply), comparisons and logical
ops, where, and dtype casts (powers: lower_pow.py).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...errors import EerieError
from .registry import LOWERINGS, lowers
from .values import Act
if TYPE_CHECKING:   # for annotations only: the walker imports this module
    from .walker import Lowerer


def _unary(kind, attrs=None):
    def fn(L: Lowerer, node, x, *rest, **kw):
        x = L.ensure_act(x, node.name)
        return L.op(kind, [x], L.t(x).shape, L.meta_dtype(), attrs)
    return fn


for _name, _kind in [("relu", "RELU"), ("sigmoid", "LOGISTIC"), ("tanh", "TANH"), ("abs", "ABS"),
                     ("neg", "NEG"), ("exp", "EXP"), ("log", "LOG"), ("sqrt", "SQRT"),
                     ("rsqrt", "RSQRT"), ("floor", "FLOOR"), ("ceil", "CEIL"), ("round", "ROUND"),
                     ("hardswish", "HARD_SWISH")]:
    LOWERINGS[_name] = _unary(_kind)


@lowers("elu")
def _elu(L, node, x, alpha=1.0, scale=1.0, input_scale=1.0):
    """elu(x, alpha, scale, input_scale) = x * scale where x > 0, else
    expm1(x * input_scale) * (alpha * scale), as torch computes it (selu is elu with alpha
    1.6733 and scale 1.0507, celu divides by alpha). ELU (alpha 1) is the plain case; otherwise
    scale * relu(x) + alpha * scale * min(ELU(x * input_scale), 0): ELU of a negative value is
    its expm1, of a positive one positive (input_scale > 0), so the min keeps the negative
    branch only."""
    x = L.ensure_act(x, node.name)
    shape, dt = L.t(x).shape, L.t(x).dtype
    alpha, scale, input_scale = float(alpha), float(scale), float(input_scale)
    if (alpha, scale, input_scale) == (1.0, 1.0, 1.0):
        return L.op("ELU", [x], shape, dt)
    if dt != "float32" or not input_scale > 0:
        raise EerieError(f"unsupported elu at node {node.name}: alpha {alpha:g}, scale {scale:g}, "
                         f"input_scale {input_scale:g} on {dt} (float32 and input_scale > 0 only)")
    f32 = np.float32
    z = x if input_scale == 1.0 else L.op("MUL", [x, L.act_of(f32(input_scale), x)], shape, dt)
    neg = L.op("MINIMUM", [L.op("ELU", [z], shape, dt), L.act_of(f32(0.0), x)], shape, dt)
    neg = L.op("MUL", [neg, L.act_of(f32(alpha) * f32(scale), x)], shape, dt)
    pos = L.op("RELU", [x], shape, dt)
    if scale != 1.0:
        pos = L.op("MUL", [pos, L.act_of(f32(scale), x)], shape, dt)
    return L.op("ADD", [pos, neg], shape, dt)


@lowers("gelu")
def _gelu(L, node, x, approximate="none"):
    x = L.ensure_act(x, node.name)
    return L.op("GELU", [x], L.t(x).shape, "float32", {"approximate": approximate == "tanh"})


@lowers("leaky_relu")
def _leaky(L, node, x, slope=0.01):
    x = L.ensure_act(x, node.name)
    return L.op("LEAKY_RELU", [x], L.t(x).shape, "float32", {"alpha": float(slope)})


def _clamp_ops(L, x, lo, hi):
    shape, dt = L.t(x).shape, L.t(x).dtype
    if dt == "float32" and lo is not None and hi is not None and float(lo) == 0.0 and float(hi) == 6.0:
        return L.op("RELU6", [x], shape, dt)
    if dt == "float32" and lo is not None and hi is not None and float(lo) == -1.0 and float(hi) == 1.0:
        return L.op("RELU_N1_TO_1", [x], shape, dt)
    if dt == "float32" and lo is not None and float(lo) == 0.0 and hi is None:
        return L.op("RELU", [x], shape, dt)
    if lo is not None:
        x = L.op("MAXIMUM", [x, L.act_of(lo, x)], shape, dt)
    if hi is not None:
        x = L.op("MINIMUM", [x, L.act_of(hi, x)], shape, dt)
    return x


@lowers("clamp")
def _clamp(L, node, x, min=None, max=None):
    x = L.ensure_act(x, node.name)
    if isinstance(min, Act) or isinstance(max, Act):
        y = x
        if min is not None:
            y = L.op("MAXIMUM", [y, L.act_of(min, x)], L.meta_shape(), L.t(x).dtype)
        if max is not None:
            y = L.op("MINIMUM", [y, L.act_of(max, x)], L.meta_shape(), L.t(x).dtype)
        return y
    return _clamp_ops(L, x, min, max)


@lowers("hardtanh")
def _hardtanh(L, node, x, lo=-1.0, hi=1.0):
    return _clamp_ops(L, L.ensure_act(x, node.name), lo, hi)


@lowers("relu6")
def _relu6(L, node, x):
    return _clamp_ops(L, L.ensure_act(x, node.name), 0.0, 6.0)


def _binary(kind):
    def fn(L: Lowerer, node, a, b, alpha=1, **kw):
        like = a if isinstance(a, Act) else b
        if alpha != 1:
            if isinstance(b, Act):
                b = L.op("MUL", [b, L.act_of(alpha, b)], L.t(b).shape, L.t(b).dtype,
                         {"fused_activation_function": "NONE"})
            else:
                b = b * alpha
        if kind == "DIV" and not isinstance(b, Act) and L.t(like).dtype == "float32":
            rounding = kw.get("rounding_mode")
            if rounding is None:
                # Division by a constant: multiply by its float32 reciprocal (within an ulp).
                return L.op("MUL", [a, L.act_of(1.0 / L.torch.as_tensor(b, dtype=L.torch.float64), like)],
                            L.meta_shape(), "float32", {"fused_activation_function": "NONE"})
        if kw.get("rounding_mode") is not None:
            raise EerieError(f"{node.name}: division with rounding_mode is not supported")
        dt = L.meta_dtype()
        ops = [L.act_of(a, like), L.act_of(b, like)]
        for o in ops:
            t = L.tensors[o.tid if isinstance(o, Act) else o]
            if t.dtype != dt:
                raise EerieError(f"{node.name}: mixed operand types ({t.dtype} with a {dt} result) "
                                 f"are not supported")
        return L.op(kind, ops, L.meta_shape(), dt, {"fused_activation_function": "NONE"})
    return fn


for _name, _kind in [("add", "ADD"), ("sub", "SUB"), ("mul", "MUL"), ("div", "DIV"),
                     ("maximum", "MAXIMUM"), ("minimum", "MINIMUM")]:
    LOWERINGS[_name] = _binary(_kind)


def _compare(kind):
    def fn(L: Lowerer, node, a, b):
        like = a if isinstance(a, Act) else b
        return L.op(kind, [L.act_of(a, like), L.act_of(b, like)], L.meta_shape(), "bool")
    return fn


for _name, _kind in [("eq", "EQUAL"), ("ne", "NOT_EQUAL"), ("lt", "LESS"), ("le", "LESS_EQUAL"),
                     ("gt", "GREATER"), ("ge", "GREATER_EQUAL")]:
    LOWERINGS[_name] = _compare(_kind)


def _as_bool(L, v, like):
    """A logical op's operand: bools as they are, anything else `!= 0` (torch's truth)."""
    v = L.act_of(v, like)
    t = L.tensors[v.tid if isinstance(v, Act) else v]
    if t.dtype == "bool":
        return v
    return L.op("NOT_EQUAL", [v, L.act_of(0, v if isinstance(v, Act) else None)], t.shape, "bool")


def _logical(kind):
    def fn(L: Lowerer, node, a, b):
        like = a if isinstance(a, Act) else b
        # xor of two bools is their inequality
        return L.op(kind, [_as_bool(L, a, like), _as_bool(L, b, like)], L.meta_shape(), "bool")
    return fn


for _name, _kind in [("logical_and", "LOGICAL_AND"), ("logical_or", "LOGICAL_OR"),
                     ("logical_xor", "NOT_EQUAL")]:
    LOWERINGS[_name] = _logical(_kind)


@lowers("logical_not")
def _logical_not(L, node, x):
    x = _as_bool(L, L.ensure_act(x, node.name), None)
    return L.op("LOGICAL_NOT", [x], L.t(x).shape, "bool")


def _bitwise(kind):
    def fn(L: Lowerer, node, a, b):
        if L.meta_dtype() != "bool":
            raise EerieError(f"{node.name}: bitwise ops on integers are not supported (on bools they are)")
        return _compare(kind)(L, node, a, b)
    return fn


LOWERINGS["bitwise_and"] = _bitwise("LOGICAL_AND")
LOWERINGS["bitwise_or"] = _bitwise("LOGICAL_OR")
LOWERINGS["bitwise_not"] = _unary("LOGICAL_NOT")


@lowers("where")
def _where(L, node, c, a, b):
    like = a if isinstance(a, Act) else b if isinstance(b, Act) else None
    dt = L.meta_dtype()
    ops = []
    for v in (a, b):
        ops.append(v if isinstance(v, Act) else L.const(v if isinstance(v, L.torch.Tensor) else L.torch.tensor(v), dt))
    if not isinstance(c, Act):
        c = L.const(c, "bool")
    del like
    return L.op("SELECT_V2", [c, *ops], L.meta_shape(), dt)


@lowers("_to_copy")
def _to_copy(L, node, x, dtype=None, **kw):
    dt = L.meta_dtype()
    if dt == L.t(x).dtype:
        return x
    return L.op("CAST", [x], L.t(x).shape, dt)
