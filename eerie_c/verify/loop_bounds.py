"""Loop-bound analysis for the C-source proof: every `for` loop must have a compile-time
maximum trip count.

A loop is accepted when one comparison in its condition (`i < B`, `B > i`, or the first
operand of a `&&` chain) pits a local integer variable against a bound whose value interval
is known, the variable is initialised in the for statement from a known interval and
stepped by a nonzero constant in the matching direction, its type holds every value it
takes, and nothing else in the loop assigns it, steps it or takes its address.  Nor may its
address be taken anywhere else in the function (a pointer could change it inside the loop).
The variable is looked up in the enclosing block scopes, so a same-named variable declared
in another block is never mistaken for it.  The body is then checked with the variable's
value interval known, so nested loops may be bounded by it.
"""
from __future__ import annotations

from pycparser import c_ast

from .c_intervals import INT_RANGES, UNSIGNED_TYPES, IntervalEval, maybe_unsigned, type_name
from .c_parse import walk


class ForLoopBounds:
    """The loop checks of the C-source checker (c_checker.CSourceChecker), kept here as a mixin.

    The host class provides: `bug(node, msg)` (raises), `visit(node, env)`,
    `check_decl(decl, is_local)`, `lookup_local(name)` (the Decl a name refers to here),
    `addr_taken` (names whose address the function takes), `ev` (an IntervalEval) and the
    counters `loops` and `max_trips`.
    """

    def check_for(self, n: c_ast.For, env):
        """Accept `n` if some comparison in its condition bounds it, then check its parts."""
        cands = []
        for c in _and_chain(n.cond):
            if isinstance(c, c_ast.BinaryOp) and c.op in ("<", "<=", ">", ">="):
                flip = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
                if isinstance(c.left, c_ast.ID) and not _mentions(c.right, c.left.name):
                    cands.append((c.left.name, c.op, c.right))
                elif isinstance(c.right, c_ast.ID) and not _mentions(c.left, c.right.name):
                    cands.append((c.right.name, flip[c.op], c.left))
        if n.cond is None or not cands:
            self.bug(n, "for loop condition is not a comparison of the loop variable with a "
                        "compile-time bound (`i < N`, `i >= N`, ...)")
        # The for-init declaration (C99) is a local of the loop.
        if isinstance(n.init, c_ast.DeclList):
            for d in n.init.decls:
                self.check_decl(d, is_local=True)
                self.visit(d.init, env)
        elif n.init is not None:
            self.visit(n.init, env)
        reasons = []
        for var, op, bound_e in cands:
            r = self.try_bound(n, var, op, bound_e, env)
            if isinstance(r, str):
                reasons.append(r)
                continue
            body_range, trips = r
            self.loops += 1
            self.max_trips = max(self.max_trips, trips)
            self.visit(n.cond, env)
            self.visit(n.next, env)
            self.visit(n.stmt, {**env, var: body_range})
            return
        self.bug(n, "for loop is not bounded by compile-time constants: " + "; ".join(reasons))

    def try_bound(self, n: c_ast.For, var: str, op: str, bound_e, env):
        """(value interval of `var` in the body, maximum trip count) if `var op bound_e`
        bounds loop `n`, else the reason it does not (a string)."""
        inc = op in ("<", "<=")
        d = self.lookup_local(var)
        if d is None:
            return f"loop variable {var!r} is not a local variable"
        tname = type_name(d)
        if tname not in INT_RANGES:
            return f"loop variable {var!r} does not have an integer type"
        tlo, thi = INT_RANGES[tname]
        bound = self.ev.interval(bound_e, env)
        if bound is None:
            return f"bound `{_src(bound_e)}` of {var!r} is not a compile-time constant"
        init_e = _find_init(n.init, var)
        if init_e is None:
            return f"loop variable {var!r} is not initialised in the for statement"
        init = self.ev.interval(init_e, env)
        if init is None:
            return f"initial value `{_src(init_e)}` of {var!r} is not a compile-time constant"
        step, step_node = _find_step(n.next, var, self.ev)
        if step is None:
            return f"step of {var!r} is not `++{var}`, `{var} += K` or the like with a constant K"
        if (step > 0) != inc:
            return f"step of {var!r} goes the wrong way for `{var} {op} ...`"
        k = abs(step)
        if tname not in UNSIGNED_TYPES and (maybe_unsigned(bound_e) or maybe_unsigned(init_e)) \
                and min(init[0], bound[0]) - k < 0:
            return f"comparison of {var!r} may be unsigned while {var!r} can be negative"
        if not (tlo <= init[0] and init[1] <= thi and tlo <= bound[0] and bound[1] <= thi):
            return f"initial value or bound does not fit the type {tname} of {var!r}"
        if inc:
            top = bound[1] if op == "<=" else bound[1] - 1
            trips = max(0, -(-(top + 1 - init[0]) // k))
            if top + k > thi:
                return f"{var!r} ({tname}) would overflow on its last step"
            body = (init[0], max(init[0], top))
        else:
            bot = bound[0] if op == ">=" else bound[0] + 1
            trips = max(0, -(-(init[1] + 1 - bot) // k))
            if bot - k < tlo:
                return f"{var!r} ({tname}) would wrap below its minimum on its last step"
            body = (min(init[1], bot), init[1])
        for part, where in ((n.cond, "condition"), (n.stmt, "body")):
            m = _modifies(part, var)
            if m is not None:
                self.bug(m, f"loop variable {var!r} is modified in the loop {where}")
        for e in (n.next.exprs if isinstance(n.next, c_ast.ExprList) else [n.next]):
            if e is not step_node:
                m = _modifies(e, var)
                if m is not None:
                    self.bug(m, f"loop variable {var!r} is modified twice in the loop step")
        if var in self.addr_taken:
            return (f"the address of loop variable {var!r} is taken in this function, so it "
                    f"could be changed through a pointer")
        return body, trips


def _src(e) -> str:
    from pycparser import c_generator
    try:
        return c_generator.CGenerator().visit(e)
    except Exception:
        return type(e).__name__


def _and_chain(e):
    if isinstance(e, c_ast.BinaryOp) and e.op == "&&":
        return _and_chain(e.left) + _and_chain(e.right)
    return [e] if e is not None else []


def _mentions(e, var: str) -> bool:
    return any(isinstance(n, c_ast.ID) and n.name == var for n in walk(e))


def _find_init(init, var: str):
    items = []
    if isinstance(init, c_ast.DeclList):
        items = init.decls
    elif isinstance(init, c_ast.ExprList):
        items = init.exprs
    elif init is not None:
        items = [init]
    for it in items:
        if isinstance(it, c_ast.Decl) and it.name == var and it.init is not None:
            return it.init
        if isinstance(it, c_ast.Assignment) and it.op == "=" and isinstance(it.lvalue, c_ast.ID) \
                and it.lvalue.name == var:
            return it.rvalue
    return None


def _find_step(nxt, var: str, ev: IntervalEval):
    items = nxt.exprs if isinstance(nxt, c_ast.ExprList) else ([nxt] if nxt is not None else [])
    for e in items:
        if isinstance(e, c_ast.UnaryOp) and isinstance(e.expr, c_ast.ID) and e.expr.name == var:
            if e.op in ("++", "p++"):
                return 1, e
            if e.op in ("--", "p--"):
                return -1, e
        if isinstance(e, c_ast.Assignment) and isinstance(e.lvalue, c_ast.ID) and e.lvalue.name == var:
            k = None
            if e.op in ("+=", "-="):
                k = ev.const(e.rvalue)
                k = None if k is None else (k if e.op == "+=" else -k)
            elif e.op == "=" and isinstance(e.rvalue, c_ast.BinaryOp) and e.rvalue.op in ("+", "-"):
                r = e.rvalue
                if isinstance(r.left, c_ast.ID) and r.left.name == var:
                    k = ev.const(r.right)
                    k = None if k is None else (k if r.op == "+" else -k)
                elif r.op == "+" and isinstance(r.right, c_ast.ID) and r.right.name == var:
                    k = ev.const(r.left)
            if k is not None and k != 0:
                return k, e
            return None, None
    return None, None


def _modifies(e, var: str):
    """The first node in `e` that assigns `var`, steps it or takes its address."""
    if e is None:
        return None
    for n in walk(e):
        if isinstance(n, c_ast.Assignment) and isinstance(n.lvalue, c_ast.ID) and n.lvalue.name == var:
            return n
        if isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--", "&") \
                and isinstance(n.expr, c_ast.ID) and n.expr.name == var:
            return n
    return None
