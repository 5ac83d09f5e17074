"""TABLE_LOOKUP: an int8 -> int8 function given as its 256 results (also made by
passes/channel_tables.py for an int8 ADD / SUB / MUL by one constant); CHANNEL_TABLE: one such
function per channel (last axis), 256 results each (the same pass, for a per-channel constant).

The PyTorch frontend makes it (frontend/torch/lut_regions.py) for a PT2E program's element-wise
float computation on one int8 tensor, ending in a QUANTIZE: tanh between its dequantize and
quantize, or x - tanh(x), or x / (1 + |x|). torch evaluated that computation at compile time on
all 256 input values, so the table is the converted program's own arithmetic, rounded once,
where a chain of int8 kernels would round after each op (and TFLM's int8 TANH rounds to its
fixed output scale before any requantization). The C is one load per element.
"""
from __future__ import annotations

import numpy as np

from ..errors import EerieError
from ..templating import render
from . import Lowered, kernel


@kernel("TABLE_LOOKUP", dtypes=("int8",))
def _lower(op, g, ctx):
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    table = np.asarray(op.attrs.get("table", ()), np.int8)
    if x.dtype != "int8" or y.dtype != "int8" or table.shape != (256,):
        raise EerieError(f"TABLE_LOOKUP {op.name!r}: an int8 -> int8 table of 256 values expected")
    if x.size != y.size:
        raise EerieError(f"TABLE_LOOKUP {op.name!r}: {x.size} input values but {y.size} outputs")
    what = op.attrs.get("function", "table")
    name = ctx.const(table, "int8_t", "lut", f"{what} for inputs -128..127")
    body = render("kernels/unary_lut_s8.c.j2", size=x.size, table=name, what=what)
    return Lowered(body=body, inputs=[x.id], outputs=[y.id])


@kernel("CHANNEL_TABLE", dtypes=("int8",))
def _lower_per_channel(op, g, ctx):
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    table = np.asarray(op.attrs.get("table", ()), np.int8)
    channels = y.shape[-1] if y.shape else 0
    if x.dtype != "int8" or y.dtype != "int8" or table.shape != (channels, 256) or x.size != y.size:
        raise EerieError(f"CHANNEL_TABLE {op.name!r}: an int8 table of 256 values per channel expected")
    what = op.attrs.get("function", "table")
    name = ctx.const(table.reshape(-1), "int8_t", "lut", f"{what}: per channel, inputs -128..127")
    body = render("kernels/channel_lut_s8.c.j2", pixels=y.size // channels, channels=channels,
                  table=name, what=what)
    return Lowered(body=body, inputs=[x.id], outputs=[y.id])
