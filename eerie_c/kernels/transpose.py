"""TRANSPOSE: out[i_0, ..., i_{r-1}] = in[j] with j[perm[k]] = i_k, any rank up to 6.

The permutation is a constant (TFLite's second input), so the copy is planned here: size-1
dims are dropped and neighbouring output dims that stay neighbours in the input are merged,
which turns NCHW<->NHWC on a batch of one into a plain 2-D transpose. The C walks the output
in order with literal bounds and input strides. It moves bytes only, so int8 needs the same
quantization on both sides (TFLM checks this too).
"""
from __future__ import annotations

import numpy as np

from ..templating import render
from ..errors import EerieError
from . import Lowered, kernel

MAX_RANK = 6


def transpose_perm(op, g) -> list[int]:
    """The op's permutation as non-negative ints, checked against the shapes."""
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    what = f"TRANSPOSE (op {op.index})"
    if len(op.inputs) < 2 or op.inputs[1] is None or not g.t(op.inputs[1]).is_const:
        raise EerieError(f"{what}: the permutation must be a constant tensor")
    perm = [int(v) for v in np.asarray(g.t(op.inputs[1]).data).reshape(-1)]
    rank = len(x.shape)
    if rank > MAX_RANK:
        raise EerieError(f"{what}: rank {rank} is above the supported {MAX_RANK}")
    if len(perm) != rank:
        raise EerieError(f"{what}: permutation {perm} for a rank-{rank} input")
    perm = [p + rank if p < 0 else p for p in perm]
    if sorted(perm) != list(range(rank)):
        raise EerieError(f"{what}: {perm} is not a permutation of 0..{rank - 1}")
    if tuple(y.shape) != tuple(x.shape[p] for p in perm):
        raise EerieError(f"{what}: output shape {list(y.shape)} is not the input shape "
                         f"{list(x.shape)} permuted by {perm}")
    return perm


def copy_plan(in_shape, perm) -> list[tuple[int, int]]:
    """[(bound, input stride)] over the output in order, outermost first, merged."""
    strides, acc = [0] * len(in_shape), 1
    for d in reversed(range(len(in_shape))):
        strides[d] = acc
        acc *= int(in_shape[d])
    dims = [(int(in_shape[p]), p) for p in perm if int(in_shape[p]) != 1]
    merged: list[list[int]] = []   # [bound, input dim of the innermost merged part, stride]
    for n, p in dims:
        if merged and merged[-1][1] == p - 1:
            merged[-1][0] *= n
            merged[-1][1] = p
            merged[-1][2] = strides[p]
        else:
            merged.append([n, p, strides[p]])
    return [(n, s) for n, _, s in merged]


def _plan_merges(in_shape, perm):
    # Input dims of size 1 between two kept dims do not break contiguity: renumber the kept
    # input dims first so that "p - 1" above means "the previous kept input dim".
    keep = [d for d in range(len(in_shape)) if int(in_shape[d]) != 1]
    new_in = [int(in_shape[d]) for d in keep]
    new_perm = [keep.index(p) for p in perm if int(in_shape[p]) != 1]
    return copy_plan(new_in, new_perm)


@kernel("TRANSPOSE", dtypes=("int8", "int16", "int32", "float32", "bool", "uint8", "int64"))
def lower_transpose(op, g, ctx):
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    perm = transpose_perm(op, g)
    if x.dtype != y.dtype:
        raise EerieError(f"TRANSPOSE (op {op.index}): input {x.dtype} but output {y.dtype}")
    if x.quant is not None and y.quant is not None and (
            x.quant.per_channel or y.quant.per_channel or x.zero_point != y.zero_point
            or abs(x.scale - y.scale) > 1e-6 * max(abs(x.scale), 1e-30)):
        raise EerieError(f"TRANSPOSE (op {op.index}): input and output quantization differ")
    loops = _plan_merges(x.shape, perm)
    body = render("kernels/transpose.c.j2", loops=loops, count=y.size, perm=perm,
                  contiguous=len(loops) <= 1)
    return Lowered(body=body, inputs=[x.id], outputs=[y.id],
                   comment=f"TRANSPOSE {op.name} perm {perm}".replace("*/", ""))
