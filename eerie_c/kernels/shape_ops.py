"""SHAPE and BROADCAST_ARGS: shape arithmetic. Both are folded into constants at compile time
(passes/fold_shapes.py) whenever their output is not a model output, so they cost nothing;
these kernels write the values where they must reach the caller, or where BROADCAST_ARGS
reads shapes computed at run time.

- SHAPE: the input's (static) shape, as int32 (the only output type TFLM's kernel writes).
- BROADCAST_ARGS: the broadcast of two int32 or int64 shape vectors, right-aligned; a missing
  or size-1 dimension takes the other's. TFLM fails on incompatible shapes; here the first
  operand's size is kept (there is no error path at run time).
"""
from __future__ import annotations

from ..errors import EerieError
from . import Lowered, kernel
from ._broadcast import operand

ANY = ("bool", "float32", "int8", "int16", "int32", "int64", "uint8")


@kernel("SHAPE", dtypes=ANY, outputs={d: ("int32",) for d in ANY})
def lower_shape(op, g, ctx):
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    if y.dtype != "int32" or y.size != len(x.shape):
        raise EerieError(f"SHAPE {op.name!r}: output {y.dtype} {list(y.shape)} for a "
                         f"{len(x.shape)}-D input (TFLM writes int32 only)")
    lines = [f"out0[{k}] = {int(n)};" for k, n in enumerate(x.shape)]
    return Lowered(body="\n".join(lines) or "(void)out0;", inputs=[], outputs=[y.id],
                   comment=f"SHAPE {list(x.shape)} (static)")


@kernel("BROADCAST_ARGS", dtypes=("int32", "int64"))
def lower_broadcast_args(op, g, ctx):
    a, b, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
    if not a.dtype == b.dtype == y.dtype or len(a.shape) != 1 or len(b.shape) != 1:
        raise EerieError(f"BROADCAST_ARGS {op.name!r}: needs two 1-D shape vectors of one type")
    n, na, nb = y.size, a.size, b.size
    if n != max(na, nb):
        raise EerieError(f"BROADCAST_ARGS {op.name!r}: output has {n} values, expected {max(na, nb)}")
    inputs: list[str] = []
    pa, pb = operand(a.id, g, ctx, inputs, "lhs"), operand(b.id, g, ctx, inputs, "rhs")
    t = y.ctype

    def dim(p, lack):   # right-aligned: a dimension the operand lacks is 1
        return f"{p}[i]" if lack == 0 else f"i >= {lack} ? {p}[i - {lack}] : 1"
    body = (f"int i;\n"
            f"for (i = 0; i < {n}; ++i) {{\n"
            f"    const {t} da = {dim(pa, n - na)};\n"
            f"    const {t} db = {dim(pb, n - nb)};\n"
            f"    out0[i] = da == 1 ? db : da;\n"
            f"}}")
    return Lowered(body=body, inputs=inputs, outputs=[y.id])
