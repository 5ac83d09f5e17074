"""Lowerings of PyTorch ops that move or select data without computing on it: views and
reshapes, expand, permute, cat, slice / select / split, flip, constant padding, index_select and
integer-tensor indexing (GATHER), copies that are no-ops, and *_like constants.
"""
from __future__ import annotations

import numpy as np

from ...errors import EerieError
from .registry import lowers
from .values import Act, _ir_dtype


@lowers("clone", "alias", "detach", "lift_fresh_copy", "contiguous")
def _identity(L, node, x, *rest, **kw):
    return x


@lowers("_assert_tensor_metadata")
def _assert_metadata(L, node, *args, **kw):
    """torch.export puts one before every dtype cast (`.float()`, `.to(...)`): a check of
    what the trace already established, nothing to compute."""
    return None


@lowers("view", "_unsafe_view", "reshape", "squeeze", "unsqueeze", "flatten")
def _view(L, node, x, *rest, **kw):
    return L.reshape(L.ensure_act(x, node.name), L.meta_shape())


@lowers("expand")
def _expand(L, node, x, size, **kw):
    x = L.ensure_act(x, node.name)
    shape = L.meta_shape()
    if L.t(x).size == int(np.prod(shape)):
        return L.reshape(x, shape)
    # Broadcast by adding zeros of the target shape (the elementwise kernel broadcasts).
    zero = L.const(np.zeros(shape, np.float32), "float32", "zeros") if L.t(x).dtype == "float32" else None
    if zero is None:
        raise EerieError(f"{node.name}: expand of a {L.t(x).dtype} tensor is not supported")
    return L.op("ADD", [x, zero], shape, "float32", {"fused_activation_function": "NONE"})


@lowers("permute")
def _permute(L, node, x, dims):
    x = L.ensure_act(x, node.name)
    rank = len(L.t(x).shape)
    perm = [d % rank for d in dims] if rank else []
    if perm == list(range(rank)):
        return x
    return L.transpose(x, perm)


@lowers("cat")
def _cat(L, node, tensors, dim=0):
    dt = L.meta_dtype()
    shape = L.meta_shape()
    ins = [t if isinstance(t, Act) else L.const(t, dt) for t in tensors if int(np.prod(L.shape(t))) > 0]
    rank = len(shape)
    return L.op("CONCATENATION", ins, shape, dt, {"axis": dim % rank, "fused_activation_function": "NONE"})


def _slice_op(L, x: Act, dim: int, start: int, end: int, step: int) -> Act:
    shape = list(L.t(x).shape)
    rank = len(shape)
    dim %= rank
    n = shape[dim]
    start, end = max(0, min(n, start + n if start < 0 else start)), max(0, min(n, end + n if end < 0 else end))
    begin, stop, strides = [0] * rank, list(shape), [1] * rank
    begin[dim], stop[dim], strides[dim] = start, end, step
    out = list(shape)
    out[dim] = max(0, (end - start + step - 1) // step)
    if out == shape:
        return x
    return L.op("STRIDED_SLICE", [x, L.const(np.array(begin, np.int32), "int32", "begin"),
                                  L.const(np.array(stop, np.int32), "int32", "end"),
                                  L.const(np.array(strides, np.int32), "int32", "strides")],
                out, L.t(x).dtype, {"begin_mask": 0, "end_mask": 0, "shrink_axis_mask": 0,
                                    "ellipsis_mask": 0, "new_axis_mask": 0})


@lowers("slice")
def _slice(L, node, x, dim=0, start=None, end=None, step=1):
    x = L.ensure_act(x, node.name)
    n = L.t(x).shape[dim]
    start = 0 if start is None else start
    end = n if end is None or end > n else end
    return _slice_op(L, x, dim, start, end, step)


@lowers("select")
def _select(L, node, x, dim, index):
    x = L.ensure_act(x, node.name)
    n = L.t(x).shape[dim]
    index = index + n if index < 0 else index
    y = _slice_op(L, x, dim, index, index + 1, 1)
    return L.reshape(y, L.meta_shape())


@lowers("split_with_sizes", "split")
def _split(L, node, x, sizes, dim=0):
    x = L.ensure_act(x, node.name)
    n = L.t(x).shape[dim]
    if isinstance(sizes, int):
        sizes = [min(sizes, n - k) for k in range(0, n, sizes)]
    outs, pos = [], 0
    for s in sizes:
        outs.append(_slice_op(L, x, dim, pos, pos + s, 1))
        pos += s
    return outs


@lowers("flip")
def _flip(L, node, x, dims):
    """torch.flip: REVERSE_V2 per run of adjacent dims (reversing adjacent dims together is
    reversing the block they span, which is what the kernel does; TFLM wants them adjacent)."""
    x = L.ensure_act(x, node.name)
    rank = len(L.t(x).shape)
    axes = sorted({d % rank for d in dims if L.t(x).shape[d % rank] > 1})
    runs: list[list[int]] = []
    for a in axes:
        if runs and runs[-1][-1] == a - 1:
            runs[-1].append(a)
        else:
            runs.append([a])
    for run in runs:
        x = L.op("REVERSE_V2", [x, L.const(np.array(run, np.int32), "int32", "axes")],
                 L.t(x).shape, L.t(x).dtype)
    return x


@lowers("constant_pad_nd")
def _pad(L, node, x, pad, value=0.0):
    x = L.ensure_act(x, node.name)
    rank = len(L.t(x).shape)
    pads = np.zeros((rank, 2), np.int32)
    for k in range(len(pad) // 2):
        pads[rank - 1 - k] = [pad[2 * k], pad[2 * k + 1]]
    if (pads < 0).any():
        raise EerieError(f"{node.name}: negative padding (cropping) is not supported")
    ins = [x, L.const(pads, "int32", "paddings")]
    kind = "PAD"
    if float(value) != 0.0:
        kind = "PADV2"
        ins.append(L.const(np.array(value, np.float32), "float32", "pad_value"))
    return L.op(kind, ins, L.meta_shape(), L.t(x).dtype)


@lowers("index_select")
def _index_select(L, node, x, dim, index):
    """GATHER along `dim`; a constant index table is a compile-time copy, a computed one (a
    loop counter) is read and bounds-checked at run time."""
    x = L.ensure_act(x, node.name)
    rank = len(L.t(x).shape)
    idx = index if isinstance(index, Act) else L.const(index, "int32", "indices")
    if isinstance(index, Act) and L.t(index).dtype != "int32":
        raise EerieError(f"{node.name}: index_select needs integer indices")
    return L.op("GATHER", [x, idx], L.meta_shape(), L.t(x).dtype, {"axis": dim % rank, "batch_dims": 0})


@lowers("index")
def _index(L, node, x, indices):
    """x[i] with one integer index tensor (on any one dim, the others `:`): GATHER. Boolean
    masks give value-dependent shapes, which eerie-c cannot compile."""
    x = L.ensure_act(x, node.name)
    used = [(d, i) for d, i in enumerate(indices) if i is not None]
    if len(used) != 1:
        raise EerieError(f"{node.name}: indexing with {len(used)} index tensors is not supported "
                         f"(one integer index tensor is)")
    dim, idx = used[0]
    dt = L.t(idx).dtype if isinstance(idx, Act) else _ir_dtype(idx.dtype)
    if dt == "bool":
        raise EerieError(f"{node.name}: boolean-mask indexing gives a value-dependent shape")
    if not isinstance(idx, Act):
        idx = L.const(idx, "int32", "indices")
    return L.op("GATHER", [x, idx], L.meta_shape(), L.t(x).dtype, {"axis": dim, "batch_dims": 0})


@lowers("full_like", "zeros_like", "ones_like", "empty_like")
def _full_like(L, node, x, *rest, **kw):
    torch = L.torch
    name = node.target.__name__.split(".")[0]
    value = {"zeros_like": 0, "ones_like": 1, "empty_like": 0}.get(name, rest[0] if rest else kw.get("fill_value"))
    val = node.meta["val"]
    return torch.full(tuple(L.meta_shape()), value, dtype=val.dtype)
