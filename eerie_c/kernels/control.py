"""Control-flow markers and copies made by passes/control_flow.py from IF / WHILE regions.

The markers produce no function: their `control` statements go into NAME_invoke itself (an
`if` / `else` over the branch call sequences, and for a loop a `for` over a trip counter with
a compile-time bound that stops on the loop's condition and makes NAME_invoke return 1 when
the maximum trip count is reached with the condition still true). CF_COPY moves a branch
result into the IF's output, or a loop body's result into the loop-carried buffer.
"""
from __future__ import annotations

from ..errors import EerieError
from . import Lowered, kernel

ALL = ("int8", "uint8", "int16", "int32", "int64", "float32", "bool")


def _marker(kind):
    def lower(op, g, ctx):
        a = op.attrs
        if kind == "CF_IF":
            return Lowered("", [op.inputs[0]], [], control=(0, ["if (({in0})[0]) {"], 1),
                           comment="if")
        if kind == "CF_ELSE":
            return Lowered("", [], [], control=(-1, ["} else {"], 1), comment="else")
        if kind == "CF_END_IF":
            return Lowered("", [], [], control=(-1, ["}"], 0), comment="end if")
        n, c = int(a["max_iterations"]), a["counter"]
        if kind == "CF_LOOP":
            # One extra trip so that the condition is checked after the last allowed body run.
            return Lowered("", [], [], control=(0, [f"for ({c} = 0; {c} < {n + 1}; ++{c}) {{"], 1),
                           declares=[c], comment="loop")
        if kind == "CF_BREAK_UNLESS":
            return Lowered("", [op.inputs[0]], [], control=(0, [
                "if (!({in0})[0]) {",
                "    break;",
                "}",
                f"if ({c} == {n}) {{",
                f"    return 1;   /* more than {n} iterations: the loop's maximum trip count */",
                "}"], 0), comment="loop condition")
        if kind == "CF_END_LOOP":
            return Lowered("", [], [], control=(-1, ["}"], 0), comment="end loop")
        raise EerieError(f"unknown control marker {kind}")
    return lower


for _k in ("CF_IF", "CF_ELSE", "CF_END_IF", "CF_LOOP", "CF_BREAK_UNLESS", "CF_END_LOOP"):
    kernel(_k, dtypes=ALL)(_marker(_k))


@kernel("CF_COPY", dtypes=ALL)
def lower_copy(op, g, ctx):
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    if x.nbytes != y.nbytes or x.dtype != y.dtype:
        raise EerieError(f"CF_COPY (op {op.index}): {x.dtype} {list(x.shape)} into {y.dtype} {list(y.shape)}")
    if x.is_const:
        src = ctx.tensor_const(x, "value")
        return Lowered(f"memcpy(out0, {src}, {y.nbytes});\n", [], [y.id], comment="copy a constant")
    # memmove: a loop body may hand back a value that shares the loop-carried buffer.
    return Lowered(f"memmove(out0, in0, {y.nbytes});\n", [x.id], [y.id], comment="copy")
