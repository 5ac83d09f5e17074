"""Per-tensor limits and quantization checks of the IR, whichever frontend built it: rank,
element count and byte size within what the generated C can index, and scales / zero points
as TFLM reads them (the lenient cases normalised with a note; frontend/validate.py's
docstring lists them)."""
from __future__ import annotations

import math

import numpy as np

from .flatbuffer_check import malformed

MAX_RANK = 6
MAX_ELEMENTS = 2 ** 31 - 1      # C loops count elements with int
MAX_TENSOR_BYTES = 2 ** 31 - 1  # arena offsets must fit an int too
_INT_RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767),
              "int32": (-2 ** 31, 2 ** 31 - 1), "int64": (-2 ** 31, 2 ** 31 - 1),
              "uint32": (0, 2 ** 32 - 1)}


def check_shape(shape, where: str, what: str = "shape") -> int:
    """Rank and dimension limits; returns the element count."""
    problem = shape_problem(shape, what)
    if problem:
        raise malformed(problem, where)
    return math.prod(int(d) for d in shape)


def shape_problem(shape, what: str = "shape", itemsize: int = 0, allow_zero: bool = True) -> str | None:
    """What is wrong with a tensor shape (rank, a negative or, unless allowed, a zero-size
    dimension, element count, with itemsize its bytes), or None: the IR's limits, whichever
    frontend built the tensor."""
    if len(shape) > MAX_RANK:
        dims = ", ".join(str(d) for d in list(shape)[:8]) + (", ..." if len(shape) > 8 else "")
        return f"{what} [{dims}] has rank {len(shape)} (at most {MAX_RANK})"
    count = 1
    for d in shape:
        if d < 0:
            return f"{what} {list(shape)} has a negative dimension"
        if d == 0 and not allow_zero:
            return f"{what} {list(shape)} has a zero-size dimension (empty tensors are not supported)"
        count *= int(d)
    if count > MAX_ELEMENTS:
        return f"{what} {list(shape)} has {count} elements (at most {MAX_ELEMENTS})"
    if count * itemsize > MAX_TENSOR_BYTES:
        return f"{what} {list(shape)} needs {count * itemsize} bytes (at most {MAX_TENSOR_BYTES})"
    return None


def channels_fit(t) -> bool:
    """Per-tensor quantization, or per-channel scales that match the quantized dimension."""
    q = t.quant
    n = len(q.scale)
    return n <= 1 or (0 <= q.axis < len(t.shape) and t.shape[q.axis] == n)


def channel_problem(t) -> str:
    q, n = t.quant, len(t.quant.scale)
    if not 0 <= q.axis < len(t.shape):
        return f"quantized dimension {q.axis} is out of range for shape {list(t.shape)}"
    return f"{n} per-channel scales for dimension {q.axis} of size {t.shape[q.axis]}"


def check_quant(t, where: str, notes: list | None = None) -> None:
    """Scales, zero points and their count. Zero points whose count differs from the scales'
    and a 1-D tensor's out-of-range quantized dimension are normalised as TFLM reads them
    (module docstring), with a line in `notes`; per-channel scales that do not fit another
    tensor are left to check_graph (only filters are read per channel)."""
    q = t.quant
    if q is None:
        return
    notes = notes if notes is not None else []
    n = len(q.scale)
    if n == 0:
        raise malformed("quantization parameters without scales", where)
    if len(q.zero_point) != n:
        # micro_allocator.cc: zero_point[i] when the counts agree, else zero_point[0]
        first = int(q.zero_point[0]) if len(q.zero_point) else 0
        notes.append(f"{where}: {n} quantization scale(s) with {len(q.zero_point)} zero point(s); "
                     f"zero point {first} used for every channel, as TFLM does")
        q.zero_point = np.full(n, first, dtype=np.int64)
    if n > 1 and not channels_fit(t) and len(t.shape) == 1 and t.shape[0] == n:
        notes.append(f"{where}: per-channel quantization along dimension {q.axis} of a 1-D "
                     f"tensor of {n} values read along dimension 0 (the converter writes a "
                     f"per-channel bias with its filter's dimension; TFLM accepts it)")
        q.axis = 0
    scale = np.asarray(q.scale, dtype=np.float64)
    if not np.all(np.isfinite(scale)) or np.any(scale < 0):
        raise malformed(f"quantization scale {_bad_scale(scale)!r} is not a positive finite number", where)
    lo, hi = _INT_RANGE.get(t.dtype, _INT_RANGE["int32"])
    zp = np.asarray(q.zero_point, dtype=np.int64)
    if zp.size and (zp.min() < lo or zp.max() > hi):
        bad = int(zp[(zp < lo) | (zp > hi)][0])
        raise malformed(f"zero point {bad} is out of range for {t.dtype}", where)


def _bad_scale(scale) -> float:
    return next(float(s) for s in scale if not (math.isfinite(s) and s >= np.finfo(np.float32).tiny))


def _tiny_scale(t) -> bool:
    """A zero or subnormal scale: no step size an activation can have."""
    return t.quant is not None and bool(np.any(np.asarray(t.quant.scale, np.float64) < np.finfo(np.float32).tiny))
