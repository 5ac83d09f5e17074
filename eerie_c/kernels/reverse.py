"""REVERSE_V2: reverse a tensor along constant axes, every dtype TFLM's kernel runs (float32,
int8, uint8, int16, int32, int64, bool).

TFLM takes the axes (negative ones count from the end) sorted and requires them contiguous;
reversing dims a..b together is reversing the flattened block they span, so the tensor is
seen as [outer, middle, inner] with middle = the product of the reversed dims. Rows of `inner`
elements are copied to their mirrored place (one memcpy each); with inner = 1 elements are
moved one by one. No axes at all copies the input.
"""
from __future__ import annotations

import numpy as np

from ..errors import EerieError
from . import Lowered, kernel

DTYPES = ("bool", "float32", "int8", "int16", "int32", "int64", "uint8")


def reverse_plan(shape, axes) -> tuple[int, int, int]:
    """(outer, middle, inner) sizes for reversing `shape` along the sorted contiguous axes."""
    lo, hi = axes[0], axes[-1]
    outer = int(np.prod(shape[:lo], dtype=np.int64))
    middle = int(np.prod(shape[lo:hi + 1], dtype=np.int64))
    inner = int(np.prod(shape[hi + 1:], dtype=np.int64))
    return outer, middle, inner


@kernel("REVERSE_V2", dtypes=DTYPES)
def lower_reverse(op, g, ctx):
    x, ax, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
    if x.dtype != y.dtype or tuple(x.shape) != tuple(y.shape):
        raise EerieError(f"REVERSE_V2 {op.name!r}: input {x.dtype} {list(x.shape)} but output "
                         f"{y.dtype} {list(y.shape)}")
    if not ax.is_const or ax.dtype != "int32" or len(ax.shape) != 1:
        raise EerieError(f"REVERSE_V2 {op.name!r}: the axes must be a constant 1-D int32 tensor")
    rank = len(x.shape)
    axes = sorted(int(a) + rank if int(a) < 0 else int(a) for a in np.asarray(ax.data).reshape(-1))
    if any(not 0 <= a < rank for a in axes):
        raise EerieError(f"REVERSE_V2 {op.name!r}: axis out of range for a {rank}-D input")
    if any(b != a + 1 for a, b in zip(axes, axes[1:])):
        raise EerieError(f"REVERSE_V2 {op.name!r}: axes {axes} are not contiguous (TFLM refuses "
                         "them too)")
    t = x.ctype
    if not axes or x.size == 0:
        body = f"memcpy(out0, in0, {x.size} * sizeof({t}));"
        return Lowered(body=body, inputs=[x.id], outputs=[y.id])
    outer, middle, inner = reverse_plan(list(x.shape), axes)
    head = "int i, j;\n" if outer > 1 else "int j;\n"
    base = f"i * {middle * inner} + " if outer > 1 else ""
    if inner == 1:
        move = f"out0[{base}{middle - 1} - j] = in0[{base}j];"
    else:
        move = (f"memcpy(out0 + {base}({middle - 1} - j) * {inner}, in0 + {base}j * {inner}, "
                f"{inner} * sizeof({t}));")
    loop = f"for (j = 0; j < {middle}; ++j) {{\n    {move}\n}}"
    if outer > 1:
        loop = f"for (i = 0; i < {outer}; ++i) {{\n" + "\n".join(
            "    " + line for line in loop.splitlines()) + "\n}"
    return Lowered(body=head + f"/* {list(x.shape)} reversed along {axes} */\n" + loop,
                   inputs=[x.id], outputs=[y.id])
