"""Integer constant expressions and value intervals over the generated C's AST.

Array sizes must be integer constant expressions; loop bounds may also use the variables
of enclosing bounded loops, whose value ranges are known, so expressions are evaluated as
intervals (a constant is an interval of width zero).  Also the integer types a loop
variable may have, with their value ranges.
"""
from __future__ import annotations

import re

from pycparser import c_ast

# Integer types a loop variable may have, with their value ranges.  `int`, `long` and
# `size_t` are taken at their smallest width among our targets (32 bits), which only makes
# the overflow check stricter.
INT_RANGES = {
    "char": (-128, 127), "signed char": (-128, 127), "int8_t": (-128, 127),
    "unsigned char": (0, 255), "uint8_t": (0, 255),
    "short": (-32768, 32767), "short int": (-32768, 32767), "signed short": (-32768, 32767),
    "int16_t": (-32768, 32767), "unsigned short": (0, 65535), "uint16_t": (0, 65535),
    "int": (-2**31, 2**31 - 1), "signed": (-2**31, 2**31 - 1), "signed int": (-2**31, 2**31 - 1),
    "long": (-2**31, 2**31 - 1), "long int": (-2**31, 2**31 - 1), "int32_t": (-2**31, 2**31 - 1),
    "int_fast8_t": (-128, 127), "int_fast16_t": (-32768, 32767), "int_fast32_t": (-2**31, 2**31 - 1),
    "ptrdiff_t": (-2**31, 2**31 - 1),
    "unsigned": (0, 2**32 - 1), "unsigned int": (0, 2**32 - 1), "unsigned long": (0, 2**32 - 1),
    "uint32_t": (0, 2**32 - 1), "size_t": (0, 2**32 - 1), "uint_fast32_t": (0, 2**32 - 1),
    "long long": (-2**63, 2**63 - 1), "int64_t": (-2**63, 2**63 - 1),
    "unsigned long long": (0, 2**64 - 1), "uint64_t": (0, 2**64 - 1),
}
UNSIGNED_TYPES = {k for k, (lo, _) in INT_RANGES.items() if lo == 0}
_SIZEOF = {"char": 1, "signed char": 1, "unsigned char": 1, "int8_t": 1, "uint8_t": 1,
           "short": 2, "unsigned short": 2, "int16_t": 2, "uint16_t": 2, "int": 4,
           "unsigned": 4, "unsigned int": 4, "int32_t": 4, "uint32_t": 4, "float": 4,
           "long long": 8, "int64_t": 8, "uint64_t": 8, "double": 8}



def _c_int(text: str) -> int | None:
    """The value of a C integer literal (hex, binary, octal or decimal, any suffix)."""
    t = text.rstrip("uUlL")
    try:
        if t.lower().startswith("0x"):
            return int(t, 16)
        if t.lower().startswith("0b"):
            return int(t, 2)
        if len(t) > 1 and t.startswith("0"):
            return int(t, 8)
        return int(t)
    except ValueError:
        return None


def _cdiv(a: int, b: int) -> int:
    """C's integer division, which truncates toward zero (Python's // floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def type_name(node) -> str | None:
    """'unsigned int' etc. for a Typename/Decl whose type is a plain identifier type."""
    t = node.type if isinstance(node, (c_ast.Typename, c_ast.Decl)) else node
    if isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.IdentifierType):
        return " ".join(t.type.names)
    return None


class IntervalEval:
    """Integer constant expressions, and intervals over enclosing loop variables."""

    def __init__(self, enums: dict[str, int]):
        self.enums = enums

    def const(self, e) -> int | None:
        r = self.interval(e, {})
        return r[0] if r is not None and r[0] == r[1] else None

    def interval(self, e, env: dict[str, tuple[int, int]]) -> tuple[int, int] | None:
        if isinstance(e, c_ast.Constant):
            if e.type in ("int", "unsigned int", "long int", "unsigned long int", "long long int",
                          "unsigned long long int") or e.type.endswith("int"):
                v = _c_int(e.value)
                return None if v is None else (v, v)
            if e.type == "char" and len(e.value) == 3:
                return (ord(e.value[1]),) * 2
            return None
        if isinstance(e, c_ast.ID):
            if e.name in env:
                return env[e.name]
            if e.name in self.enums:
                return (self.enums[e.name],) * 2
            return None
        if isinstance(e, c_ast.Cast):
            tn = type_name(e.to_type)
            if tn not in INT_RANGES:
                return None
            r = self.interval(e.expr, env)
            lo, hi = INT_RANGES[tn]
            return r if r is not None and lo <= r[0] and r[1] <= hi else None
        if isinstance(e, c_ast.UnaryOp):
            if e.op == "sizeof":
                tn = type_name(e.expr) if isinstance(e.expr, c_ast.Typename) else None
                return (_SIZEOF[tn],) * 2 if tn in _SIZEOF else None
            r = self.interval(e.expr, env)
            if r is None:
                return None
            if e.op == "-":
                return (-r[1], -r[0])
            if e.op == "+":
                return r
            if r[0] == r[1]:
                if e.op == "~":
                    return (~r[0],) * 2
                if e.op == "!":
                    return (int(not r[0]),) * 2
            return None
        if isinstance(e, c_ast.TernaryOp):
            c = self.interval(e.cond, env)
            a, b = self.interval(e.iftrue, env), self.interval(e.iffalse, env)
            if c is not None and (c[0] > 0 or c[1] < 0):
                return a
            if c == (0, 0):
                return b
            if a is None or b is None:
                return None
            return (min(a[0], b[0]), max(a[1], b[1]))
        if isinstance(e, c_ast.BinaryOp):
            a, b = self.interval(e.left, env), self.interval(e.right, env)
            if a is None or b is None:
                return None
            op = e.op
            if op == "+":
                return (a[0] + b[0], a[1] + b[1])
            if op == "-":
                return (a[0] - b[1], a[1] - b[0])
            if op == "*":
                p = [x * y for x in a for y in b]
                return (min(p), max(p))
            if op in ("/", "%") and b[0] == b[1] and b[0] > 0:
                if op == "/":
                    return (_cdiv(a[0], b[0]), _cdiv(a[1], b[0]))
                if a[0] == a[1]:
                    return (a[0] - _cdiv(a[0], b[0]) * b[0],) * 2
                return (min(0, -(b[0] - 1)) if a[0] < 0 else 0, b[0] - 1 if a[1] > 0 else 0)
            if op in ("<", ">", "<=", ">=", "==", "!="):
                if op in (">", ">="):
                    a, b, op = b, a, "<" if op == ">" else "<="
                if op == "<" and (a[1] < b[0] or a[0] >= b[1]):
                    return (int(a[1] < b[0]),) * 2
                if op == "<=" and (a[1] <= b[0] or a[0] > b[1]):
                    return (int(a[1] <= b[0]),) * 2
                if op in ("==", "!=") and (a[1] < b[0] or b[1] < a[0]):
                    return (int(op == "!="),) * 2
            if a[0] != a[1] or b[0] != b[1]:
                return None
            x, y = a[0], b[0]
            ops = {"<<": lambda: x << y if 0 <= y < 64 else None,
                   ">>": lambda: x >> y if 0 <= y < 64 else None,
                   "&": lambda: x & y, "|": lambda: x | y, "^": lambda: x ^ y,
                   "&&": lambda: int(bool(x) and bool(y)), "||": lambda: int(bool(x) or bool(y)),
                   "<": lambda: int(x < y), ">": lambda: int(x > y), "<=": lambda: int(x <= y),
                   ">=": lambda: int(x >= y), "==": lambda: int(x == y), "!=": lambda: int(x != y)}
            f = ops.get(op)
            v = f() if f else None
            return None if v is None else (v, v)
        return None


def maybe_unsigned(e) -> bool:
    """Could this expression have an unsigned type (so a comparison with it is unsigned)?"""
    found = False

    class V(c_ast.NodeVisitor):
        def visit_Constant(self, n):
            nonlocal found
            if "unsigned" in n.type or re.search(r"[uU]", n.value.lstrip("0xX")) and n.type != "char":
                found = True

        def visit_Cast(self, n):
            nonlocal found
            if type_name(n.to_type) in UNSIGNED_TYPES:
                found = True
            self.generic_visit(n)

        def visit_UnaryOp(self, n):
            nonlocal found
            if n.op == "sizeof":
                found = True
            self.generic_visit(n)

    V().visit(e)
    return found
