"""CONCATENATION along any axis (negative counts from the end), any number of inputs.

Row-major layout makes this a copy of contiguous slabs: for each index of the dimensions
before the axis, every input contributes one slab (its axis size times the inner size) at a
fixed offset within the output row. Constant inputs are read from flash.

int8 mirrors TFLM, which never requantizes: it refuses (at prepare) any input whose scale or
zero point differs from the output's, so the values are copied as they are. TFLM also rejects
any fused activation other than NONE.
"""
import numpy as np

from ..templating import render
from ..errors import EerieError
from . import Lowered, kernel


@kernel("CONCATENATION", dtypes=("int8", "float32", "int16", "int32", "int64", "bool"))
def lower_concatenation(op, g, ctx):
    y = g.t(op.outputs[0])
    xs = [g.t(t) for t in op.inputs if t is not None]
    rank = len(y.shape)
    act = op.attrs.get("fused_activation_function", "NONE")
    if act != "NONE":
        raise EerieError(f"CONCATENATION (op {op.index}): fused activation {act} is not supported "
                         f"(TFLM accepts only NONE)")
    axis = int(op.attrs.get("axis", 0))
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < max(rank, 1):
        raise EerieError(f"CONCATENATION (op {op.index}): axis {op.attrs.get('axis')} out of range "
                         f"for rank {rank}")
    for x in xs:
        same_rest = len(x.shape) == rank and all(
            a == b for i, (a, b) in enumerate(zip(x.shape, y.shape)) if i != axis)
        if x.dtype != y.dtype or not same_rest:
            raise EerieError(f"CONCATENATION (op {op.index}): input {x.dtype}{list(x.shape)} does "
                             f"not fit output {y.dtype}{list(y.shape)} on axis {axis}")
    if y.dtype == "int8":
        for x in xs:
            if x.quant is None or y.quant is None or x.quant.per_channel or y.quant.per_channel \
                    or np.float32(x.scale) != np.float32(y.scale) or x.zero_point != y.zero_point:
                raise EerieError(
                    f"CONCATENATION (op {op.index}): int8 inputs must have the output's "
                    f"quantization (TFLM does not requantize); {x.label or x.id!r} differs")
    if rank and sum(x.shape[axis] for x in xs) != y.shape[axis]:
        raise EerieError(f"CONCATENATION (op {op.index}): the inputs' sizes on axis {axis} do not "
                         f"add up to the output's {y.shape[axis]}")

    outer = int(np.prod(y.shape[:axis], dtype=np.int64))
    inner = int(np.prod(y.shape[axis + 1:], dtype=np.int64))
    row = y.shape[axis] * inner if rank else 1
    params: list[str] = []          # activation tensor ids, deduplicated, -> in0, in1, ...
    parts, offset = [], 0
    for k, x in enumerate(xs):
        chunk = (x.shape[axis] if rank else 1) * inner
        if chunk == 0:
            continue      # an empty input contributes nothing (and must not become a parameter)
        if x.is_const:
            src = ctx.tensor_const(x, f"part{k}")
        else:
            if x.id not in params:
                params.append(x.id)
            src = f"in{params.index(x.id)}"
        parts.append(dict(src=src, chunk=chunk, offset=offset))
        offset += chunk
    body = render("kernels/concatenation.c.j2", parts=parts, outer=outer, row=row, ctype=y.ctype)
    return Lowered(body=body, inputs=params, outputs=[y.id])
