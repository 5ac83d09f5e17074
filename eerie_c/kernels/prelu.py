"""PRELU: out = x >= 0 ? x : alpha * x, alpha broadcast against x (usually a constant of one
value per channel).

int8 follows TFLM: two requantizations, chosen per element by the sign of x - zp_in:
in_scale / out_scale for the identity side, in_scale * alpha_scale / out_scale for
(x - zp_in) * (alpha - zp_alpha) on the negative side; both multipliers in double precision.
int16 is the same arithmetic with an int8 alpha (TFLM requires it) and an int16 clamp.
"""
from __future__ import annotations

from ..errors import EerieError
from . import kernel
from ._broadcast import lower_elementwise, operand
from ._quant import quantize_multiplier


@kernel("PRELU", dtypes=("float32", "int8", "int16"))
def lower_prelu(op, g, ctx):
    x, a, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
    want_alpha = "int8" if x.dtype == "int16" else x.dtype
    if not (a.dtype == want_alpha and x.dtype == y.dtype):
        raise EerieError(f"PRELU {op.name!r}: input {x.dtype}, alpha {a.dtype}, output {y.dtype}")
    inputs: list[str] = []
    px, pa = operand(x.id, g, ctx, inputs, "input"), operand(a.id, g, ctx, inputs, "alpha")
    if x.dtype == "float32":
        def body(ix):
            return (f"const float v = {px}[{ix[0]}];\n"
                    f"out0[{ix[2]}] = v >= 0.0f ? v : v * {pa}[{ix[1]}];")
        return lower_elementwise(y, [x.shape, a.shape], inputs, body)
    if x.quant is None or a.quant is None or y.quant is None:
        raise EerieError(f"PRELU {op.name!r}: {x.dtype} tensors without quantization")
    lo, hi = (-128, 127) if x.dtype == "int8" else (-32768, 32767)
    sx, sa, so = (float(t.quant.scale[0]) for t in (x, a, y))
    m1, s1 = quantize_multiplier(sx / so)
    m2, s2 = quantize_multiplier(sx * sa / so)
    zx, za, zo = x.zero_point, a.zero_point, y.zero_point

    def body(ix):
        return (f"const int32_t v = (int32_t){px}[{ix[0]}] - ({zx});\n"
                f"int32_t o;\n"
                f"if (v >= 0) {{\n"
                f"    o = eerie_requantize(v, {m1}, {s1});\n"
                f"}} else {{\n"
                f"    o = eerie_requantize(v * ((int32_t){pa}[{ix[1]}] - ({za})), {m2}, {s2});\n"
                f"}}\n"
                f"o += {zo};\n"
                f"o = o < {lo} ? {lo} : o;\n"
                f"o = o > {hi} ? {hi} : o;\n"
                f"out0[{ix[2]}] = ({y.ctype})o;")
    return lower_elementwise(y, [x.shape, a.shape], inputs, body, {"requant"})
