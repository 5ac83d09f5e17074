"""TFLite resource variables, resolved at compile time by frontend/tflite_control.py: each
variable is one state tensor (static storage kept across invocations). READ_VARIABLE copies
its contents out, ASSIGN_VARIABLE copies a value into it (TFLM copies bytes both ways)."""
from __future__ import annotations

from ..errors import EerieError
from . import Lowered, kernel

ALL = ("int8", "uint8", "int16", "int32", "int64", "float32", "bool")


def _same_bytes(op, src, dst):
    if src.nbytes != dst.nbytes or src.dtype != dst.dtype:
        raise EerieError(f"{op.kind} (op {op.index}): {src.dtype} {list(src.shape)} and "
                         f"{dst.dtype} {list(dst.shape)} differ")


@kernel("READ_VARIABLE", dtypes=ALL)
def lower_read(op, g, ctx):
    var, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    _same_bytes(op, var, y)
    return Lowered(f"memcpy(out0, in0, {y.nbytes});\n", [var.id], [y.id],
                   comment=f"read {var.label}")


@kernel("ASSIGN_VARIABLE", dtypes=ALL)
def lower_assign(op, g, ctx):
    x, var = g.t(op.inputs[0]), g.t(op.outputs[0])
    _same_bytes(op, x, var)
    if x.is_const:
        src = ctx.tensor_const(x, "value")
        return Lowered(f"memcpy(state0, {src}, {var.nbytes});\n", [], [], updates=[var.id],
                       comment=f"assign a constant to {var.label}")
    # The value is an arena tensor or a graph input: never the state storage itself.
    return Lowered(f"memcpy(state0, in0, {var.nbytes});\n", [x.id], [], updates=[var.id],
                   comment=f"assign {var.label}")
