"""Symbolic sizes of a program with dynamic dimensions (frontend/torch/dynamic.py): the
torch SymInts as sympy expressions, their maximum (the code is sized for it), a check that no
extent is larger below the maximum, and C expressions that compute an extent at run time."""
from __future__ import annotations

import itertools

import numpy as np

from ...errors import EerieError


class SymbolicSizes:
    """The dynamic sizes of one program as sympy symbols (the batch, if any, kept apart), with
    their C parameter names and (min, max) ranges: sizes evaluated at the maximum, checked to be
    largest there, and printed as C int arithmetic over the NAME_invoke size arguments."""

    def __init__(self, syms, names, ranges, batch=None):
        self.syms = list(syms)          # non-batch symbols, in parameter order
        self.names = list(names)
        self.ranges = list(ranges)      # (min, max)
        self.batch = batch              # the per-sample batch symbol (extent 1 here), or None
        self._monotone_checked: set = set()

    def sub(self, d):
        """A torch size (int or SymInt) as an int or a sympy expression, batch set to 1."""
        if isinstance(d, (int, np.integer)):
            return int(d)
        e = d.node.expr if hasattr(d, "node") else d
        if self.batch is not None:
            e = e.subs(self.batch, 1)
        if getattr(e, "is_number", False):
            return int(e)
        return e

    def max_of(self, e) -> int:
        if isinstance(e, int):
            return e
        self._check_monotone(e)
        v = e.subs({s: hi for s, (_, hi) in zip(self.syms, self.ranges)})
        if self.batch is not None:
            v = v.subs(self.batch, 1)
        try:
            return int(v)
        except TypeError:
            raise EerieError(f"the size {e} is not known at compile time (dynamic dims other than "
                             f"those of the inputs are not supported)") from None

    def _check_monotone(self, e):
        """The code is sized for each extent at the maximum sizes: no extent may be larger at
        smaller sizes."""
        if e in self._monotone_checked:
            return
        free = [s for s in self.syms if s in e.free_symbols]
        grids = [range(lo, hi + 1) for s, (lo, hi) in zip(self.syms, self.ranges) if s in free]
        if int(np.prod([len(r) for r in grids])) <= 4096:
            top = int(e.subs({s: hi for s, (_, hi) in zip(self.syms, self.ranges)}))
            for combo in itertools.product(*grids):
                v = int(e.subs(dict(zip(free, combo))))
                if v > top:
                    raise EerieError(f"the extent {e} is larger ({v}) at sizes {list(combo)} than at the "
                                     f"maximum ({top}): eerie-c sizes code for the maximum")
        self._monotone_checked.add(e)

    def c_expr(self, e, ref) -> str:
        """A sympy size expression as C int arithmetic; ref(k) is how symbol k is read."""
        import sympy
        if isinstance(e, int) or getattr(e, "is_Integer", False):
            return str(int(e))
        if e.is_Symbol:
            if e not in self.syms:
                raise EerieError(f"size {e} is not a dynamic input dimension")
            return ref(self.syms.index(e))
        name = type(e).__name__
        args = [self.c_expr(a, ref) for a in e.args]
        if isinstance(e, sympy.Add):
            return "(" + " + ".join(args) + ")"
        if isinstance(e, sympy.Mul):
            if any(a.is_Rational and not a.is_Integer for a in e.args):
                raise EerieError(f"the size expression {e} is not an integer expression")
            return "(" + " * ".join(args) + ")"
        if name == "FloorDiv":
            a, b = args
            return f"(({a}) >= 0 ? ({a}) / ({b}) : -((-({a}) + ({b}) - 1) / ({b})))"
        if name == "CeilDiv":
            a, b = args
            return f"(({a}) >= 0 ? (({a}) + ({b}) - 1) / ({b}) : -((-({a})) / ({b})))"
        if name in ("Max", "Min"):
            out = args[0]
            for a in args[1:]:
                op = ">" if name == "Max" else "<"
                out = f"(({out}) {op} ({a}) ? ({out}) : ({a}))"
            return out
        if name in ("Mod", "PythonMod"):
            a, b = args
            return f"((({a}) % ({b}) + ({b})) % ({b}))"
        raise EerieError(f"the size expression {e} ({name}) is not supported for dynamic dims")

    def value(self, e, sizes: dict) -> int:
        """e at actual sizes {symbol: int} (batch included)."""
        if isinstance(e, int):
            return e
        return int(e.subs(sizes))
