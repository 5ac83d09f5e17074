"""CHANNEL_TABLE: an int8 -> int8 function per channel (last axis), given as 256 results per
channel (passes/channel_tables.py makes it from an ADD / SUB / MUL by a per-channel constant,
with the op's own arithmetic). The C is one load per element."""
from __future__ import annotations

import numpy as np

from ..errors import EerieError
from ..templating import render
from . import Lowered, kernel


@kernel("CHANNEL_TABLE", dtypes=("int8",))
def _lower(op, g, ctx):
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
