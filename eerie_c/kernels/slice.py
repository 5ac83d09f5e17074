"""STRIDED_SLICE and SLICE: a copy whose source indices are fixed at compile time.

begin / end / strides (or begin / size) must be constants; TFLite's rules are applied here in
Python: negative indices count from the end, begin_mask / end_mask take the full range, values
are clamped to the dim, shrink_axis_mask drops a dim of one element (at the begin index, or
0 under begin_mask; not with a negative stride, where TFLM writes nothing). ellipsis_mask and
new_axis_mask are rejected (TFLM forces both to 0), and so is `offset`. The C walks the
output in order with literal bounds; the input index is an affine expression of the loop
counters.
"""
from __future__ import annotations

import numpy as np

from ..errors import EerieError
from . import Lowered, kernel

TYPES = ("int8", "int16", "int32", "float32", "bool", "uint8", "int64")


def _const_vec(op, g, k, what):
    if len(op.inputs) <= k or op.inputs[k] is None or not g.t(op.inputs[k]).is_const:
        raise EerieError(f"{what}: input {k} must be a constant tensor")
    return [int(v) for v in np.asarray(g.t(op.inputs[k]).data).reshape(-1)]


def strided_ranges(shape, begin, end, strides, begin_mask=0, end_mask=0):
    """[(start, count, step)] per dim, TFLite's StridedSlice index rules."""
    out = []
    for d, n in enumerate(shape):
        s = strides[d]
        if s == 0:
            raise ValueError("stride 0")
        b, e = begin[d], end[d]
        if begin_mask >> d & 1:
            b = 0 if s > 0 else n - 1
        else:
            b = b + n if b < 0 else b
            b = min(max(b, 0), n) if s > 0 else min(max(b, -1), n - 1)
        if end_mask >> d & 1:
            e = n if s > 0 else -1
        else:
            e = e + n if e < 0 else e
            e = min(max(e, 0), n) if s > 0 else min(max(e, -1), n - 1)
        count = max(0, (e - b + s - (1 if s > 0 else -1)) // s)
        out.append((b, count, s))
    return out


def _emit(x, y, ranges):
    strides, acc = [0] * len(x.shape), 1
    for d in reversed(range(len(x.shape))):
        strides[d] = acc
        acc *= int(x.shape[d])
    base = sum(b * st for (b, _, _), st in zip(ranges, strides))
    loops = [(c, s * st) for (_, c, s), st in zip(ranges, strides) if c != 1]
    if y.size == 0:
        return "(void)in0;\n(void)out0;\n"
    lines = [f"int i{k};" for k in range(len(loops))] + (["int o = 0;"] if loops else [])
    for k, (c, _) in enumerate(loops):
        lines.append("    " * k + f"for (i{k} = 0; i{k} < {c}; ++i{k}) {{")
    terms = [str(base)] if base or not loops else []
    for k, (_, st) in enumerate(loops):
        terms.append(f"i{k}" if st == 1 else f"i{k} * {st}" if st > 0 else f"- i{k} * {-st}")
    idx = " + ".join(terms).replace("+ -", "-") or "0"
    dst = "out0[o++]" if loops else "out0[0]"
    lines.append("    " * len(loops) + f"{dst} = in0[{idx}];")
    for k in reversed(range(len(loops))):
        lines.append("    " * k + "}")
    return "\n".join(lines) + "\n"


@kernel("STRIDED_SLICE", dtypes=TYPES)
def lower_strided_slice(op, g, ctx):
    what = f"STRIDED_SLICE (op {op.index})"
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    a = op.attrs
    if a.get("ellipsis_mask", 0) or a.get("new_axis_mask", 0) or a.get("offset", False):
        raise EerieError(f"{what}: ellipsis_mask, new_axis_mask and offset are not supported "
                         f"(TFLM's STRIDED_SLICE does not implement them either)")
    rank = len(x.shape)
    begin, end = _const_vec(op, g, 1, what), _const_vec(op, g, 2, what)
    strides = _const_vec(op, g, 3, what) if len(op.inputs) > 3 and op.inputs[3] else [1] * rank
    if not len(begin) == len(end) == len(strides) == rank:
        raise EerieError(f"{what}: begin/end/strides need {rank} values each")
    try:
        ranges = strided_ranges(x.shape, begin, end, strides, int(a.get("begin_mask", 0)),
                                int(a.get("end_mask", 0)))
    except ValueError:
        raise EerieError(f"{what}: a stride is 0") from None
    shrink = int(a.get("shrink_axis_mask", 0))
    for d in range(rank):
        if shrink >> d & 1:
            if strides[d] < 0:
                raise EerieError(f"{what}: shrink_axis_mask on dim {d} with a negative stride "
                                 f"(TFLM writes no output for it)")
            if int(a.get("begin_mask", 0)) >> d & 1:
                b = 0   # begin_mask wins over the shrink index, as in TFLM (StartForAxis)
            else:
                b = begin[d] + x.shape[d] if begin[d] < 0 else begin[d]
            if not 0 <= b < x.shape[d]:
                raise EerieError(f"{what}: shrink index {begin[d]} out of range")
            ranges[d] = (b, 1, 1)
    shape = [c for d, (_, c, _) in enumerate(ranges) if not shrink >> d & 1]
    if list(y.shape) != shape or x.dtype != y.dtype:
        raise EerieError(f"{what}: output {list(y.shape)} {y.dtype}, the slice gives {shape} {x.dtype}")
    return Lowered(body=_emit(x, y, ranges), inputs=[x.id], outputs=[y.id])


@kernel("SLICE", dtypes=TYPES)
def lower_slice(op, g, ctx):
    what = f"SLICE (op {op.index})"
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    begin, size = _const_vec(op, g, 1, what), _const_vec(op, g, 2, what)
    if not len(begin) == len(size) == len(x.shape):
        raise EerieError(f"{what}: begin/size need {len(x.shape)} values each")
    ranges = []
    for n, b, s in zip(x.shape, begin, size):
        s = n - b if s == -1 else s
        if b < 0 or s < 0 or b + s > n:
            raise EerieError(f"{what}: begin {begin} size {size} out of range for {list(x.shape)}")
        ranges.append((b, s, 1))
    if list(y.shape) != [c for _, c, _ in ranges] or x.dtype != y.dtype:
        raise EerieError(f"{what}: output {list(y.shape)} does not match the slice")
    return Lowered(body=_emit(x, y, ranges), inputs=[x.id], outputs=[y.id])
