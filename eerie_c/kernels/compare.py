"""Comparisons (EQUAL, NOT_EQUAL, LESS, LESS_EQUAL, GREATER, GREATER_EQUAL), LOGICAL_AND / OR /
NOT, SELECT_V2, MAXIMUM and MINIMUM, all with TFLite broadcasting resolved at compile time,
and SELECT (v1: no broadcasting, a 1-D condition picks along the first dim).

Dtypes are those TFLM runs: comparisons on float32, int32, int64 and int8 (EQUAL / NOT_EQUAL
also bool; TFLM's int16 GREATER is not taken: its results do not follow its own scaling rule,
e.g. every element compares false without broadcasting); logical ops on bool; SELECT_V2 on float32, int8, int16
(the condition is bool); MAXIMUM / MINIMUM on float32, int8, int16, int32, int64.

Quantized comparisons follow TFLM: each side, offset by its zero point, is shifted left by
8 bits and scaled by its own tensor scale (a Q31 multiplier with a right shift, TFLM's
"smaller than one" form, so scales must be below 1), and the two rescaled integers are
compared. MAXIMUM / MINIMUM and SELECT_V2 compare or copy the raw int8 values, as TFLM does.
"""
from __future__ import annotations

from ..errors import EerieError
from . import kernel
from ._broadcast import lower_elementwise, operand
from ._quant import quantize_multiplier

CMP = {"EQUAL": "==", "NOT_EQUAL": "!=", "LESS": "<", "LESS_EQUAL": "<=", "GREATER": ">",
       "GREATER_EQUAL": ">="}
CMP_LEFT_SHIFT = 8


def _scaled_operand(t, op):
    """(multiplier, shift) TFLM uses to bring one quantized comparison operand to a common
    scale; the shift must not be a left shift."""
    if t.quant is None:
        raise EerieError(f"{op.kind} {op.name!r}: {t.dtype} operand without quantization")
    m, s = quantize_multiplier(float(t.quant.scale[0]))
    if s > 0:
        raise EerieError(f"{op.kind} {op.name!r}: operand scale {t.scale:g} is not below 1, "
                         f"which TFLM's quantized comparison requires")
    return m, s


def _lower_compare(op, g, ctx):
    a, b, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
    if a.dtype != b.dtype or y.dtype != "bool":
        raise EerieError(f"{op.kind} {op.name!r}: {a.dtype} and {b.dtype} -> {y.dtype} "
                         f"(needs equal input types and a bool output)")
    inputs: list[str] = []
    pa, pb = operand(a.id, g, ctx, inputs, "lhs"), operand(b.id, g, ctx, inputs, "rhs")
    sym = CMP[op.kind]
    helpers = set()
    if a.dtype == "int8":
        (ma, sa), (mb, sb) = _scaled_operand(a, op), _scaled_operand(b, op)
        za, zb = a.zero_point, b.zero_point

        def body(ix):
            return (f"const int32_t va = eerie_requantize(((int32_t){pa}[{ix[0]}] - ({za})) * "
                    f"{1 << CMP_LEFT_SHIFT}, {ma}, {sa});\n"
                    f"const int32_t vb = eerie_requantize(((int32_t){pb}[{ix[1]}] - ({zb})) * "
                    f"{1 << CMP_LEFT_SHIFT}, {mb}, {sb});\n"
                    f"out0[{ix[2]}] = (uint8_t)(va {sym} vb);")
        helpers.add("requant")
    else:
        def body(ix):
            return f"out0[{ix[2]}] = (uint8_t)({pa}[{ix[0]}] {sym} {pb}[{ix[1]}]);"
    return lower_elementwise(y, [a.shape, b.shape], inputs, body, helpers)


for _kind in CMP:
    _dt = ["float32", "int8", "int32", "int64"]
    if _kind in ("EQUAL", "NOT_EQUAL"):
        _dt.append("bool")
    kernel(_kind, dtypes=tuple(_dt))(_lower_compare)


def _check_same(op, g, tids, dtype=None):
    dts = {g.t(t).dtype for t in tids}
    if len(dts) != 1 or (dtype and dts != {dtype}):
        raise EerieError(f"{op.kind} {op.name!r}: operand types {sorted(dts)}"
                         + (f" (needs {dtype})" if dtype else " differ"))


@kernel("LOGICAL_AND", dtypes=("bool",))
@kernel("LOGICAL_OR", dtypes=("bool",))
def lower_logical(op, g, ctx):
    a, b, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
    _check_same(op, g, [a.id, b.id, y.id], "bool")
    inputs: list[str] = []
    pa, pb = operand(a.id, g, ctx, inputs, "lhs"), operand(b.id, g, ctx, inputs, "rhs")
    sym = "&&" if op.kind == "LOGICAL_AND" else "||"
    return lower_elementwise(
        y, [a.shape, b.shape], inputs,
        lambda ix: f"out0[{ix[2]}] = (uint8_t)({pa}[{ix[0]}] {sym} {pb}[{ix[1]}]);")


@kernel("LOGICAL_NOT", dtypes=("bool",))
def lower_logical_not(op, g, ctx):
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    _check_same(op, g, [x.id, y.id], "bool")
    return lower_elementwise(y, [x.shape], [x.id],
                             lambda ix: f"out0[{ix[1]}] = (uint8_t)!in0[{ix[0]}];")


@kernel("MAXIMUM", dtypes=("float32", "int8", "int16", "int32", "int64"))
@kernel("MINIMUM", dtypes=("float32", "int8", "int16", "int32", "int64"))
def lower_max_min(op, g, ctx):
    a, b, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
    _check_same(op, g, [a.id, b.id, y.id])
    inputs: list[str] = []
    pa, pb = operand(a.id, g, ctx, inputs, "lhs"), operand(b.id, g, ctx, inputs, "rhs")
    sym = ">" if op.kind == "MAXIMUM" else "<"

    def body(ix):
        return (f"const {a.ctype} va = {pa}[{ix[0]}];\n"
                f"const {a.ctype} vb = {pb}[{ix[1]}];\n"
                f"out0[{ix[2]}] = va {sym} vb ? va : vb;")
    return lower_elementwise(y, [a.shape, b.shape], inputs, body)


@kernel("SELECT_V2", dtypes=("float32", "int8", "int16"), key_input=1)
def lower_select_v2(op, g, ctx):
    c, a, b, y = (g.t(t) for t in (*op.inputs[:3], op.outputs[0]))
    if c.dtype != "bool":
        raise EerieError(f"SELECT_V2 {op.name!r}: condition is {c.dtype}, not bool")
    _check_same(op, g, [a.id, b.id, y.id])
    inputs: list[str] = []
    pc = operand(c.id, g, ctx, inputs, "cond")
    pa, pb = operand(a.id, g, ctx, inputs, "then"), operand(b.id, g, ctx, inputs, "else")
    return lower_elementwise(
        y, [c.shape, a.shape, b.shape], inputs,
        lambda ix: f"out0[{ix[3]}] = {pc}[{ix[0]}] ? {pa}[{ix[1]}] : {pb}[{ix[2]}];")


@kernel("SELECT", dtypes=("float32", "int8", "int16", "int32"), key_input=1)
def lower_select(op, g, ctx):
    """SELECT (v1, TFLite's semantics: TFLM has no SELECT): no broadcasting; the condition has
    the shape of x and y, or is a scalar, or is 1-D with x's first dim and picks whole slabs
    x[i] / y[i] (a condition of shape [n] is read as [n, 1, ..., 1])."""
    c, a, b, y = (g.t(t) for t in (*op.inputs[:3], op.outputs[0]))
    if c.dtype != "bool":
        raise EerieError(f"SELECT {op.name!r}: condition is {c.dtype}, not bool")
    _check_same(op, g, [a.id, b.id, y.id])
    shape = list(a.shape)
    if list(b.shape) != shape or list(y.shape) != shape:
        raise EerieError(f"SELECT {op.name!r}: x {list(a.shape)}, y {list(b.shape)} and output "
                         f"{list(y.shape)} must have the same shape")
    if list(c.shape) == shape or not c.shape:
        cshape = list(c.shape)
    elif len(c.shape) == 1 and shape and c.shape[0] == shape[0]:
        cshape = [c.shape[0]] + [1] * (len(shape) - 1)
    else:
        raise EerieError(f"SELECT {op.name!r}: condition {list(c.shape)} must be a scalar, have "
                         f"the shape of x {shape}, or be 1-D of x's first dim (SELECT_V2 "
                         f"broadcasts)")
    inputs: list[str] = []
    pc = operand(c.id, g, ctx, inputs, "cond")
    pa, pb = operand(a.id, g, ctx, inputs, "then"), operand(b.id, g, ctx, inputs, "else")
    return lower_elementwise(
        y, [cshape, shape, shape], inputs,
        lambda ix: f"out0[{ix[3]}] = {pc}[{ix[0]}] ? {pa}[{ix[1]}] : {pb}[{ix[2]}];")
