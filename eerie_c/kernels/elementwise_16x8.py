"""ADD, SUB, MUL on int16 tensors (TFLite's "16x8" scheme: int16 activations, zero point 0),
with TFLite broadcasting and a fused activation, bit-exact with TFLM's reference kernels.

- ADD / SUB take TFLM's general requantizing path (the one int8 uses) with a left shift of 15
  instead of 20: each input is shifted left by 15 bits and scaled by
  in_scale / (2 * max(in1_scale, in2_scale)), the sum (difference) is scaled by
  2 * max_scale / (2^15 * out_scale), all in double precision from the float32 scales (newer
  TFLM sources divide SUB's scales in float32 first; the TFLM build this is checked against
  uses double for both, see tests/ops/test_16x8_elementwise.py). All three multipliers must
  be below 1 (TFLM checks it).
- MUL: a * b scaled by in1_scale * in2_scale / out_scale (double), which may exceed 1.
Zero points must be 0: TFLM requires it for MUL, and it keeps |x| * 2^15 inside int32 for
ADD / SUB. Broadcasting (_broadcast.py) and loop structure are those of elementwise.py (int8 /
float32).
"""
from __future__ import annotations

import numpy as np

from ..templating import render
from ..errors import EerieError
from . import Lowered, kernel
from ._broadcast import loop_plan, operand
from ._quant import activation_range_int, quantize_multiplier

ADD_LEFT_SHIFT_16 = 15   # TFLM's headroom for int16 ADD/SUB


def _below_one(op, real: float, what: str) -> tuple[int, int]:
    if not 0.0 < real < 1.0:
        raise EerieError(f"{op.kind} (op {op.index}): int16 {what} multiplier {real:g} is not "
                         f"in (0, 1), which TFLM's 16-bit {op.kind} requires (output scale too "
                         f"small for the input scales)")
    return quantize_multiplier(real)


def add_sub_multipliers(op, s1: np.float32, s2: np.float32, so: np.float32):
    """(mults, shifts) for input1, input2 and the output, as TFLM's Prepare computes them."""
    twice = 2.0 * float(max(s1, s2))
    reals = [float(s1) / twice, float(s2) / twice, twice / ((1 << ADD_LEFT_SHIFT_16) * float(so))]
    ms = [_below_one(op, r, w) for r, w in zip(reals, ("input 1", "input 2", "output"))]
    return [m for m, _ in ms], [s for _, s in ms]


def _lower_binary_s16(op, g, ctx):
    kind = op.kind
    a, b, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
    act = op.attrs.get("fused_activation_function", "NONE") or "NONE"
    if a.dtype != b.dtype or a.dtype != y.dtype:
        raise EerieError(f"{kind} {op.name!r}: mixed types {a.dtype}, {b.dtype} -> {y.dtype}")
    if a.quant is None or b.quant is None or y.quant is None:
        raise EerieError(f"{kind} {op.name!r}: int16 tensors without quantization parameters")
    if a.zero_point or b.zero_point or y.zero_point:
        raise EerieError(f"{kind} {op.name!r}: int16 tensors need zero point 0 (TFLite's 16x8 "
                         f"scheme); got {a.zero_point}, {b.zero_point} -> {y.zero_point}")
    inputs: list[str] = []
    srcs = [operand(a.id, g, ctx, inputs, "lhs"), operand(b.id, g, ctx, inputs, "rhs")]
    plan = loop_plan(y.shape, [a.shape, b.shape], srcs)
    s1, s2, so = (np.float32(t.scale) for t in (a, b, y))
    if kind == "MUL":
        m, s = quantize_multiplier(float(s1) * float(s2) / float(so))
        q = dict(mult=[m], shift=[s])
    else:
        mults, shifts = add_sub_multipliers(op, s1, s2, so)
        q = dict(mult=mults, shift=shifts, left=1 << ADD_LEFT_SHIFT_16)
    act_min, act_max = activation_range_int(act, y, -32768, 32767)
    body = render("kernels/binary_s16.c.j2", p=plan, kind=kind,
                  sym={"ADD": "+", "SUB": "-", "MUL": "*"}[kind],
                  act_min=act_min, act_max=act_max, **q)
    return Lowered(body=body, inputs=inputs, outputs=[y.id], helpers={"requant"})


for _kind in ("ADD", "SUB", "MUL"):
    kernel(_kind, dtypes=("int16",))(_lower_binary_s16)
