"""int8 ADD / SUB / MUL of an activation and a constant that varies along the channels only
(a batch norm exported as MUL and ADD with per-channel constants, a per-channel offset) become
look-up tables: such an op's output is a function of one int8 input value and its channel, so
its 256 results per channel are computed here, at compile time, by the kernel's own integer
arithmetic (kernels/elementwise.py int8_values, TFLM's algorithm), and the C is one load per
element. A table op whose output only another one reads folds into it (MUL then ADD: one
table of the pair's results, each rounded as the two ops round them).

    y = MUL(x, c[C]) -> y = CHANNEL_TABLE(x) with T[c][v] = MUL's int8 result for (v, c[c])

Conditions: int8 per-tensor quantized input, constant operand and output; the constant has
one value or varies along the last axis only; the activation has the output's shape (no
broadcast on its side); at most MAX_TABLE_BYTES of tables per op (channels x 256); outside
control-flow bodies. One channel gives TABLE_LOOKUP (kernels/table_lookup.py).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..ir import Graph
from ..kernels._quant import activation_range_int
from ..kernels.elementwise import int8_params, int8_values

MAX_TABLE_BYTES = 8192   # 32 channels: the flash a table may take where the kernel was ~300 B
TABLES = ("TABLE_LOOKUP", "CHANNEL_TABLE")


def channel_tables(g: Graph) -> Graph:
    ops = [_as_table(g, op) or op for op in g.ops]
    g.ops = _fold_chains(g, ops)   # in place: a graph carries attributes beyond its fields
    return g


def _per_tensor_int8(t) -> bool:
    return t.dtype == "int8" and t.quant is not None and not t.quant.per_channel


def _as_table(g: Graph, op):
    if op.kind not in ("ADD", "SUB", "MUL") or op.regions or len(op.inputs) != 2 \
            or None in op.inputs:
        return None
    a, b, y = (g.t(t) for t in (*op.inputs, op.outputs[0]))
    if not all(_per_tensor_int8(t) for t in (a, b, y)) or a.is_const == b.is_const:
        return None
    x, c = (b, a) if a.is_const else (a, b)
    if c.int4 or tuple(x.shape) != tuple(y.shape) or not y.shape:   # 4-bit: no int8 op reads it
        return None
    channels = y.shape[-1]
    data = np.asarray(c.data).astype(np.int64)
    if data.size == 1:
        per = np.full(channels, int(data.reshape(-1)[0]))
    elif data.shape[-1] == channels and data.size == channels and len(c.shape) <= len(y.shape):
        per = data.reshape(-1)
    else:
        return None
    if np.all(per == per[0]):
        per = per[:1]
    if len(per) * 256 > MAX_TABLE_BYTES:
        return None
    act = op.attrs.get("fused_activation_function", "NONE") or "NONE"
    lo, hi = activation_range_int(act, y)
    q = int8_params(op.kind, a, b, y)
    v = np.arange(-128, 128)
    rows = []
    for k in per:
        kk = np.full(256, k)
        va, vb = (kk, v) if a.is_const else (v, kk)
        rows.append(int8_values(op.kind, q, va, vb, a.zero_point, b.zero_point, y.zero_point, lo, hi))
    table = np.asarray(rows, np.int8)
    what = f"{op.kind} by {'one constant' if len(per) == 1 else 'a constant per channel'}"
    return _table_op(op, x.id, table, what)


def _table_op(op, src: str, table: np.ndarray, what: str):
    if table.shape[0] == 1:
        return replace(op, kind="TABLE_LOOKUP", inputs=[src],
                       attrs={"table": table.reshape(256), "function": what})
    return replace(op, kind="CHANNEL_TABLE", inputs=[src], attrs={"table": table, "function": what})


def _fold_chains(g: Graph, ops: list) -> list:
    """A table op whose output only the next table op reads (and the graph does not return)
    folds into it: T[c][v] = T2[c][T1[c][v] + 128], channels broadcast when one has one."""
    readers: dict[str, int] = {}
    for op in ops:
        for t in op.inputs:
            if t is not None:
                readers[t] = readers.get(t, 0) + 1
    out = []
    for op in ops:
        prev = out[-1] if out else None
        if op.kind in TABLES and prev is not None and prev.kind in TABLES \
                and op.inputs[0] == prev.outputs[0] and readers.get(prev.outputs[0]) == 1 \
                and prev.outputs[0] not in g.outputs:
            t1, t2 = _rows(prev), _rows(op)
            n = max(len(t1), len(t2))
            if len(t1) in (1, n) and len(t2) in (1, n) and n * 256 <= MAX_TABLE_BYTES:
                t1, t2 = np.broadcast_to(t1, (n, 256)), np.broadcast_to(t2, (n, 256))
                table = np.take_along_axis(t2, t1.astype(np.int64) + 128, axis=1).astype(np.int8)
                what = f"{prev.attrs['function']}, then {op.attrs['function']}"
                out[-1] = _table_op(op, prev.inputs[0], table, what)
                continue
        out.append(op)
    return out



def _rows(op) -> np.ndarray:
    return np.asarray(op.attrs["table"], np.int8).reshape(-1, 256)
