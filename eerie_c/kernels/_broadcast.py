"""Compile-time broadcasting for elementwise kernels, the one place that resolves it.

TFLite broadcasts like NumPy: shapes are right-aligned and a size-1 dim stretches. Here the
output's size-1 dims are dropped and neighbouring dims are merged wherever every operand
steps through them contiguously (or not at all), so equal shapes become one flat loop and
[2,4,4,3] against [3] becomes a 32 x 3 nest. Every bound and stride is a literal in the C.

Two ways to use it: `elementwise` (or `lower_elementwise`) writes the whole loop nest around
a per-element body, for any number of operands; `loop_plan` gives the pieces that the
two-operand ADD / SUB / MUL templates arrange themselves (they hoist a fixed operand out of
the innermost loop).
"""
from __future__ import annotations

import numpy as np

from ..templating import render
from ..errors import EerieError
from . import Lowered


def _contiguous(shape):
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return strides[::-1]


def loop_dims(out_shape, shapes) -> list[tuple[int, list[int]]]:
    """[(bound, [stride of each operand])], outermost first; stride 0 = broadcast."""
    out_shape = tuple(int(n) for n in out_shape)
    try:
        full = tuple(np.broadcast_shapes(*[tuple(s) for s in shapes], out_shape))
    except ValueError:
        full = None
    if full != out_shape:
        raise EerieError(f"shapes {[list(s) for s in shapes]} do not broadcast to {list(out_shape)}")
    rank = len(out_shape)
    per_op = []
    for shape in shapes:
        padded = (1,) * (rank - len(shape)) + tuple(int(n) for n in shape)
        per_op.append([0 if p == 1 else s for p, s in zip(padded, _contiguous(padded))])
    merged: list = []
    for i in range(rank):
        n, st = out_shape[i], [s[i] for s in per_op]
        if n == 1:
            continue
        if merged and all(ps == s * n for ps, s in zip(merged[-1][1], st)):
            merged[-1] = [merged[-1][0] * n, st]
        else:
            merged.append([n, st])
    return [(n, st) for n, st in merged] or [(1, [0] * len(shapes))]


def _terms(strides) -> list[str]:
    """Index terms of a loop nest for these per-dim strides (a stride-0 dim adds nothing)."""
    return [f"i{d}" if s == 1 else f"i{d} * {s}" for d, s in enumerate(strides) if s]


def _index(strides) -> str:
    return " + ".join(_terms(strides)) or "0"


def elementwise(out_shape, shapes, body, decls=()) -> str:
    """C that runs `body(idx)` once per output element, where idx is a list of index
    expressions: one per operand, then the output's."""
    dims = loop_dims(out_shape, shapes)
    bounds = [n for n, _ in dims]
    idx = [_index([st[k] for _, st in dims]) for k in range(len(shapes))]
    idx.append(_index(_contiguous(bounds)))
    return render("kernels/elementwise_loops.c.j2", bounds=bounds, decls=list(decls),
                  body=body(idx).rstrip("\n"))


def lower_elementwise(y, shapes, inputs, body, helpers=()) -> Lowered:
    """The lowered op that writes tensor y by `elementwise(y.shape, shapes, body)`."""
    return Lowered(body=elementwise(y.shape, shapes, body), inputs=inputs, outputs=[y.id],
                   helpers=set(helpers))


def operand(tid, g, ctx, inputs: list, hint: str) -> str:
    """C name of an operand's data: a flash global for a constant tensor, else in<k> (each
    activation tensor passed once, even when an op reads it twice)."""
    t = g.t(tid)
    if t.is_const:
        return ctx.tensor_const(t, hint)
    if tid not in inputs:
        inputs.append(tid)
    return f"in{inputs.index(tid)}"


def loop_plan(out_shape, shapes, sources):
    """What the two-operand loop templates (binary_*.c.j2) need: loop bounds, base pointer
    expressions per operand for the innermost block, and each operand's access expression in
    the innermost loop."""
    dims = loop_dims(out_shape, shapes)
    outer, (inner_n, inner_st) = dims[:-1], dims[-1]
    depth = len(dims)
    iv = f"i{depth - 1}"

    def base(ptr, strides):
        return " + ".join([ptr] + _terms(strides)) if outer else ptr

    out_strides = _contiguous([n for n, _ in dims])[:-1]
    ptrs = ["a", "b"] if outer else list(sources)
    access = [f"{p}[{iv}]" if inner_st[k] else f"{p}[0]" for k, p in enumerate(ptrs)]
    return dict(
        outer=[n for n, _ in outer], inner_n=inner_n, iv=iv, depth=depth,
        a_base=base(sources[0], [st[0] for _, st in outer]),
        b_base=base(sources[1], [st[1] for _, st in outer]),
        o_base=base("out0", out_strides),
        o_ptr="o" if outer else "out0",
        av=access[0], bv=access[1],
        a_fixed=inner_st[0] == 0, b_fixed=inner_st[1] == 0)
