"""The lowering registry: one function per ATen op (packet name, e.g. "convolution", or
overload name, e.g. "convolution.default"), registered with `@lowers(...)` by the lower_*.py
modules and batch.py. walker.py imports all of them, so the registry is complete whenever a
walker exists."""
from __future__ import annotations

from typing import Any

LOWERINGS: dict[str, Any] = {}


def lowers(*names):
    def reg(fn):
        for n in names:
            LOWERINGS[n] = fn
        return fn
    return reg
