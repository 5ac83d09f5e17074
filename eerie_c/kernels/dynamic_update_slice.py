"""DYNAMIC_UPDATE_SLICE: the operand with a block replaced by `update` at start indices read at
run time (int32 or int64), for float32, int8, int16 and int32 (TFLM's dtypes).

As TFLM: every start index is clamped to [0, operand_dim - update_dim], so the block always
lies inside; an update as large as the operand replaces it whole. The operand is copied to the
output, then each row of the update (its last dimension) is copied into place. Constant start
indices are clamped here, at compile time.
"""
from __future__ import annotations

import numpy as np

from ..errors import EerieError
from . import Lowered, kernel
from ._broadcast import operand


def _strides(shape):
    return [int(np.prod(shape[k + 1:], dtype=np.int64)) for k in range(len(shape))]


@kernel("DYNAMIC_UPDATE_SLICE", dtypes=("float32", "int8", "int16", "int32"))
def lower_dynamic_update_slice(op, g, ctx):
    x, u, idx, y = (g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.inputs[2]), g.t(op.outputs[0]))
    rank = len(x.shape)
    if not x.dtype == u.dtype == y.dtype or tuple(x.shape) != tuple(y.shape) \
            or len(u.shape) != rank or any(a < b for a, b in zip(x.shape, u.shape)):
        raise EerieError(f"DYNAMIC_UPDATE_SLICE {op.name!r}: update {u.dtype} {list(u.shape)} "
                         f"does not fit operand {x.dtype} {list(x.shape)}")
    if idx.dtype not in ("int32", "int64") or list(idx.shape) != [rank]:
        raise EerieError(f"DYNAMIC_UPDATE_SLICE {op.name!r}: start indices must be {rank} "
                         "int32 or int64 values")
    inputs: list[str] = []
    t = x.ctype
    if u.size == x.size:
        pu = operand(u.id, g, ctx, inputs, "update")
        return Lowered(body=f"/* the update covers the whole operand */\n"
                            f"memcpy(out0, {pu}, {x.size} * sizeof({t}));",
                       inputs=inputs, outputs=[y.id])
    px, pu = operand(x.id, g, ctx, inputs, "operand"), operand(u.id, g, ctx, inputs, "update")
    lines = [f"memcpy(out0, {px}, {x.size} * sizeof({t}));"]
    if u.size == 0:
        return Lowered(body=lines[0], inputs=inputs, outputs=[y.id])
    ost, ust = _strides(list(x.shape)), _strides(list(u.shape))
    room = [int(a) - int(b) for a, b in zip(x.shape, u.shape)]
    if idx.is_const:
        starts = [min(max(0, int(v)), r) for v, r in zip(np.asarray(idx.data).reshape(-1), room)]
        base = str(sum(s * st for s, st in zip(starts, ost)))
    else:
        pi = operand(idx.id, g, ctx, inputs, "start")
        terms = []
        lines.append("/* start indices clamped to [0, operand dim - update dim], as TFLM does */")
        for d in range(rank):
            if room[d] == 0:
                continue    # the update spans this dim: start 0
            lines.append(f"const int32_t s{d} = {pi}[{d}] < 0 ? 0 : ({pi}[{d}] > {room[d]} ? "
                         f"{room[d]} : (int32_t){pi}[{d}]);")
            terms.append(f"s{d}" if ost[d] == 1 else f"s{d} * {ost[d]}")
        base = " + ".join(terms) or "0"
    lines.append(f"{t} *dst = out0 + {base};" if base != "0" else f"{t} *dst = out0;")
    loops = [d for d in range(rank - 1) if int(u.shape[d]) > 1]
    if loops:
        lines.insert(0, f"int {', '.join(f'i{d}' for d in loops)};")
    row = int(u.shape[-1])
    ind = ""
    for d in loops:
        lines.append(f"{ind}for (i{d} = 0; i{d} < {int(u.shape[d])}; ++i{d}) {{")
        ind += "    "
    doff = " + ".join(f"i{d} * {ost[d]}" for d in loops) or "0"
    uoff = " + ".join(f"i{d} * {ust[d]}" for d in loops) or "0"
    dst = "dst" if doff == "0" else f"dst + {doff}"
    src = pu if uoff == "0" else f"{pu} + {uoff}"
    lines.append(f"{ind}memcpy({dst}, {src}, {row} * sizeof({t}));")
    for _ in loops:
        ind = ind[:-4]
        lines.append(f"{ind}}}")
    return Lowered(body="\n".join(lines), inputs=inputs, outputs=[y.id])
