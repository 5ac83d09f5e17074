"""The values the PyTorch walker passes around, and the helpers every lowering shares.

An activation is an `Act` (an IR tensor id); anything else a lowering sees is a torch value
known at compile time. `_src` finds the user's source line of an FX node for messages.
"""
from __future__ import annotations

import numpy as np

from ...errors import EerieError
from ...ir import DTYPE_NP


def _torch():
    try:
        import torch
    except ImportError:   # pragma: no cover - torch is an optional dependency
        raise EerieError("compiling a PyTorch program needs torch (pip install torch==2.13.0)") from None
    return torch


def _ir_dtype(dt) -> str:
    torch = _torch()
    table = {torch.float32: "float32", torch.float64: "float32", torch.float16: "float32",
             torch.bool: "bool", torch.int8: "int8", torch.uint8: "uint8", torch.int16: "int16",
             torch.int32: "int32", torch.int64: "int32"}
    if dt not in table:
        raise EerieError(f"tensors of type {dt} are not supported")
    return table[dt]


def _np(t, dtype: str) -> np.ndarray:
    return np.array(t.detach().cpu().numpy(), dtype=DTYPE_NP[dtype], order="C")   # keeps 0-d


class Act:
    """An activation value: an IR tensor id (shape and dtype live on the IR tensor)."""
    __slots__ = ("tid",)

    def __init__(self, tid: str):
        self.tid = tid

    def __repr__(self):
        return f"Act({self.tid})"


def _flat_values(v):
    if isinstance(v, (list, tuple)):
        for x in v:
            yield from _flat_values(x)
    elif isinstance(v, dict):
        for x in v.values():
            yield from _flat_values(x)
    else:
        yield v


_LIBRARY_DIRS: list[str] = []


def _library_dirs() -> list[str]:
    """Where torch, torchao and executorch are installed (their frames are not the user's)."""
    if not _LIBRARY_DIRS:
        import importlib.util
        import os
        for name in ("torch", "torchao", "executorch"):
            spec = importlib.util.find_spec(name)
            for d in (spec.submodule_search_locations or []) if spec else []:
                _LIBRARY_DIRS.append(os.path.realpath(d) + os.sep)
    return _LIBRARY_DIRS


def _src(node) -> str:
    """The line that made the node: the innermost frame of the user's own code (not inside
    torch, torchao or executorch: for an nn.Conv2d that is the line calling the layer, not
    torch's conv.py), else the innermost frame."""
    import os
    import re
    st = node.meta.get("stack_trace") or ""
    lines = [ln.strip() for ln in st.strip().splitlines() if ln.strip().startswith("File ")]
    libs = _library_dirs()

    def in_library(ln):
        m = re.match(r'File "([^"]+)"', ln)
        return bool(m) and any(os.path.realpath(m.group(1)).startswith(d) for d in libs)
    user = [ln for ln in lines if not in_library(ln)]
    return (user or lines)[-1] if lines else ""
