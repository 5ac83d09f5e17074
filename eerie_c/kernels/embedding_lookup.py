"""EMBEDDING_LOOKUP: out[i] = value[lookup[i]] for a 1-D int32 lookup, whole rows of a >= 2-D
value table: float32 -> float32, int8 -> int8 (the bytes as they are, as TFLM copies them),
and int8 -> float32 (hybrid: TFLM dequantizes the row, (q - 0) * scale in float, with the
table's zero point 0 and its first scale).

The table is usually a constant (flash); the lookup is read at run time. TFLM fails the invoke
on an index outside [0, rows); here that row of the output is real 0 instead (0.0f, or the
output zero point for int8), as GATHER does (gather.py), and nothing is read out of bounds.
"""
from __future__ import annotations

import numpy as np

from ..templating import c_float
from ..errors import EerieError
from . import Lowered, kernel
from ._broadcast import operand


@kernel("EMBEDDING_LOOKUP", dtypes=("float32", "int8"), key_input=1,
         outputs={"float32": ("float32",), "int8": ("float32", "int8")})
def lower_embedding_lookup(op, g, ctx):
    ids, table, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
    if ids.dtype != "int32" or len(ids.shape) != 1 or len(table.shape) < 2:
        raise EerieError(f"EMBEDDING_LOOKUP {op.name!r}: needs a 1-D int32 lookup and a table "
                         f"of rank >= 2 (TFLM's rule)")
    rows, cols = int(table.shape[0]), int(np.prod(table.shape[1:], dtype=np.int64))
    if tuple(y.shape) != (ids.size, *table.shape[1:]):
        raise EerieError(f"EMBEDDING_LOOKUP {op.name!r}: output {list(y.shape)}, expected "
                         f"{[ids.size, *table.shape[1:]]}")
    hybrid = table.dtype == "int8" and y.dtype == "float32"
    if not hybrid and y.dtype != table.dtype:
        raise EerieError(f"EMBEDDING_LOOKUP {op.name!r}: {table.dtype} table -> {y.dtype}")
    inputs: list[str] = []
    pi = operand(ids.id, g, ctx, inputs, "lookup")
    pt = operand(table.id, g, ctx, inputs, "table")
    if hybrid:
        if table.quant is None or int(table.quant.zero_point[0]) != 0:
            raise EerieError(f"EMBEDDING_LOOKUP {op.name!r}: a hybrid int8 table needs zero "
                             "point 0 (TFLM's rule)")
        scale = c_float(float(np.float32(table.quant.scale[0])))
        copy = [f"for (j = 0; j < {cols}; ++j) {{",
                f"    out0[i * {cols} + j] = (float)row[j] * {scale};",
                "}"]
        fill = [f"for (j = 0; j < {cols}; ++j) {{", f"    out0[i * {cols} + j] = 0.0f;", "}"]
        decl = "int i, j;"
    else:
        copy = [f"memcpy(out0 + i * {cols}, row, {cols} * sizeof(*out0));"]
        zero = y.zero_point if y.dtype == "int8" and y.quant is not None else 0
        if zero:
            fill = [f"memset(out0 + i * {cols}, {zero}, {cols});"]
        else:
            fill = [f"memset(out0 + i * {cols}, 0, {cols} * sizeof(*out0));"]
        decl = "int i;"
    lines = [decl,
             f"for (i = 0; i < {ids.size}; ++i) {{",
             f"    const int32_t k = {pi}[i];",
             f"    if (k >= 0 && k < {rows}) {{",
             f"        const {table.ctype} *row = {pt} + k * {cols};"]
    lines += ["        " + s for s in copy]
    lines += ["    } else {", "        /* out-of-range index: real 0, no read */"]
    lines += ["        " + s for s in fill]
    lines += ["    }", "}"]
    return Lowered(body="\n".join(lines), inputs=inputs, outputs=[y.id])
