"""GATHER (axis, batch_dims) and GATHER_ND: float32 and int8 params, int32 indices (what TFLM
accepts; it rejects int64 / int16 positions and other param types).

Constant indices are resolved at compile time: the op becomes a planned copy (_copyplan), and
an index out of range is a compile error. Indices that are activations are read at run time;
each one is bounds-checked before use. TFLM fails the whole invoke on an out-of-range index;
a compiled model has no error path per op, so here the slice that index selects is filled with
real 0 instead (0.0f, or the output zero point for int8) -- never a read outside params. Every
in-range index gives exactly TFLM's bytes. Params may be a constant (an embedding table in
flash) or an activation.

  GATHER:    out[b, o, c, i] = params[b, o, idx[b, c], i]   (b: batch dims, o: dims before
             the axis, c: positions in the indices after the batch dims, i: dims after the axis)
  GATHER_ND: out[n, i] = params[idx[n, 0], ..., idx[n, k-1], i]
"""
from __future__ import annotations

import numpy as np

from ..errors import EerieError
from . import Lowered, kernel
from ._copyplan import copy_body, flat_index

TYPES = ("float32", "int8")


def _prod(v) -> int:
    return int(np.prod(v, dtype=np.int64)) if len(v) else 1


def _operand(t, ctx, params: list, hint: str) -> str:
    if t.is_const:
        return ctx.tensor_const(t, hint)
    if t.id not in params:
        params.append(t.id)
    return f"in{params.index(t.id)}"


def _fill(y) -> str:
    zp = y.zero_point if y.dtype == "int8" and y.quant is not None else 0
    return str(zp)


def _check(what, x, idx, y):
    if idx.dtype != "int32":
        raise EerieError(f"{what}: indices are {idx.dtype}; TFLM supports int32 only")
    if x.dtype != y.dtype:
        raise EerieError(f"{what}: params {x.dtype} but output {y.dtype}")


def _loops(bounds: list[tuple[str, int]], inner: list[str]) -> list[str]:
    """Nested for loops over the (name, bound) pairs with bound > 1, around `inner`."""
    live = [(v, n) for v, n in bounds if n > 1]
    lines = []
    for k, (v, n) in enumerate(live):
        lines.append("    " * k + f"for ({v} = 0; {v} < {n}; ++{v}) {{")
    lines += ["    " * len(live) + s for s in inner]
    for k in reversed(range(len(live))):
        lines.append("    " * k + "}")
    return lines


def _term(var: str, n: int, stride: int) -> str:
    if n <= 1 or stride == 0:
        return ""
    return var if stride == 1 else f"{var} * {stride}"


def _sum(terms: list[str]) -> str:
    return " + ".join(t for t in terms if t) or "0"


@kernel("GATHER", dtypes=TYPES)
def lower_gather(op, g, ctx):
    what = f"GATHER (op {op.index})"
    x, ind, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
    _check(what, x, ind, y)
    rank, irank = len(x.shape), len(ind.shape)
    axis = int(op.attrs.get("axis", 0))
    bd = int(op.attrs.get("batch_dims", 0))
    axis = axis + rank if axis < 0 else axis
    bd = bd + irank if bd < 0 else bd
    if not 0 <= axis < rank or not 0 <= bd <= min(axis, irank):
        raise EerieError(f"{what}: axis {axis} / batch_dims {bd} invalid for params {list(x.shape)} "
                         f"and indices {list(ind.shape)}")
    if list(x.shape[:bd]) != list(ind.shape[:bd]):
        raise EerieError(f"{what}: the batch dims of params {list(x.shape)} and indices "
                         f"{list(ind.shape)} differ")
    expect = list(x.shape[:axis]) + list(ind.shape[bd:]) + list(x.shape[axis + 1:])
    if list(y.shape) != expect:
        raise EerieError(f"{what}: output {list(y.shape)}, expected {expect}")
    nb, no = _prod(x.shape[:bd]), _prod(x.shape[bd:axis])
    nc, ni, na = _prod(ind.shape[bd:]), _prod(x.shape[axis + 1:]), int(x.shape[axis])
    if ind.is_const:
        iv = np.asarray(ind.data, np.int64).reshape(nb, nc)
        if iv.size and (iv.min() < 0 or iv.max() >= na):
            raise EerieError(f"{what}: constant index out of range [0, {na})")
        pidx = flat_index(x.shape).reshape(nb, no, na, ni)
        bsel = np.arange(nb)[:, None, None]
        osel = np.arange(no)[None, :, None]
        m = pidx[bsel, osel, iv[:, None, :], :]   # (nb, no, nc, ni)
        params: list[str] = []
        src = _operand(x, ctx, params, "params")
        return Lowered(body=copy_body(m, ctx, src, "out0", "gather") if y.size else "",
                       inputs=params, outputs=[y.id],
                       comment=f"GATHER {op.name} axis {axis} (constant indices)".replace("*/", ""))
    params = []
    src = _operand(x, ctx, params, "params")
    isrc = _operand(ind, ctx, params, "indices")
    iexpr = _sum([_term("b", nb, nc), _term("c", nc, 1)])
    dst = _sum([_term("b", nb, no * nc * ni), _term("o", no, nc * ni), _term("c", nc, ni)])
    base = _sum([_term("b", nb, no * na * ni), _term("o", no, na * ni)])
    sexpr = _sum([base if base != "0" else "", f"k * {ni}" if ni != 1 else "k"])
    if ni == 1:
        copy, fill = f"out0[{dst}] = {src}[{sexpr}];", f"out0[{dst}] = {_fill(y)};"
    else:
        copy = f"memcpy(out0 + {dst}, {src} + {sexpr}, {ni} * sizeof(*out0));"
        fill = f"memset(out0 + {dst}, {_fill(y)}, {ni} * sizeof(*out0));"
    inner = [f"const int32_t k = {isrc}[{iexpr}];",
             f"if (k >= 0 && k < {na}) {{",
             f"    {copy}",
             "} else {",
             f"    {fill}   /* out-of-range index: real 0, no read */",
             "}"]
    used = [v for v, n in (("b", nb), ("o", no), ("c", nc)) if n > 1]
    lines = [f"int {', '.join(used)};"] if used else []
    lines += _loops([("b", nb), ("o", no), ("c", nc)], ["{"] + ["    " + s for s in inner] + ["}"])
    return Lowered(body="\n".join(lines) + "\n", inputs=params, outputs=[y.id],
                   comment=f"GATHER {op.name} axis {axis} batch_dims {bd}".replace("*/", ""))


@kernel("GATHER_ND", dtypes=TYPES)
def lower_gather_nd(op, g, ctx):
    what = f"GATHER_ND (op {op.index})"
    x, ind, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
    _check(what, x, ind, y)
    if len(ind.shape) < 1:
        raise EerieError(f"{what}: indices must have rank >= 1")
    k = int(ind.shape[-1])
    if not 1 <= k <= len(x.shape):
        raise EerieError(f"{what}: index depth {k} for params of rank {len(x.shape)}")
    expect = list(ind.shape[:-1]) + list(x.shape[k:])
    if list(y.shape) != expect:
        raise EerieError(f"{what}: output {list(y.shape)}, expected {expect}")
    n, ni = _prod(ind.shape[:-1]), _prod(x.shape[k:])
    strides = [_prod(x.shape[j + 1:]) for j in range(k)]
    if ind.is_const:
        iv = np.asarray(ind.data, np.int64).reshape(n, k)
        if iv.size and ((iv < 0) | (iv >= np.array(x.shape[:k])[None, :])).any():
            raise EerieError(f"{what}: constant index out of range for params {list(x.shape)}")
        offs = (iv * np.array(strides, np.int64)[None, :]).sum(axis=1)
        m = offs[:, None] + np.arange(ni, dtype=np.int64)[None, :]
        params: list[str] = []
        src = _operand(x, ctx, params, "params")
        return Lowered(body=copy_body(m, ctx, src, "out0", "gather") if y.size else "",
                       inputs=params, outputs=[y.id])
    params = []
    src = _operand(x, ctx, params, "params")
    isrc = _operand(ind, ctx, params, "indices")
    row = f"{isrc} + n * {k}" if n > 1 else isrc
    cond = " && ".join(f"ix[{j}] >= 0 && ix[{j}] < {x.shape[j]}" for j in range(k))
    sexpr = _sum([f"ix[{j}]" if strides[j] == 1 else f"ix[{j}] * {strides[j]}" for j in range(k)])
    dst = _term("n", n, ni) or "0"
    if ni == 1:
        copy, fill = f"out0[{dst}] = {src}[{sexpr}];", f"out0[{dst}] = {_fill(y)};"
    else:
        copy = f"memcpy(out0 + {dst}, {src} + {sexpr}, {ni} * sizeof(*out0));"
        fill = f"memset(out0 + {dst}, {_fill(y)}, {ni} * sizeof(*out0));"
    inner = ["{", f"    const int32_t *ix = {row};",
             f"    if ({cond}) {{", f"        {copy}", "    } else {",
             f"        {fill}   /* out-of-range index: real 0, no read */", "    }", "}"]
    lines = (["int n;"] if n > 1 else []) + _loops([("n", n)], inner)
    return Lowered(body="\n".join(lines) + "\n", inputs=params, outputs=[y.id])
