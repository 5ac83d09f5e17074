"""SOFTMAX on int16 (TFLite's 16x8 scheme), bit-exact with TFLM's reference kernel.

TFLM does not use fixed-point exp here but two interpolating 513-entry int16 lookup tables,
built at prepare time with float32 arithmetic (its gen_lut): exp(x) on [-10, 0] and
1 / (1 + x) on [0, 1], both mapped to the int16 output range [-1, 1). They are built here
the same way (every step in float32, with the C library's expf, rounding half away from
zero) and placed in flash. The row difference x - max is rescaled by
input_scale * beta / (10 / 65535) so that [-65535, 0] covers [-10, 0]; each exp (Q0.15) is
looked up, the sum normalised into [1, 2) picks the reciprocal from the second table, and the
products are rounded back to Q0.15. TFLM requires output scale 1/32768 and zero points 0.
"""
from __future__ import annotations


import numpy as np

from ..templating import render
from ..errors import EerieError
from . import Lowered, kernel
from ._libm import libm_f
from ._quant import quantize_multiplier, tfl_round

LUT_STEPS = 512


def _expf():
    """The C library's single-precision exp (what std::exp(float) calls in TFLM)."""
    return libm_f("expf")


def _f32(v) -> np.float32:
    return np.float32(v)


def gen_lut_int16(func, input_min: float, input_max: float) -> np.ndarray:
    """TFLite's gen_lut<float, int16_t, int16_t> with output range [-1, 1]: 512 samples, each
    biased by half the interpolation error at its midpoint, plus the end point."""
    lo, hi = _f32(input_min), _f32(input_max)
    step = _f32((hi - lo) / _f32(LUT_STEPS))
    half_step = _f32(step / _f32(2))
    scale = _f32(_f32(65536) / _f32(2))     # (int16 range) / (output_max - output_min)

    def rnd(v) -> np.float32:
        return _f32(tfl_round(float(v)))

    def clamp(v) -> int:
        return int(min(max(float(v), -32768.0), 32767.0))

    lut = np.zeros(LUT_STEPS + 1, np.int16)
    for i in range(LUT_STEPS):
        x = _f32(lo + _f32(_f32(i) * step))
        val = func(x)
        val_mid = func(_f32(x + half_step))
        val_next = func(_f32(lo + _f32(_f32(i + 1) * step)))
        sample = rnd(_f32(val * scale))
        interp = rnd(_f32(_f32(_f32(val_next * scale) + sample) / _f32(2)))
        mid = rnd(_f32(val_mid * scale))
        bias = rnd(_f32(_f32(interp - mid) / _f32(2)))
        lut[i] = clamp(_f32(sample - bias))
    lut[LUT_STEPS] = clamp(rnd(_f32(func(hi) * scale)))
    return lut


def exp_lut() -> np.ndarray:
    expf = _expf()
    return gen_lut_int16(lambda v: _f32(expf(float(v))), -10.0, 0.0)


def one_over_one_plus_x_lut() -> np.ndarray:
    return gen_lut_int16(lambda v: _f32(_f32(1) / _f32(_f32(1) + v)), 0.0, 1.0)


@kernel("SOFTMAX", dtypes=("int16",))
def lower_softmax_s16(op, g, ctx):
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    if y.dtype != "int16" or x.quant is None or y.quant is None:
        raise EerieError(f"SOFTMAX {op.name!r}: int16 input needs a quantized int16 output")
    if y.zero_point != 0 or abs(float(np.float32(y.scale)) - 1.0 / 32768) > 0.001 / 32768:
        raise EerieError(f"SOFTMAX {op.name!r}: int16 output must have scale 1/32768 and zero "
                         f"point 0 (has {y.scale:g}, {y.zero_point})")
    if x.zero_point != 0:
        raise EerieError(f"SOFTMAX {op.name!r}: int16 input must have zero point 0 (TFLM "
                         f"checks it), has {x.zero_point}")
    if not x.shape:
        raise EerieError(f"SOFTMAX {op.name!r}: needs an input with at least one dimension")
    depth = x.shape[-1]
    outer = x.size // depth if depth else 0
    beta = float(np.float32(op.attrs.get("beta", 1.0)))
    mult, shift = quantize_multiplier(float(np.float32(x.scale)) * beta / (10.0 / 65535.0))
    if depth * 32767 >= 1 << 31 or outer == 0:
        raise EerieError(f"SOFTMAX {op.name!r}: row length {depth} out of range for int16")
    body = render("kernels/softmax_s16.c.j2", outer=outer, depth=depth, mult=mult, shift=shift,
                  beta=beta, in_scale=float(x.scale),
                  exp_lut=ctx.const(exp_lut(), "int16_t", "exp_lut",
                                    "exp(x) on [-10, 0], 512 steps + end point, Q0.15"),
                  recip_lut=ctx.const(one_over_one_plus_x_lut(), "int16_t", "recip_lut",
                                      "1 / (1 + x) on [0, 1], 512 steps + end point, Q0.15"))
    return Lowered(body=body, inputs=[x.id], outputs=[y.id],
                   helpers={"requant", "fixedpoint", "lut16"})
