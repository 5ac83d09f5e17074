"""GELU float32, the formulas TFLite's reference uses: exact 0.5 x (1 + erf(x / sqrt 2)), or with
`approximate` 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
from ..errors import EerieError
from . import Lowered, kernel


@kernel("GELU", dtypes=("float32",))
def lower_gelu(op, g, ctx):
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    if y.dtype != "float32" or x.shape != y.shape:
        raise EerieError(f"GELU (op {op.index}): float32 in and out of the same shape")
    if op.attrs.get("approximate"):
        expr = "0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)))"
    else:
        expr = "0.5f * v * (1.0f + erff(v * 0.70710678118654752f))"
    body = (f"int i;\nfor (i = 0; i < {x.size}; ++i) {{\n"
            f"    const float v = in0[i];\n    out0[i] = {expr};\n}}\n")
    return Lowered(body=body, inputs=[x.id], outputs=[y.id])
