"""Lowerings of PT2E's quantize / dequantize ops (quantized_decomposed.*): QUANTIZE and
DEQUANTIZE IR ops on activations, which passes/fold_qdq.py folds into int8 tensors. Constant
weights are dequantized at compile time by the walker, which records their scales
(`Graph.quant_hints`) so the pass can recover the int8 weights exactly.
"""
from __future__ import annotations

import numpy as np

from ...errors import EerieError
from ...ir import Quant
from .registry import lowers
from .values import Act, _ir_dtype

# (qmin, qmax) of each integer dtype: activations must use the whole range (the kernels
# saturate to the dtype, as TFLite's do).
_RANGE = {"int8": (-128, 127), "int16": (-32768, 32767)}

QUANTIZE_OPS = ("quantize_per_tensor.default", "quantize_per_tensor.tensor", "quantize_per_tensor.tensor2")
DEQUANTIZE_OPS = ("dequantize_per_tensor.default", "dequantize_per_tensor.tensor",
                  "dequantize_per_tensor.tensor2")
CONST_DEQUANTIZE = ("dequantize_per_channel", "dequantize_per_tensor")


def _scalar(L, v, what, node):
    if isinstance(v, Act):
        raise EerieError(f"{node.name}: a computed {what} is not supported (quantization parameters "
                         f"must be constants)")
    if isinstance(v, L.torch.Tensor):
        if v.numel() != 1:
            raise EerieError(f"{node.name}: {what} must be a single value")
        v = v.item()
    return v


def _params(L, node, scale, zp, qmin, qmax, dtype):
    scale = float(np.float32(_scalar(L, scale, "scale", node)))
    zp = int(_scalar(L, zp, "zero point", node))
    dt = _ir_dtype(dtype)
    if dt not in _RANGE:
        raise EerieError(f"{node.name}: quantization to {dtype} is not supported (int8 or int16)")
    if (int(qmin), int(qmax)) != _RANGE[dt]:
        raise EerieError(f"{node.name}: activations quantized to [{qmin}, {qmax}] are not supported: "
                         f"use the full {dt} range {list(_RANGE[dt])} for activations")
    if not np.isfinite(scale) or scale <= 0:
        raise EerieError(f"{node.name}: quantization scale {scale} is not a positive number")
    return scale, zp, dt


@lowers(*QUANTIZE_OPS)
def _quantize(L, node, x, scale, zp, qmin, qmax, dtype):
    x = L.ensure_act(x, node.name)
    if L.t(x).dtype != "float32":
        raise EerieError(f"{node.name}: quantizing a {L.t(x).dtype} tensor is not supported")
    scale, zp, dt = _params(L, node, scale, zp, qmin, qmax, dtype)
    y = L.op("QUANTIZE", [x], L.t(x).shape, dt, {"rounding": "half_even"})
    L.t(y).quant = Quant(np.array([scale], np.float32), np.array([zp], np.int64))
    L.quantized = True
    return y


@lowers(*DEQUANTIZE_OPS)
def _dequantize(L, node, q, scale, zp, qmin, qmax, dtype, out_dtype=None):
    q = L.ensure_act(q, node.name)
    scale, zp, dt = _params(L, node, scale, zp, qmin, qmax, dtype)
    t = L.t(q)
    if t.dtype != dt or t.quant is None or t.quant.per_channel \
            or np.float32(t.scale) != np.float32(scale) or t.zero_point != zp:
        raise EerieError(f"{node.name}: dequantizes with scale {scale:g}, zero point {zp}, but its "
                         f"input was quantized with other parameters")
    return L.op("DEQUANTIZE", [q], t.shape, "float32")


@lowers("dequantize_per_channel.default")
def _dequantize_per_channel(L, node, *args):
    raise EerieError(f"{node.name}: per-channel quantization of activations is not supported "
                     f"(only of constant weights)")


def note_const_dequantize(L, node, args, result):
    """The walker evaluated a dequantize of a constant (a weight): keep its scales."""
    torch = L.torch
    name = getattr(node.target, "__name__", "")
    if not name.startswith(CONST_DEQUANTIZE) or not isinstance(result, torch.Tensor):
        return
    scale, zp = args[1], args[2]
    if name.startswith("dequantize_per_channel"):
        qmin, qmax = args[4], args[5]
    else:
        qmin, qmax = args[3], args[4]
    s = np.asarray(torch.as_tensor(scale, dtype=torch.float32).reshape(-1).numpy(), np.float32)
    z = np.asarray(torch.as_tensor(zp).reshape(-1).numpy(), np.int64)
    if z.size == 1 and s.size > 1:
        z = np.repeat(z, s.size)
    L.quant_hints.append((s, z, int(qmin), int(qmax)))
