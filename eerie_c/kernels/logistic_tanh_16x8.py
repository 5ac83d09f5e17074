"""TANH and LOGISTIC on int16 (TFLite's 16x8 scheme), bit-exact with TFLM's reference kernels.

Both read TFLite's 256-entry table of sigmoid(k/24) in Q0.16 (shared with the int16 LSTM
gates: helpers/lstm_act16.c.j2) with linear interpolation, after rescaling the input so one
step is 1/(3*4096) (the table spans [-10.7, 10.7]); tanh uses tanh(x) = 2 sigmoid(2x) - 1.
The rescale is TFLM's Prepare: a power-of-two input scale of 2^-12 (tanh also 2^-11) is a plain
multiply by 3 (6); otherwise the multiplier is input_scale * 3 * 4096 doubled until it exceeds
32767 / 2, with as many right shifts (rounded). Zero points must be 0 and the output scale
2^-15 (TFLM's checks, with its float32 log2 test).
"""
from __future__ import annotations

import numpy as np

from ..templating import render
from ..errors import EerieError
from . import Lowered, kernel
from ._libm import libm_f
from ._quant import tfl_round

F32 = np.float32


def checked_log2(x: float) -> tuple[bool, int]:
    """TFLite's CheckedLog2 in float32: (is a power of two within 1e-3, rounded log2)."""
    lg = F32(F32(libm_f("logf")(float(F32(x)))) * F32(F32(1) / F32(libm_f("logf")(2.0))))
    rounded = F32(tfl_round(float(lg)))
    return bool(abs(F32(lg - rounded)) < F32(1e-3)), int(rounded)


def input_rescale(kind: str, scale: float) -> tuple[int, int]:
    """(multiplier, right shift) taking the int16 input to steps of 1/(3*4096)."""
    pot, log2 = checked_log2(scale)
    left = 12 + log2
    if pot and (left == 0 or (kind == "TANH" and left == 1)):
        return 3 << left, 0
    m, shift = float(F32(scale)) * 4096.0 * 3.0, 0
    while m <= 32767.0 / 2.0 and shift <= 30:
        shift += 1
        m *= 2.0
    return int(m), shift


def _lower(op, g, ctx):
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    what = f"{op.kind} (op {op.index})"
    if y.dtype != "int16" or x.quant is None or y.quant is None:
        raise EerieError(f"{what}: int16 input needs a quantized int16 output")
    if x.zero_point or y.zero_point:
        raise EerieError(f"{what}: int16 zero points must be 0 (TFLM checks it), got "
                         f"{x.zero_point} -> {y.zero_point}")
    pot, log2 = checked_log2(y.scale)
    if not pot or log2 != -15:
        raise EerieError(f"{what}: int16 output scale must be 2^-15 (has {y.scale:g})")
    mult, shift = input_rescale(op.kind, float(x.scale))
    if mult > 32767:
        raise EerieError(f"{what}: input scale {x.scale:g} too large for TFLM's int16 kernel "
                         f"(multiplier {mult} > 32767)")
    body = render("kernels/logistic_tanh_s16.c.j2", kind=op.kind, size=x.size, mult=mult,
                  shift=shift, rnd=(1 << (shift - 1)) if shift else 0, scale_note=f"input scale {float(x.scale):.6g}")
    return Lowered(body=body, inputs=[x.id], outputs=[y.id], helpers={"lstm_act16"})


for _kind in ("TANH", "LOGISTIC"):
    kernel(_kind, dtypes=("int16",))(_lower)
