"""The C library's single-precision math functions (what TFLM's std::exp(float) and friends
call), for kernels whose compile-time tables must round exactly as TFLM's do.

Loaded on first use, not at import: finding libm (ctypes.util.find_library runs
`ldconfig -p`, a subprocess) costs a compile that needs none of these functions about
0.05 s of wall time per lookup.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools


@functools.lru_cache(maxsize=None)
def libm_f(name: str):
    """float NAME(float) from libm, e.g. libm_f("expf")."""
    path = ctypes.util.find_library("m") or "libm.so.6"
    fn = getattr(ctypes.CDLL(path), name)
    fn.restype, fn.argtypes = ctypes.c_float, [ctypes.c_float]
    return fn
