"""FLOOR_DIV and FLOOR_MOD, float32 (the only dtype TFLM's kernels run), with TFLite
broadcasting.

As TFLM's reference functions:
- FLOOR_DIV: floor(a / b) with the quotient taken in double, then rounded to float.
- FLOOR_MOD: r = fmodf(a, b) (truncated remainder, sign of a); when r is non-zero and its sign
  differs from b's, r + b (the remainder takes the sign of the divisor).
TFLM refuses to run FLOOR_DIV when any divisor is 0 ("Division by 0"); the generated code
has no error path per element, so it gives what the formula gives (+-inf or NaN).
"""
from __future__ import annotations

from ..errors import EerieError
from . import kernel
from ._broadcast import lower_elementwise, operand


def _lower(op, g, ctx):
    a, b, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
    if not a.dtype == b.dtype == y.dtype == "float32":
        raise EerieError(f"{op.kind} {op.name!r}: {a.dtype} and {b.dtype} -> {y.dtype} "
                         "(TFLM runs float32 only)")
    inputs: list[str] = []
    pa, pb = operand(a.id, g, ctx, inputs, "lhs"), operand(b.id, g, ctx, inputs, "rhs")

    if op.kind == "FLOOR_DIV":
        def body(ix):
            return f"out0[{ix[2]}] = (float)floor((double){pa}[{ix[0]}] / (double){pb}[{ix[1]}]);"
    else:
        def body(ix):
            return (f"const float d = {pb}[{ix[1]}];\n"
                    f"const float r = fmodf({pa}[{ix[0]}], d);\n"
                    f"/* the remainder takes the divisor's sign */\n"
                    f"out0[{ix[2]}] = (r != 0.0f && ((d < 0.0f) != (r < 0.0f))) ? r + d : r;")
    return lower_elementwise(y, [a.shape, b.shape], inputs, body)


for _kind in ("FLOOR_DIV", "FLOOR_MOD"):
    kernel(_kind, dtypes=("float32",))(_lower)
