"""CIRCULAR_BUFFER (TFLM's custom op for streaming models): its int8 output [1, slots, h, w]
is a variable tensor holding the last `slots` inputs [1, 1, h, w]; each invocation moves the
rows one slot towards the front (the oldest drops out) and writes the new input last. The
output starts as its zero point, as TFLM resets variable tensors.

TFLM runs the rest of the graph only every `cycles_max`-th invocation (its kernel returns
kTfLiteAbort in between, and the invoke stops there). A compiled model has no such early
return, so only a period of 1 is supported: options cycles_max = 1, or no cycles_max and
TFLM's own rule for the two streaming models it knows (output slots 5, 13 or 25 give 1).
Other periods are refused.
"""
from __future__ import annotations

from ..errors import EerieError
from . import Lowered, kernel


def _period(op, y) -> int | None:
    a = op.attrs
    cycles = a.get("cycles_max", (a.get("custom_vector") or [0])[0])
    if cycles and cycles > 0:
        return int(cycles)
    return 1 if y.shape[1] in (5, 13, 25) else None   # TFLM's guess for unset periods


@kernel("CIRCULAR_BUFFER", dtypes=("int8",))
def lower_circular_buffer(op, g, ctx):
    what = f"CIRCULAR_BUFFER (op {op.index})"
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    if x.dtype != "int8" or y.dtype != "int8":
        raise EerieError(f"{what}: TFLM runs int8 only")
    if len(x.shape) != 4 or len(y.shape) != 4 or x.shape[0] != y.shape[0] or x.shape[1] != 1 \
            or tuple(x.shape[2:]) != tuple(y.shape[2:]):
        raise EerieError(f"{what}: input {list(x.shape)} and output {list(y.shape)}; expected "
                         "[n, 1, h, w] and [n, slots, h, w]")
    if not y.variable:
        raise EerieError(f"{what}: the output must be a variable tensor (it holds the buffer "
                         "across invocations)")
    period = _period(op, y)
    if period != 1:
        raise EerieError(f"{what}: a period of {period or 'TFLM-guessed 2'} invocations is not "
                         "supported (TFLM stops the invoke early in between; only 1 is)")
    slots, depth = int(y.shape[1]), int(y.shape[2] * y.shape[3])
    # TFLM shifts and writes only the first batch's buffer (its kernel ignores the batch dim)
    body = (f"/* drop the oldest of {slots} rows of {depth}, append the input */\n"
            f"memmove(state0, state0 + {depth}, {(slots - 1) * depth});\n"
            f"memcpy(state0 + {(slots - 1) * depth}, in0, {depth});")
    return Lowered(body=body, inputs=[x.id], outputs=[], updates=[y.id],
                   comment=f"CIRCULAR_BUFFER of {slots} x {depth}")
