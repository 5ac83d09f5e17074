"""ADD, SUB, MUL with TFLite (NumPy) broadcasting and a fused activation.

Broadcasting is resolved at compile time: size-1 output dims are dropped and adjacent dims
whose strides line up in both operands are merged, so equal shapes become one flat loop and
e.g. [1,4,4,3] + [1,1,1,3] becomes a 16 x 3 nest. Every loop bound and stride is a literal.

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

from ..emit import render
from ..errors import EerieError
from . import Lowered, kernel
from ._mve import has_mve
from ._mve_add import lower_add_mve
from ._quant import activation_range_float, activation_range_int, quantize_multiplier

ADD_LEFT_SHIFT = 20   # TFLM's headroom for int8 ADD/SUB
INT32_ACT = {"NONE": ("(-2147483647 - 1)", "2147483647"), "RELU": ("0", "2147483647"),
             "RELU6": ("0", "6"), "RELU_N1_TO_1": ("-1", "1")}


def _contiguous_strides(shape):
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return strides[::-1]


def broadcast_dims(out_shape, shapes):
    """Loop dims for writing `out_shape` contiguously from operands of `shapes`.

    Returns a list of (n, [stride per operand], out_stride), outermost first; a stride of 0
    means the operand is broadcast along that dim."""
    out_shape = tuple(int(n) for n in out_shape)
    if tuple(np.broadcast_shapes(*[tuple(s) for s in shapes], out_shape)) != out_shape:
        raise EerieError(f"shapes {[list(s) for s in shapes]} do not broadcast to {list(out_shape)}")
    rank = len(out_shape)
    per_op = []
    for shape in shapes:
        padded = (1,) * (rank - len(shape)) + tuple(int(n) for n in shape)
        if any(p not in (1, o) for p, o in zip(padded, out_shape)):
            raise EerieError(f"shape {list(shape)} does not broadcast to {list(out_shape)}")
        cs = _contiguous_strides(padded)
        per_op.append([0 if p == 1 else s for p, s in zip(padded, cs)])
    dims = [[out_shape[i], [st[i] for st in per_op]] for i in range(rank) if out_shape[i] != 1]
    merged: list = []
    for n, st in dims:
        if merged:
            pn, pst = merged[-1]
            # the outer dim steps exactly over a whole inner dim in every operand: merge
            if all(ps == s * n for ps, s in zip(pst, st)):
                merged[-1] = [pn * n, st]
                continue
        merged.append([n, st])
    if not merged:
        merged = [[1, [0] * len(shapes)]]
    ostrides = _contiguous_strides([n for n, _ in merged])
    return [(n, st, os_) for (n, st), os_ in zip(merged, ostrides)]


def loop_plan(out_shape, shapes, sources):
    """What the loop templates need: loop bounds, base pointer expressions per operand for
    the innermost block, and each operand's access expression in the innermost loop."""
    dims = broadcast_dims(out_shape, shapes)
    outer, (inner_n, inner_st, _) = dims[:-1], dims[-1]
    depth = len(dims)
    iv = f"i{depth - 1}"

    def base(src, k):
        if not outer:
            return src
        terms = [f"i{d} * {st[k]}" if st[k] != 1 else f"i{d}"
                 for d, (_, st, _) in enumerate(outer) if st[k] != 0]
        return " + ".join([src] + terms)

    def obase():
        if not outer:
            return "out0"
        return " + ".join(["out0"] + [f"i{d} * {os_}" for d, (_, _, os_) in enumerate(outer)])

    ptrs = ["a", "b"] if outer else list(sources)
    access = [f"{p}[{iv}]" if inner_st[k] else f"{p}[0]" for k, p in enumerate(ptrs)]
    return dict(
        outer=[n for n, _, _ in outer], inner_n=inner_n, iv=iv, depth=depth,
        a_base=base(sources[0], 0), b_base=base(sources[1], 1), o_base=obase(),
        o_ptr="o" if outer else "out0",
        av=access[0], bv=access[1],
        a_fixed=inner_st[0] == 0, b_fixed=inner_st[1] == 0)


def _signed(v: int) -> str:
    """' + v' / ' - |v|' / '' for adding a compile-time offset."""
    return "" if v == 0 else (f" + {v}" if v > 0 else f" - {-v}")


def _operand(tid, g, ctx, hint, inputs):
    """C expression of an operand's base pointer: a global for constants, else in<k>."""
    t = g.t(tid)
    if t.is_const:
        return ctx.tensor_const(t, hint)
    if tid not in inputs:
        inputs.append(tid)
    return f"in{inputs.index(tid)}"


def _lower_binary(op, g, ctx):
    kind = op.kind
    a, b, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
    act = op.attrs.get("fused_activation_function", "NONE") or "NONE"
    if a.dtype != b.dtype or a.dtype != y.dtype:
        raise EerieError(f"{kind} {op.name!r}: mixed types {a.dtype}, {b.dtype} -> {y.dtype}")
    inputs: list[str] = []
    srcs = [_operand(a.id, g, ctx, "lhs", inputs), _operand(b.id, g, ctx, "rhs", inputs)]
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
    s1, s2, so = (float(np.float32(t.scale)) for t in (a, b, y))
    if kind == "MUL":
        m, s = quantize_multiplier(s1 * s2 / so)
        q = dict(mult=[m], shift=[s])
    else:
        twice_max = 2.0 * max(s1, s2)
        m1, sh1 = quantize_multiplier(s1 / twice_max)
        m2, sh2 = quantize_multiplier(s2 / twice_max)
        mo, sho = quantize_multiplier(twice_max / ((1 << ADD_LEFT_SHIFT) * so))
        q = dict(mult=[m1, m2, mo], shift=[sh1, sh2, sho], left=1 << ADD_LEFT_SHIFT)
    act_min, act_max = activation_range_int(act, y)
    if kind == "ADD" and has_mve(ctx.target):   # cortex-m55: Helium ADD (_mve_add.py)
        low = lower_add_mve(ctx, a, b, y, srcs, inputs, act_min, act_max)
        if low is not None:
            return low
    body = render("kernels/binary_s8.c.j2", p=plan, kind=kind, sym=sym,
                  off=[_signed(-a.zero_point), _signed(-b.zero_point)], out_off=_signed(y.zero_point),
                  act_min=act_min, act_max=act_max, **q)
    return Lowered(body=body, inputs=inputs, outputs=[y.id], helpers={"requant"})


for _kind in ("ADD", "SUB", "MUL"):
    kernel(_kind, dtypes=("int8", "float32", "int32"))(_lower_binary)
