"""ADD, SUB, MUL with TFLite (NumPy) broadcasting and a fused activation.

Broadcasting is resolved at compile time (_broadcast.py): size-1 output dims are dropped and
adjacent dims whose strides line up in both operands are merged, so equal shapes become one
flat loop and e.g. [1,4,4,3] + [1,1,1,3] becomes a 16 x 3 nest. Every loop bound and stride
is a literal.

int8 follows TFLM's reference kernels, whose arithmetic is identical element by element with
and without broadcasting:
- ADD/SUB: each input, offset by its zero point, is shifted left by 20 bits and scaled by
  in_scale / (2 * max(in1_scale, in2_scale)); the sum (difference) is scaled by
  2 * max_scale / (2^20 * out_scale), offset and clamped to the activation range.
- MUL: (in1 - zp1) * (in2 - zp2) scaled by in1_scale * in2_scale / out_scale.
All multipliers are derived here in double precision from the float32 scales, as TFLM does.
An operand that stays fixed along the innermost loop is prepared once, outside it.

int32 (no quantization; loop counters of torch.while_loop) wraps on overflow like TFLM, which
applies the fused activation to SUB and MUL but ignores it for ADD (checked against TFLM).
"""
from __future__ import annotations

import numpy as np

from ..templating import render
from ..errors import EerieError
from . import Lowered, kernel
from ._broadcast import loop_plan, operand
from ._mve import has_mve
from ._mve_add import lower_add_mve
from ._quant import activation_range_float, activation_range_int, quantize_multiplier

ADD_LEFT_SHIFT = 20   # TFLM's headroom for int8 ADD/SUB
INT32_ACT = {"NONE": ("(-2147483647 - 1)", "2147483647"), "RELU": ("0", "2147483647"),
             "RELU6": ("0", "6"), "RELU_N1_TO_1": ("-1", "1")}


def _signed(v: int) -> str:
    """' + v' / ' - |v|' / '' for adding a compile-time offset."""
    return "" if v == 0 else (f" + {v}" if v > 0 else f" - {-v}")


def int8_params(kind: str, a, b, y) -> dict:
    """TFLM's int8 multipliers and shifts of ADD / SUB / MUL (the module docstring), from the
    float32 scales in double precision: MUL one (mult, shift); ADD / SUB the two inputs' and
    the output's, and the inputs' left shift as a factor."""
    s1, s2, so = (float(np.float32(t.scale)) for t in (a, b, y))
    if kind == "MUL":
        m, s = quantize_multiplier(s1 * s2 / so)
        return dict(mult=[m], shift=[s])
    twice_max = 2.0 * max(s1, s2)
    m1, sh1 = quantize_multiplier(s1 / twice_max)
    m2, sh2 = quantize_multiplier(s2 / twice_max)
    mo, sho = quantize_multiplier(twice_max / ((1 << ADD_LEFT_SHIFT) * so))
    return dict(mult=[m1, m2, mo], shift=[sh1, sh2, sho], left=1 << ADD_LEFT_SHIFT)


def int8_values(kind: str, q: dict, va, vb, za: int, zb: int, zo: int, lo: int, hi: int) -> list[int]:
    """The int8 results binary_s8.c.j2 computes (TFLM's arithmetic, eerie_requantize as
    _dsp.tflite_requantize) for the operand pairs (va[k], vb[k]): compile-time evaluation."""
    from ._dsp import tflite_requantize as rq
    out = []
    for x, w in zip(va, vb):
        ta, tb = int(x) - za, int(w) - zb
        if kind == "MUL":
            acc = rq(ta * tb, q["mult"][0], q["shift"][0])
        else:
            ta = rq(ta * q["left"], q["mult"][0], q["shift"][0])
            tb = rq(tb * q["left"], q["mult"][1], q["shift"][1])
            acc = rq(ta + tb if kind == "ADD" else ta - tb, q["mult"][2], q["shift"][2])
        out.append(min(max(acc + zo, lo), hi))
    return out


# ADD / SUB over at least this many outputs read each input's first step from a table
TABLE_MIN_ELEMENTS = 512


def input_tables(ctx, kind: str, q: dict, a, b, y) -> dict | None:
    """ADD / SUB: each input's first step (offset, shift left by 20, rescale) depends on its
    int8 value alone, so it is a table of 256 int32 computed here with the C's own arithmetic
    (eerie_requantize as _dsp.tflite_requantize): two loads replace two requantizations, and
    with the one-SMMULR sum below about 80 instructions per element become 21 on the M4. 2 KiB of flash per layer (shared by
    layers with the same parameters), so only over TABLE_MIN_ELEMENTS outputs and not under
    --optimize size. The sum's bound is then known, and its requantization is one SMMULR
    (eerie_requant_fast) where that is exact. None: the arithmetic in the loop."""
    if kind == "MUL" or ctx.optimize == "size" or y.size < TABLE_MIN_ELEMENTS:
        return None
    from ._dsp import fast_requant_values, tflite_requantize as rq
    names, bound = [], 0
    for k, t in enumerate((a, b)):
        vals = [rq((v - t.zero_point) * q["left"], q["mult"][k], q["shift"][k]) for v in range(-128, 128)]
        bound += max(abs(v) for v in vals)
        names.append(ctx.const(np.asarray(vals, np.int32), "int32_t", f"in{k}_lut",
                               f"input {k}: (x - zp) << 20, rescaled, for x = -128..127"))
    # the sum's requantization: one SMMULR where the tables bound it (eerie_requant_fast)
    fast = fast_requant_values([q["mult"][2]], [q["shift"][2]], y.zero_point, bound)
    if fast is not None:
        m, r, radd, zp_after = fast
        fast = dict(mult=int(m[0]), rshift=int(r[0]), radd=int(radd[0]), zp=_signed(zp_after))
    return {"names": names, "fast": fast}


def _lower_binary(op, g, ctx):
    kind = op.kind
    a, b, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
    act = op.attrs.get("fused_activation_function", "NONE") or "NONE"
    if a.dtype != b.dtype or a.dtype != y.dtype:
        raise EerieError(f"{kind} {op.name!r}: mixed types {a.dtype}, {b.dtype} -> {y.dtype}")
    inputs: list[str] = []
    srcs = [operand(a.id, g, ctx, inputs, "lhs"), operand(b.id, g, ctx, inputs, "rhs")]
    plan = loop_plan(y.shape, [a.shape, b.shape], srcs)
    sym = {"ADD": "+", "SUB": "-", "MUL": "*"}[kind]
    if y.dtype == "float32":
        lo, hi = activation_range_float(act)
        body = render("kernels/binary_f32.c.j2", p=plan, sym=sym, act_min=lo, act_max=hi)
        return Lowered(body=body, inputs=inputs, outputs=[y.id])
    if y.dtype == "int32":
        if a.quant is not None or b.quant is not None or y.quant is not None:
            raise EerieError(f"{kind} {op.name!r}: quantized int32 tensors are not supported")
        lo, hi = INT32_ACT[act]
        body = render("kernels/binary_s32.c.j2", p=plan, sym=sym, act_min=lo, act_max=hi,
                      clamp=kind != "ADD" and act != "NONE")
        return Lowered(body=body, inputs=inputs, outputs=[y.id])

    if a.quant is None or b.quant is None or y.quant is None:
        raise EerieError(f"{kind} {op.name!r}: int8 tensors without quantization parameters")
    q = int8_params(kind, a, b, y)
    act_min, act_max = activation_range_int(act, y)
    if kind == "ADD" and has_mve(ctx.target):   # cortex-m55: Helium ADD (_mve_add.py)
        low = lower_add_mve(ctx, a, b, y, srcs, inputs, act_min, act_max)
        if low is not None:
            return low
    tables = input_tables(ctx, kind, q, a, b, y)
    body = render("kernels/binary_s8.c.j2", p=plan, kind=kind, sym=sym, tables=tables,
                  off=[_signed(-a.zero_point), _signed(-b.zero_point)], out_off=_signed(y.zero_point),
                  act_min=act_min, act_max=act_max, **q)
    return Lowered(body=body, inputs=inputs, outputs=[y.id],
                   helpers={"requant", "dsp"} if tables and tables["fast"] else {"requant"})


for _kind in ("ADD", "SUB", "MUL"):
    kernel(_kind, dtypes=("int8", "float32", "int32"))(_lower_binary)
