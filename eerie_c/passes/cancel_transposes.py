"""Remove the layout transposes a frontend adds around NHWC ops.

The PyTorch frontend lowers an NCHW convolution as TRANSPOSE (to NHWC), CONV_2D, TRANSPOSE
(back to NCHW). Between two such ops the back-and-forth is wasted work. This pass, repeated
to a fixed point:

* turns a TRANSPOSE that keeps the order of every dim larger than one into a RESHAPE (no
  data moves; the alias pass then makes it free), an identity permutation included;
* composes TRANSPOSE(TRANSPOSE(a, p), q) into one TRANSPOSE(a, p then q), which becomes a
  RESHAPE when the two cancel;
* pushes a TRANSPOSE down through an element-wise op it alone feeds (unary ops; binary and
  select ops whose other operands are constants, which are permuted at compile time, or are
  fed by the same permutation), through reductions over constant axes (the axes are
  renumbered), through PAD with constant paddings (the rows of paddings are permuted) and
  through CONCATENATION of equally permuted inputs (the axis is renumbered), so that it meets
  its inverse;
* drops a TRANSPOSE whose result nobody reads;
* then, for a TRANSPOSE read by several ops (a residual: `x + f(pad(x))`), tries one copy per
  reader on a copy of the graph and keeps the result if fewer elements are transposed in the
  end (each copy can then meet its own inverse).

Everything here is exact: values are only moved, never recomputed differently.
"""
from __future__ import annotations

import copy

import numpy as np

from ..ir import Graph, Op, Tensor

UNARY = {"RELU", "RELU6", "RELU_N1_TO_1", "LOGISTIC", "TANH", "ABS", "NEG", "EXP", "LOG", "SQRT",
         "RSQRT", "SQUARE", "FLOOR", "CEIL", "ROUND", "CAST", "LOGICAL_NOT", "HARD_SWISH", "GELU",
         "ELU", "LEAKY_RELU", "QUANTIZE", "DEQUANTIZE"}
NARY = {"ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE", "EQUAL",
        "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "LOGICAL_AND", "LOGICAL_OR",
        "SELECT_V2"}
REDUCE = {"MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD"}
PADS = {"PAD", "PADV2", "MIRROR_PAD"}


def _perm(g: Graph, op: Op) -> list[int] | None:
    if len(op.inputs) < 2 or op.inputs[1] is None or not g.t(op.inputs[1]).is_const:
        return None
    rank = len(g.t(op.inputs[0]).shape)
    return [int(v) % max(rank, 1) for v in np.asarray(g.t(op.inputs[1]).data).reshape(-1)]


def _region_reads(g: Graph) -> set[str]:
    """Tensors read from inside nested regions (they count as extra readers)."""
    out: set[str] = set()
    for op in g.ops:
        for r in op.regions:
            for rop in r.ops:
                out.update(t for t in rop.inputs if t is not None)
            out.update(r.outputs)
            out |= _region_reads(r)
    return out


class _Rewriter:
    def __init__(self, g: Graph):
        self.g = g
        self.n = 0

    def fresh(self, like: str, shape, dtype=None, data=None) -> str:
        base = f"{like}_nt"
        tid = base
        while tid in self.g.tensors:
            self.n += 1
            tid = f"{base}{self.n}"
        src = self.g.tensors.get(like)
        if src is None:   # a new constant (a permutation): no model tensor to copy from
            self.g.tensors[tid] = Tensor(tid, tuple(int(d) for d in shape), dtype, like, None, data)
        else:
            self.g.tensors[tid] = Tensor(tid, tuple(int(d) for d in shape), dtype or src.dtype,
                                         src.label, src.quant, data)
        return tid


def _index(ops: list[Op], op: Op) -> int:
    return next(i for i, o in enumerate(ops) if o is op)


def _keeps_order(shape, perm) -> bool:
    big = [p for p in perm if shape[p] != 1]
    return big == sorted(big)


def _step(g: Graph, rw: _Rewriter) -> bool:
    readers = g.readers()
    pinned = set(g.outputs) | _region_reads(g)
    for k, op in enumerate(g.ops):
        if op.kind != "TRANSPOSE":
            continue
        perm = _perm(g, op)
        if perm is None:
            continue
        a, b = op.inputs[0], op.outputs[0]
        ashape = g.t(a).shape
        if b not in pinned and not readers.get(b):
            del g.ops[k]
            return True
        if _keeps_order(ashape, perm):
            g.ops[k] = Op("RESHAPE", [a], [b], {}, op.name, op.index)
            return True
        users = readers.get(b, [])
        # TRANSPOSE of a TRANSPOSE: compose into one.
        for u in users:
            if u.kind == "TRANSPOSE" and u.inputs[0] == b:
                q = _perm(g, u)
                if q is None:
                    continue
                comp = [perm[i] for i in q]
                j = _index(g.ops, u)
                if comp == list(range(len(comp))):
                    g.ops[j] = Op("RESHAPE", [a], list(u.outputs), {}, u.name, u.index)
                else:
                    pc = rw.fresh(u.outputs[0] + "_perm", (len(comp),), "int32", np.array(comp, np.int32))
                    g.ops[j] = Op("TRANSPOSE", [a, pc], list(u.outputs), {}, u.name, u.index)
                return True
        if b in pinned or len(users) != 1:
            continue
        u = users[0]
        if _push(g, rw, k, op, perm, u, readers, pinned):
            return True
    return False


def _push(g: Graph, rw: _Rewriter, k: int, t: Op, perm, u: Op, readers, pinned) -> bool:
    a, b = t.inputs[0], t.outputs[0]
    inv = list(np.argsort(perm))
    j = _index(g.ops, u)
    if u.regions or len(u.outputs) != 1:
        return False
    y = u.outputs[0]
    yshape = g.t(y).shape
    if u.kind in UNARY and u.inputs[0] == b:
        new_ins = [a] + list(u.inputs[1:])
        new_shape = tuple(yshape[i] for i in inv)
    elif u.kind in NARY:
        rank = len(yshape)
        if len(g.t(b).shape) != rank or tuple(g.t(b).shape) != tuple(yshape):
            return False
        new_ins = []
        for tid in u.inputs:
            if tid == b:
                new_ins.append(a)
                continue
            src = g.t(tid)
            if src.is_const:
                data = np.asarray(src.data)
                if data.ndim > rank:
                    return False
                full = data.reshape((1,) * (rank - data.ndim) + data.shape)
                moved = np.ascontiguousarray(full.transpose(inv))
                new_ins.append(rw.fresh(tid, moved.shape, src.dtype, moved))
                continue
            p = g.producer(tid)
            if p is None or p.kind != "TRANSPOSE" or _perm(g, p) != perm or tid in pinned \
                    or len(readers.get(tid, [])) != 1 or tuple(src.shape) != tuple(yshape):
                return False
            new_ins.append(p.inputs[0])
        new_shape = tuple(yshape[i] for i in inv)
    elif u.kind in REDUCE and u.inputs[0] == b and len(u.inputs) > 1 and g.t(u.inputs[1]).is_const:
        rank = len(perm)
        axes = sorted({int(v) % rank for v in np.asarray(g.t(u.inputs[1]).data).reshape(-1)})
        new_axes = sorted(perm[ax] for ax in axes)
        keep = bool(u.attrs.get("keep_dims", False))
        ax_t = rw.fresh(u.inputs[1], (len(new_axes),), g.t(u.inputs[1]).dtype,
                        np.array(new_axes, dtype=g.t(u.inputs[1]).data.dtype))
        if keep:
            new_shape = tuple(1 if d in new_axes else n for d, n in enumerate(g.t(a).shape))
            out_perm = perm
        else:
            kept_a = [d for d in range(rank) if d not in new_axes]
            new_shape = tuple(g.t(a).shape[d] for d in kept_a)
            out_perm = [kept_a.index(perm[i]) for i in range(rank) if i not in axes]
        mid = rw.fresh(y, new_shape)
        pc = rw.fresh(y + "_perm", (len(out_perm),), "int32", np.array(out_perm, np.int32))
        g.ops[j:j + 1] = [Op(u.kind, [a, ax_t] + list(u.inputs[2:]), [mid], dict(u.attrs), u.name, u.index),
                          Op("TRANSPOSE", [mid, pc], [y], {}, t.name, t.index)]
        del g.ops[k]
        return True
    elif u.kind in PADS and u.inputs[0] == b and len(u.inputs) > 1 and g.t(u.inputs[1]).is_const:
        # y = pad(transpose(a)): pad a with row perm[i] of y's paddings at its dim perm[i].
        pads = np.asarray(g.t(u.inputs[1]).data)
        if pads.shape != (len(perm), 2):
            return False
        moved = np.empty_like(pads)
        moved[perm] = pads
        new_ins = [a, rw.fresh(u.inputs[1], moved.shape, g.t(u.inputs[1]).dtype, moved)] + list(u.inputs[2:])
        new_shape = tuple(yshape[i] for i in inv)
    elif u.kind == "CONCATENATION":
        rank = len(perm)
        new_ins = []
        for tid in u.inputs:
            if tid == b:
                new_ins.append(a)
                continue
            p = g.producer(tid)
            if p is None or p.kind != "TRANSPOSE" or _perm(g, p) != perm or tid in pinned \
                    or len(readers.get(tid, [])) != 1:
                return False
            new_ins.append(p.inputs[0])
        if u.inputs.count(b) != 1:
            return False
        axis = int(u.attrs.get("axis", 0)) % rank
        attrs = dict(u.attrs, axis=perm[axis])
        new_shape = tuple(yshape[i] for i in inv)
        mid = rw.fresh(y, new_shape)
        pc = rw.fresh(y + "_perm", (rank,), "int32", np.array(perm, np.int32))
        g.ops[j:j + 1] = [Op(u.kind, new_ins, [mid], attrs, u.name, u.index),
                          Op("TRANSPOSE", [mid, pc], [y], {}, t.name, t.index)]
        _drop_feeding_transposes(g, u.inputs, b)
        del g.ops[_index(g.ops, t)]
        return True
    else:
        return False
    mid = rw.fresh(y, new_shape)
    pc = rw.fresh(y + "_perm", (len(perm),), "int32", np.array(perm, np.int32))
    g.ops[j:j + 1] = [Op(u.kind, new_ins, [mid], dict(u.attrs), u.name, u.index),
                      Op("TRANSPOSE", [mid, pc], [y], {}, t.name, t.index)]
    if u.kind in NARY:
        _drop_feeding_transposes(g, u.inputs, b)
    del g.ops[_index(g.ops, t)]
    return True


def _drop_feeding_transposes(g: Graph, inputs, b):
    """The other operands' transposes are now unread (each had this op as its only reader)."""
    for tid in inputs:
        if tid == b or g.t(tid).is_const:
            continue
        p = g.producer(tid)
        if p is not None and p.kind == "TRANSPOSE":
            del g.ops[_index(g.ops, p)]


def _fixed_point(g: Graph, rw: _Rewriter) -> None:
    for _ in range(10 * len(g.ops) + 100):
        if not _step(g, rw):
            break


def _transposed_elements(g: Graph) -> int:
    return sum(g.t(op.outputs[0]).size for op in g.ops if op.kind == "TRANSPOSE")


def _split(g: Graph, rw: _Rewriter, t: Op) -> bool:
    """One copy of TRANSPOSE t per op that reads its result (not for outputs, region reads,
    or readers with regions)."""
    b = t.outputs[0]
    readers = [op for op in g.ops if b in op.inputs]
    if len(readers) < 2 or b in g.outputs or b in _region_reads(g) or any(r.regions for r in readers):
        return False
    k = _index(g.ops, t)
    copies = []
    for n, r in enumerate(readers):
        bn = rw.fresh(b, g.t(b).shape)
        copies.append(Op("TRANSPOSE", list(t.inputs), [bn], {}, f"{t.name}_{n}", t.index))
        g.ops[_index(g.ops, r)] = Op(r.kind, [bn if i == b else i for i in r.inputs], list(r.outputs),
                                     dict(r.attrs), r.name, r.index, subgraph=r.subgraph)
    g.ops[k:k + 1] = copies
    return True


def cancel_transposes(g: Graph) -> Graph:
    for op in g.ops:
        for r in op.regions:
            cancel_transposes(r)
    if not any(op.kind == "TRANSPOSE" for op in g.ops):
        return g
    rw = _Rewriter(g)
    _fixed_point(g, rw)
    tried: set[str] = set()
    while True:
        shared = [op for op in g.ops if op.kind == "TRANSPOSE" and op.outputs[0] not in tried
                  and sum(op.outputs[0] in o.inputs for o in g.ops) > 1]
        if not shared:
            return g
        t = shared[0]
        tried.add(t.outputs[0])
        trial = copy.copy(g)
        trial.ops, trial.tensors = list(g.ops), dict(g.tensors)
        trw = _Rewriter(trial)
        if _split(trial, trw, t):
            _fixed_point(trial, trw)
            if _transposed_elements(trial) < _transposed_elements(g):
                # in place: a control-flow region shares its tensor dict with the graph around
                # it, and a new dict would hide the tensors made here from the other one
                g.ops = trial.ops
                g.tensors.clear()
                g.tensors.update(trial.tensors)
                rw = _Rewriter(g)
