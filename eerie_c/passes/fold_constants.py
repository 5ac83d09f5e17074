"""Fold ops whose inputs are constant: the output becomes a constant, the op goes. Shape-only
ops, and MULs of constants (a pruning mask multiplied into weights: frontend/tflite_variables.py
turns the variables that hold them into constants), evaluated as TFLM's kernel computes them."""
import numpy as np

from ..ir import SHAPE_ONLY, Graph
from ..kernels._fixedpoint import multiply_by_quantized_multiplier
from ..kernels._quant import activation_range_int, quantize_multiplier


def fold_constant_reshapes(g: Graph) -> Graph:
    keep = []
    for op in g.ops:
        src = g.t(op.inputs[0]) if op.inputs and op.inputs[0] else None
        if op.kind in SHAPE_ONLY and src is not None and src.is_const and op.outputs[0] not in g.outputs:
            out = g.t(op.outputs[0])
            out.data = src.data.reshape(out.shape).copy()
            continue
        keep.append(op)
    g.ops = keep
    return g


def _mul(op, g, a, b, y):
    """TFLM's MUL of two constants, or None when not folded here."""
    act = op.attrs.get("fused_activation_function", "NONE") or "NONE"
    if a.dtype == b.dtype == y.dtype == "float32":
        lo, hi = {"NONE": (-np.inf, np.inf), "RELU": (0, np.inf), "RELU6": (0, 6),
                  "RELU_N1_TO_1": (-1, 1)}.get(act, (None, None))
        if lo is None:
            return None
        with np.errstate(all="ignore"):
            out = a.data.astype(np.float32) * b.data.astype(np.float32)
        fmax = np.finfo(np.float32).max
        return np.clip(out, max(lo, -fmax), min(hi, fmax)).astype(np.float32)
    if a.dtype == b.dtype == y.dtype == "int8" and None not in (a.quant, b.quant, y.quant):
        s1, s2, so = (float(np.float32(t.scale)) for t in (a, b, y))
        if so == 0:
            return None
        m, s = quantize_multiplier(s1 * s2 / so)
        lo, hi = activation_range_int(act, y)
        prod = (a.data.astype(np.int64) - a.zero_point) * (b.data.astype(np.int64) - b.zero_point)
        flat = [min(hi, max(lo, y.zero_point + multiply_by_quantized_multiplier(int(v), m, s)))
                for v in prod.reshape(-1)]
        return np.asarray(flat, np.int8).reshape(prod.shape)
    return None


def _fold_muls(g: Graph) -> None:
    ops = []
    for op in g.ops:
        if op.kind == "MUL" and len(op.inputs) == 2 and len(op.outputs) == 1 and not op.regions \
                and op.outputs[0] not in g.outputs \
                and all(t is not None and g.t(t).is_const for t in op.inputs):
            a, b, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
            try:
                shape = np.broadcast_shapes(a.shape, b.shape)
            except ValueError:
                shape = None
            out = _mul(op, g, a, b, y) if shape == tuple(y.shape) else None
            if out is not None:
                y.data = np.broadcast_to(out, y.shape).copy()
                continue
        ops.append(op)
    g.ops = ops


def fold_constant_muls(g: Graph) -> Graph:
    _fold_muls(g)
    return g
