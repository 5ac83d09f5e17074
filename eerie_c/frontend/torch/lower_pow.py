"""Lowerings of PyTorch powers: pow (tensor ** number, tensor ** tensor, number ** tensor) and
reciprocal (`1 / x` and `c / x` export as reciprocal times c).

torch's semantics, which these follow (std::pow's):
* an integer exponent is repeated multiplication, defined for every base (negative ones too):
  x ** n is built by squaring (log2(n) SQUARE / MUL ops), x ** -n is 1 / x ** n, x ** 0 is 1;
* 0.5 and -0.5 are SQRT and RSQRT, as torch computes them;
* any other exponent is exp(e * log x): NaN for a negative base (logf of a negative number is
  NaN), 0 or inf for a zero base, as torch gives;
* a tensor exponent (or a number raised to a tensor) is exp(e * log|x|), then per element: 1
  where e == 0 (0 * log 0 would be NaN), the sign (-1)^e where x < 0 and e is an integer, NaN
  where x < 0 and e is not.
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import EerieError
from .registry import lowers
from .values import Act

_NONE = {"fused_activation_function": "NONE"}


def _scalar(v):
    """A Python number for a number or a one-element constant tensor; None otherwise."""
    if isinstance(v, (int, float, bool)):
        return float(v)
    if hasattr(v, "numel") and not isinstance(v, Act) and v.numel() == 1:
        return float(v.reshape(()).item())
    return None


def _as_float(L, x: Act) -> Act:
    if L.t(x).dtype == "float32":
        return x
    return L.op("CAST", [x], L.t(x).shape, "float32")


def _int_power(L, x: Act, n: int) -> Act:
    """x ** n for n >= 1 by binary exponentiation (SQUARE for float, MUL for int32)."""
    shape, dt = L.t(x).shape, L.t(x).dtype
    result, base = None, x
    while n:
        if n & 1:
            result = base if result is None else L.op("MUL", [result, base], shape, dt, _NONE)
        n >>= 1
        if n:
            base = (L.op("SQUARE", [base], shape, dt) if dt == "float32"
                    else L.op("MUL", [base, base], shape, dt, _NONE))
    return result


def _reciprocal_of(L, x: Act) -> Act:
    one = L.const(np.array(1.0, np.float32), "float32", "one")
    return L.op("DIV", [one, x], L.t(x).shape, "float32", _NONE)


def _const_exponent(L, node, x: Act, e: float):
    shape = L.meta_shape()
    if e == 0.0:
        return L.torch.ones(shape, dtype=L.torch.int32 if L.meta_dtype() == "int32" else L.torch.float32)
    if e == int(e) and abs(e) <= 2 ** 16:
        n = int(e)
        if L.t(x).dtype != "float32":
            if n < 0 or L.meta_dtype() != L.t(x).dtype:
                raise EerieError(f"{node.name}: pow of a {L.t(x).dtype} tensor to {e:g} is not supported "
                                 f"(non-negative integer exponents are)")
            return _int_power(L, x, n)
        y = _int_power(L, x, abs(n))
        return y if n > 0 else _reciprocal_of(L, y)
    x = _as_float(L, x)
    if e == 0.5:
        return L.op("SQRT", [x], shape, "float32")
    if e == -0.5:
        return L.op("RSQRT", [x], shape, "float32")
    lg = L.op("LOG", [x], shape, "float32")     # NaN below zero, -inf at zero: as torch
    scaled = L.op("MUL", [lg, L.const(np.array(e, np.float32), "float32", "exponent")], shape,
                  "float32", _NONE)
    return L.op("EXP", [scaled], shape, "float32")


def _general(L, node, x, e):
    """x ** e where e is a tensor (computed or constant) or x is a number."""
    torch = L.torch
    shape = L.meta_shape()

    def f(kind, ins, dt="float32", attrs=None):
        return L.op(kind, ins, shape, dt, attrs)

    def cf(v, label):
        return L.const(np.asarray(v, np.float32), "float32", label)

    # log |x| and where x < 0 (an Act, a constant bool array, or None when never)
    if isinstance(x, Act):
        x = _as_float(L, x)
        lg = f("LOG", [f("ABS", [x])])
        neg = f("LESS", [x, cf(0.0, "zero")], "bool")
    else:
        xv = torch.as_tensor(x, dtype=torch.float64).numpy()
        with np.errstate(divide="ignore"):
            lg = cf(np.log(np.abs(xv)), "log_base")
        neg = (xv < 0) if (xv < 0).any() else None
    if isinstance(e, Act):
        e = _as_float(L, e)
        ev = None
    else:
        ev = torch.as_tensor(e, dtype=torch.float64).numpy()
        e = cf(ev, "exponent")
    r = f("EXP", [f("MUL", [lg, e], attrs=_NONE)])
    one = cf(1.0, "one")
    if ev is None:
        r = f("SELECT_V2", [f("EQUAL", [e, cf(0.0, "zero")], "bool"), one, r])
    elif (ev == 0).any():
        r = f("SELECT_V2", [L.const(ev == 0, "bool", "zero_exponent"), one, r])
    if neg is None:
        return r
    # A negative base: (-1)^e * |x|^e for an integer e, NaN for any other.
    if ev is None:
        is_int = f("EQUAL", [f("FLOOR", [e]), e], "bool")
        half = f("MUL", [e, cf(0.5, "half")], attrs=_NONE)
        odd = f("NOT_EQUAL", [f("FLOOR", [half]), half], "bool")
    else:
        is_int = L.const(np.floor(ev) == ev, "bool", "integer_exponent")
        odd = L.const(np.floor(ev / 2) != ev / 2, "bool", "odd_exponent")
    signed = f("SELECT_V2", [odd, f("NEG", [r]), r])
    at_neg = f("SELECT_V2", [is_int, signed, cf(math.nan, "nan")])
    if not isinstance(neg, Act):
        neg = L.const(neg, "bool", "negative_base")
    return f("SELECT_V2", [neg, at_neg, r])


@lowers("pow")
def _pow(L, node, x, e):
    es = _scalar(e)
    if isinstance(x, Act) and es is not None:
        if math.isnan(es) or math.isinf(es):
            raise EerieError(f"{node.name}: pow with exponent {es} is not supported")
        return _const_exponent(L, node, x, es)
    if L.meta_dtype() != "float32":
        raise EerieError(f"{node.name}: pow with a tensor exponent needs a float result")
    return _general(L, node, x, e)


@lowers("reciprocal")
def _reciprocal(L, node, x):
    return _reciprocal_of(L, _as_float(L, L.ensure_act(x, node.name)))
