"""The 16x8 quantization scheme for CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED: int16
activations (input and output zero point 0), int8 symmetric weights (per channel, or per
tensor), optional bias. Portable C only (no DSP variant).

TFLM picks its accumulator from the bias type, and the requantization follows it:

* int64 bias or no bias: a 64-bit sum, requantized with the 64-bit
  MultiplyByQuantizedMultiplier (the Q31 multiplier rounded to Q15, then a single rounding
  shift; helpers/requant64.c.j2). The reduced multiplier and the total shift are computed
  here, at compile time.
* int32 bias (CONV_2D, FULLY_CONNECTED): a 32-bit sum (which wraps on overflow: the kernel
  sums in uint32_t to get the same bits without UB), requantized by the 32-bit
  MultiplyByQuantizedMultiplier (eerie_requantize, as for int8). Checked against TFLM,
  including a sum that overflows int32.
* DEPTHWISE_CONV_2D always reads its bias as int64; TFLM would reinterpret an int32 bias as
  int64 (garbage outputs), so that is rejected.

The result is clamped to the fused activation's range in int16 and stored; there is no
output offset (the zero point is 0).
"""
from __future__ import annotations

import numpy as np

from ..templating import render
from ..errors import EerieError
from . import Lowered, kernel
from ._quant import activation_range_int, per_channel_multipliers
from .window import conv_window, depthwise_window, op_what

INT16_MIN, INT16_MAX = -32768, 32767


def check_16x8(x, w, y, b, what: str, bias_types: tuple[str, ...]):
    """The tensor types and quantization the 16x8 scheme needs."""
    if w.dtype != "int8" or y.dtype != "int16":
        raise EerieError(f"{what}: int16 input needs int8 weights and an int16 output "
                         f"(got {w.dtype} weights, {y.dtype} output)")
    if not w.is_const or (b is not None and not b.is_const):
        raise EerieError(f"{what}: weights and bias must be constant tensors")
    if b is not None and b.dtype not in bias_types:
        raise EerieError(f"{what}: 16x8 quantization needs a {' or '.join(bias_types)} bias, "
                         f"got {b.dtype}")
    if x.quant is None or y.quant is None or w.quant is None:
        raise EerieError(f"{what}: int16 tensors without quantization parameters")
    if x.zero_point != 0 or y.zero_point != 0:
        raise EerieError(f"{what}: 16x8 quantization needs input and output zero point 0 "
                         f"(got {x.zero_point} and {y.zero_point})")
    if np.any(np.asarray(w.quant.zero_point) != 0):
        raise EerieError(f"{what}: int8 weights must be symmetric (zero point 0)")


def requant_vars(ctx, x, w, y, channels: int, act: str, wide: bool, what: str) -> dict:
    """The `q` dict of templates/kernels/requant_s16.j2: multipliers per channel (or per
    tensor), in the form the chosen accumulator's requantization takes."""
    if w.quant.per_channel and len(w.quant.scale) != channels:
        raise EerieError(f"{what}: {len(w.quant.scale)} weight scales for {channels} output channels")
    mult, shift = per_channel_multipliers(x, w, y, channels)
    per_channel = w.quant.per_channel
    if wide:
        m64 = mult.astype(np.int64)
        mult = np.where(m64 < 0x7FFF0000, (m64 + (1 << 15)) >> 16, 0x7FFF).astype(np.int32)
        shift = (15 - shift.astype(np.int64)).astype(np.int32)   # total right shift
        if shift.min(initial=15) < 1:
            raise EerieError(f"{what}: requantization scale input*weight/output is too large "
                             f"(needs a left shift of more than 14 bits)")
        names = ("multiplier_q15", "total_shift")
    else:
        names = ("multiplier", "shift")
    act_min, act_max = activation_range_int(act, y, INT16_MIN, INT16_MAX)
    return dict(
        wide=wide, per_channel=per_channel,
        mult=ctx.const(mult, "int32_t", names[0]) if per_channel else int(mult[0]),
        shift=ctx.const(shift, "int32_t", names[1]) if per_channel else int(shift[0]),
        act_min=act_min, act_max=act_max)


def bias_const(ctx, b, wide: bool):
    if b is None:
        return None
    data = b.data.reshape(-1)
    if wide:
        return ctx.const(data.astype(np.int64), "int64_t", "bias", "int64 bias")
    return ctx.const(data.astype(np.int32), "int32_t", "bias", "int32 bias")


def operands(op, g, what: str, ndim: int):
    if len(op.inputs) < 2 or op.inputs[1] is None:
        raise EerieError(f"{what}: missing weights")
    x, w, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
    b = g.t(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] is not None else None
    if ndim and (len(x.shape) != ndim or len(w.shape) != ndim or len(y.shape) != ndim):
        raise EerieError(f"{what}: expected {ndim}-D input, weights and output, got "
                         f"{list(x.shape)}, {list(w.shape)}, {list(y.shape)}")
    return x, w, b, y


@kernel("CONV_2D", dtypes=("int16",), schemes={"int16": "16x8"})
def lower_conv2d_16x8(op, g, ctx):
    what = op_what(op)
    x, w, b, y = operands(op, g, what, 4)
    check_16x8(x, w, y, b, what, ("int64", "int32"))
    win = conv_window(op, x, w, b, y, what)
    batches, in_h, in_w, in_c = x.shape
    out_c, kh, kw = w.shape[:3]
    act = op.attrs.get("fused_activation_function", "NONE")
    wide = b is None or b.dtype == "int64"
    body = render("kernels/conv2d_s16.c.j2", batches=batches, in_h=in_h, in_w=in_w, in_c=in_c,
                  out_c=out_c, w=win, weights=ctx.tensor_const(w, "weights"),
                  bias=bias_const(ctx, b, wide),
                  q=requant_vars(ctx, x, w, y, out_c, act, wide, what))
    return Lowered(body=body, inputs=[x.id], outputs=[y.id],
                   helpers={"requant64"} if wide else {"requant"},
                   macs=batches * win.out_h * win.out_w * out_c * kh * kw * in_c)


@kernel("DEPTHWISE_CONV_2D", dtypes=("int16",), schemes={"int16": "16x8"})
def lower_depthwise_16x8(op, g, ctx):
    what = op_what(op)
    x, w, b, y = operands(op, g, what, 4)
    # TFLM reads a 16x8 depthwise bias as int64 whatever its type
    check_16x8(x, w, y, b, what, ("int64",))
    win = depthwise_window(op, x, w, b, y, what)
    batches, in_h, in_w, in_c = x.shape
    kh, kw, out_c = w.shape[1:]
    mult = out_c // in_c
    act = op.attrs.get("fused_activation_function", "NONE")
    body = render("kernels/depthwise_s16.c.j2", batches=batches, in_h=in_h, in_w=in_w, in_c=in_c,
                  out_c=out_c, depth_mult=mult, w=win, weights=ctx.tensor_const(w, "weights"),
                  bias=bias_const(ctx, b, True),
                  q=requant_vars(ctx, x, w, y, out_c, act, True, what))
    return Lowered(body=body, inputs=[x.id], outputs=[y.id], helpers={"requant64"},
                   macs=batches * win.out_h * win.out_w * out_c * kh * kw)


@kernel("FULLY_CONNECTED", dtypes=("int16",), schemes={"int16": "16x8"})
def lower_fully_connected_16x8(op, g, ctx):
    what = op_what(op)
    x, w, b, y = operands(op, g, what, 0)
    if not w.is_const or (b is not None and not b.is_const):
        raise EerieError(f"{what}: unsupported: weights or bias computed by the graph with int16 "
                         f"activations (run-time weights: int8 and float32)")
    check_16x8(x, w, y, b, what, ("int64", "int32"))
    if len(w.shape) != 2:
        raise EerieError(f"{what}: expected 2-D weights, got {list(w.shape)}")
    units, depth = w.shape
    if depth == 0 or x.size % depth != 0:
        raise EerieError(f"{what}: input of {x.size} values is not a whole number of "
                         f"{depth}-value rows")
    batches = x.size // depth
    if y.size != batches * units:
        raise EerieError(f"{what}: output {list(y.shape)} does not hold {batches} x {units} values")
    if b is not None and b.size != units:
        raise EerieError(f"{what}: bias has {b.size} values for {units} units")
    act = op.attrs.get("fused_activation_function", "NONE")
    wide = b is None or b.dtype == "int64"
    body = render("kernels/fully_connected_s16.c.j2", batches=batches, units=units, depth=depth,
                  weights=ctx.tensor_const(w, "weights"), bias=bias_const(ctx, b, wide),
                  q=requant_vars(ctx, x, w, y, units, act, wide, what))
    return Lowered(body=body, inputs=[x.id], outputs=[y.id],
                   helpers={"requant64"} if wide else {"requant"},
                   macs=batches * units * depth)
