"""SPLIT, SPLIT_V, PACK and UNPACK: copies with compile-time offsets.

(STRIDED_SLICE and SLICE live in slice.py.) Each output (or, for PACK, each input) is one
strided slab of the other side; _copyplan turns the slab into merged loops and memcpy runs.
Like TFLM these ops move bytes only: int8 / int16 values are copied as they are, whatever
quantization the tensors declare (TFLM does not requantize either).

The dtypes are the ones TFLM's kernels accept (checked against the oracle): SPLIT, SPLIT_V,
UNPACK float32/int8/int16/int32; PACK also int64.
"""
from __future__ import annotations

import numpy as np

from ..errors import EerieError
from . import Lowered, kernel
from ._copyplan import copy_body, flat_index

SPLIT_TYPES = ("float32", "int8", "int16", "int32")
PACK_TYPES = ("float32", "int8", "int16", "int32", "int64")


def _axis(op, what, axis, rank):
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < rank:
        raise EerieError(f"{what}: axis {axis} out of range for rank {rank}")
    return a


def _const_axis(op, g, k, what):
    if len(op.inputs) <= k or op.inputs[k] is None or not g.t(op.inputs[k]).is_const:
        raise EerieError(f"{what}: the axis (input {k}) must be a constant tensor")
    v = np.asarray(g.t(op.inputs[k]).data).reshape(-1)
    if v.size != 1:
        raise EerieError(f"{what}: the axis tensor must hold one value")
    return int(v[0])


def _check_same_dtype(what, x, ts):
    for t in ts:
        if t.dtype != x.dtype:
            raise EerieError(f"{what}: {x.dtype} input but {t.dtype} tensor {t.label or t.id!r}")


def _split(op, g, ctx, x, axis, sizes, what):
    ys = [g.t(t) for t in op.outputs]
    _check_same_dtype(what, x, ys)
    if len(sizes) != len(ys):
        raise EerieError(f"{what}: {len(sizes)} pieces but {len(ys)} outputs")
    idx = flat_index(x.shape)
    bodies, start = [], 0
    for k, (y, n) in enumerate(zip(ys, sizes)):
        piece = np.take(idx, np.arange(start, start + n), axis=axis)
        start += n
        if list(piece.shape) != list(y.shape):
            raise EerieError(f"{what}: output {k} has shape {list(y.shape)}, the split gives "
                             f"{list(piece.shape)}")
        bodies.append(copy_body(piece, ctx, "in0", f"out{k}", f"part{k}"))
    return Lowered(body="".join(bodies), inputs=[x.id], outputs=[y.id for y in ys],
                   comment=f"{op.kind} {op.name} axis {axis} sizes {sizes}".replace("*/", ""))


@kernel("SPLIT", dtypes=SPLIT_TYPES, key_input=1)
def lower_split(op, g, ctx):
    what = f"SPLIT (op {op.index})"
    x = g.t(op.inputs[1])
    rank = len(x.shape)
    axis = _axis(op, what, _const_axis(op, g, 0, what), rank)
    n = int(op.attrs.get("num_splits", len(op.outputs)))
    if n != len(op.outputs) or n < 1 or x.shape[axis] % n:
        raise EerieError(f"{what}: dim {x.shape[axis]} cannot be split into {len(op.outputs)} "
                         f"equal outputs (num_splits {n})")
    return _split(op, g, ctx, x, axis, [x.shape[axis] // n] * n, what)


@kernel("SPLIT_V", dtypes=SPLIT_TYPES)
def lower_split_v(op, g, ctx):
    what = f"SPLIT_V (op {op.index})"
    x = g.t(op.inputs[0])
    rank = len(x.shape)
    axis = _axis(op, what, _const_axis(op, g, 2, what), rank)
    st = g.t(op.inputs[1]) if len(op.inputs) > 1 and op.inputs[1] is not None else None
    if st is None or not st.is_const:
        raise EerieError(f"{what}: size_splits must be a constant tensor")
    sizes = [int(v) for v in np.asarray(st.data).reshape(-1)]
    if sizes.count(-1) > 1 or any(s < -1 for s in sizes):
        raise EerieError(f"{what}: size_splits {sizes} is invalid")
    if -1 in sizes:
        sizes[sizes.index(-1)] = x.shape[axis] - (sum(sizes) + 1)
    if sum(sizes) != x.shape[axis] or min(sizes) < 0:
        raise EerieError(f"{what}: size_splits {sizes} do not add up to dim {x.shape[axis]}")
    return _split(op, g, ctx, x, axis, sizes, what)


@kernel("UNPACK", dtypes=SPLIT_TYPES)
def lower_unpack(op, g, ctx):
    what = f"UNPACK (op {op.index})"
    x = g.t(op.inputs[0])
    rank = len(x.shape)
    axis = _axis(op, what, int(op.attrs.get("axis", 0)), rank)
    if x.shape[axis] != len(op.outputs):
        raise EerieError(f"{what}: dim {x.shape[axis]} on axis {axis} but {len(op.outputs)} outputs")
    ys = [g.t(t) for t in op.outputs]
    _check_same_dtype(what, x, ys)
    idx = flat_index(x.shape)
    bodies = []
    for k, y in enumerate(ys):
        piece = np.take(idx, k, axis=axis)
        if int(np.prod(y.shape, dtype=np.int64)) != piece.size or \
                [d for d in y.shape] != list(piece.shape):
            raise EerieError(f"{what}: output {k} has shape {list(y.shape)}, expected "
                             f"{list(piece.shape)}")
        bodies.append(copy_body(piece, ctx, "in0", f"out{k}", f"part{k}"))
    return Lowered(body="".join(bodies), inputs=[x.id], outputs=[y.id for y in ys],
                   comment=f"UNPACK {op.name} axis {axis}".replace("*/", ""))


@kernel("PACK", dtypes=PACK_TYPES)
def lower_pack(op, g, ctx):
    what = f"PACK (op {op.index})"
    y = g.t(op.outputs[0])
    xs = [g.t(t) for t in op.inputs]
    if not xs:
        raise EerieError(f"{what}: no inputs")
    rank = len(y.shape)
    axis = _axis(op, what, int(op.attrs.get("axis", 0)), rank)
    _check_same_dtype(what, y, xs)
    expect = list(xs[0].shape[:axis]) + [len(xs)] + list(xs[0].shape[axis:])
    if list(y.shape) != expect or any(list(x.shape) != list(xs[0].shape) for x in xs):
        raise EerieError(f"{what}: packing {len(xs)} x {list(xs[0].shape)} on axis {axis} gives "
                         f"{expect}, the output is {list(y.shape)}")
    idx = flat_index(y.shape)
    params: list[str] = []
    bodies = []
    for k, x in enumerate(xs):
        slab = np.take(idx, k, axis=axis)
        if x.is_const:
            # a constant input is copied from flash
            src = ctx.tensor_const(x, f"value{k}")
        else:
            if x.id not in params:
                params.append(x.id)
            src = f"in{params.index(x.id)}"
        bodies.append(copy_body(slab, ctx, src, "out0", f"value{k}", scatter=True))
    return Lowered(body="".join(bodies), inputs=params, outputs=[y.id],
                   comment=f"PACK {op.name} axis {axis}".replace("*/", ""))
