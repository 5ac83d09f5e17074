"""Shapes the ops determine, where the file stores another (what LiteRT's Prepare does).

A Keras model with an unknown batch size that the converter lowers through SPACE_TO_BATCH_ND /
BATCH_TO_SPACE_ND (a dilated Conv1D: S2B with block [d], EXPAND_DIMS, CONV_2D, SQUEEZE, B2S
with crops) stores batch 1 for the tensors between the pair, which hold d batches. LiteRT
resizes every op's output from its inputs and computes the right answer; TFLM trusts the
stored shapes and computes a wrong one without a word. eerie-c does what LiteRT does: starting
at each SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND, an output whose stored shape differs from the
one the op determines takes the derived shape, and so do the outputs of every op that reads a
replaced tensor (for the op kinds below; their readers in turn), each with a line in the
report's notes. A replaced tensor read by an op whose output shape is not derived here is
refused (one line naming both), and so is anything no shape makes consistent (the checks of
frontend/validate.py and the kernels see the derived shapes and say what is wrong). The
graph's inputs and constants are never changed; an output may be (the report says so).
"""
from __future__ import annotations

import numpy as np

from ..errors import EerieError
from ..ir.describe import op_where, tensor_where

SEEDS = ("SPACE_TO_BATCH_ND", "BATCH_TO_SPACE_ND")
SAME_SHAPE = ("RELU", "RELU6", "RELU_N1_TO_1", "LEAKY_RELU", "LOGISTIC", "TANH", "HARD_SWISH",
              "ELU", "ABS", "NEG", "QUANTIZE", "DEQUANTIZE", "PRELU")
BROADCAST = ("ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE")


def _ints(g, tid):
    t = g.t(tid) if tid is not None else None
    if t is None or not t.is_const or t.dtype not in ("int32", "int64"):
        return None
    return [int(v) for v in np.asarray(t.data).reshape(-1)]


def _space_batch(op, g, x):
    """SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND on a 3-D or 4-D input: the output shape, or None
    when the block or its edges are not constants that fit (the kernel says what is wrong)."""
    block = _ints(g, op.inputs[1]) if len(op.inputs) > 2 else None
    edges = _ints(g, op.inputs[2]) if len(op.inputs) > 2 else None
    n = len(x) - 2
    if block is None or edges is None or len(x) not in (3, 4) or len(block) != n \
            or len(edges) != 2 * n or min(block) < 1 or min(edges) < 0:
        return None
    blocks = int(np.prod(block))
    out = list(x)
    if op.kind == "SPACE_TO_BATCH_ND":
        out[0] = x[0] * blocks
        for k in range(n):
            padded = x[1 + k] + edges[2 * k] + edges[2 * k + 1]
            if padded % block[k]:
                return None
            out[1 + k] = padded // block[k]
    else:
        if x[0] % blocks:
            return None
        out[0] = x[0] // blocks
        for k in range(n):
            out[1 + k] = x[1 + k] * block[k] - edges[2 * k] - edges[2 * k + 1]
            if out[1 + k] < 1:
                return None
    return out


def _reshape(op, g, x):
    shape = _ints(g, op.inputs[1]) if len(op.inputs) > 1 else None
    if shape is None:
        shape = [int(v) for v in op.attrs.get("new_shape") or []] or None
    if shape is None or shape.count(-1) > 1 or any(d < -1 for d in shape):
        return None
    size, known = int(np.prod(x)), int(np.prod([d for d in shape if d != -1]))
    if -1 in shape:
        if known == 0 or size % known:
            return None
        shape[shape.index(-1)] = size // known
    return shape if int(np.prod(shape)) == size else None


def _expand_dims(op, g, x):
    axis = _ints(g, op.inputs[1]) if len(op.inputs) > 1 else None
    if axis is None or len(axis) != 1 or not -len(x) - 1 <= axis[0] <= len(x):
        return None
    a = axis[0] + len(x) + 1 if axis[0] < 0 else axis[0]
    return list(x[:a]) + [1] + list(x[a:])


def _squeeze(op, g, x):
    dims = [int(d) for d in op.attrs.get("squeeze_dims") or []]
    if not dims:
        return [d for d in x if d != 1]
    dims = {d + len(x) if d < 0 else d for d in dims}
    if any(not 0 <= d < len(x) or x[d] != 1 for d in dims):
        return None
    return [d for k, d in enumerate(x) if k not in dims]


def _window(op, g, x):
    """CONV_2D / DEPTHWISE_CONV_2D / the 2-D pools: [batch, out_h, out_w, channels]."""
    from ..ir.window_size import out_size
    if len(x) != 4:
        return None
    a = op.attrs
    if op.kind in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        w = g.t(op.inputs[1]).shape if len(op.inputs) > 1 and op.inputs[1] is not None else ()
        if len(w) != 4:
            return None
        kh, kw, ch = w[1], w[2], (w[3] if op.kind == "DEPTHWISE_CONV_2D" else w[0])
    else:
        kh, kw, ch = int(a.get("filter_height", 1)), int(a.get("filter_width", 1)), x[3]
    pad = a.get("padding", "VALID")
    sh, sw = int(a.get("stride_h", 1)), int(a.get("stride_w", 1))
    dh, dw = int(a.get("dilation_h_factor", 1) or 1), int(a.get("dilation_w_factor", 1) or 1)
    if pad not in ("SAME", "VALID") or min(sh, sw, dh, dw, kh, kw) < 1:
        return None
    oh, ow = out_size(pad, x[1], kh, sh, dh), out_size(pad, x[2], kw, sw, dw)
    return [x[0], oh, ow, ch] if min(oh, ow) >= 1 else None


def _broadcast(op, g, x):
    try:
        return list(np.broadcast_shapes(*[tuple(g.t(t).shape) for t in op.inputs if t is not None]))
    except ValueError:
        return None


DERIVE = {"SPACE_TO_BATCH_ND": _space_batch, "BATCH_TO_SPACE_ND": _space_batch,
          "RESHAPE": _reshape, "EXPAND_DIMS": _expand_dims, "SQUEEZE": _squeeze,
          "CONV_2D": _window, "DEPTHWISE_CONV_2D": _window, "AVERAGE_POOL_2D": _window,
          "MAX_POOL_2D": _window, **{k: _broadcast for k in BROADCAST},
          **{k: (lambda op, g, x: list(x)) for k in SAME_SHAPE}}


def _reads(op) -> set:
    ids = {t for t in op.inputs if t is not None}
    for r in op.regions:
        for inner in r.ops:
            ids |= _reads(inner)
    return ids


def derive_shapes(g) -> None:
    """Replace the stored shapes the ops determine otherwise (module docstring), in place."""
    replaced: dict[str, tuple] = {}   # tensor id -> its stored shape
    made_by: dict[str, str] = {}
    for op in g.ops:
        touched = sorted(_reads(op) & replaced.keys())
        if op.kind not in SEEDS and not touched:
            continue
        rule = DERIVE.get(op.kind)
        x = g.t(op.inputs[0]) if op.inputs and op.inputs[0] is not None else None
        out = rule(op, g, tuple(x.shape)) if rule and x is not None and len(op.outputs) == 1 \
            and not op.regions else None
        if out is None:
            if touched:
                t = g.t(touched[0])
                raise EerieError(f"{op_where(op)}: reads {tensor_where(t)}, whose stored shape "
                                 f"{list(replaced[t.id])} is really {list(t.shape)} ({made_by[t.id]}"
                                 f" determines it), and no output shape of this op fits it")
            continue   # a seed the kernel refuses with its own message
        y = g.t(op.outputs[0])
        if tuple(out) != tuple(y.shape):
            if y.is_const or y.variable or y.id in g.inputs:
                continue   # never changed; the kernel reports the mismatch
            replaced.setdefault(y.id, tuple(y.shape))
            made_by[y.id] = op_where(op)
            y.shape = tuple(int(d) for d in out)
    for tid, stored in replaced.items():
        t = g.t(tid)
        if tuple(t.shape) != stored:
            g.notes.append(f"{tensor_where(t)}: stored shape {list(stored)} replaced by "
                           f"{list(t.shape)}, which {made_by[tid]} determines (as LiteRT does; "
                           f"TFLM keeps the stored shape and computes a wrong result)"
                           + (" -- a graph output" if tid in g.outputs else ""))
