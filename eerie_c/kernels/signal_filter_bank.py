"""TFLM signal ops on the mel filter bank: SignalFilterBank, SignalFilterBankSquareRoot and
SignalFilterBankLog.

- FilterBank: triangular mel filters over the uint32 power spectrum. TFLM walks channels
  0..num_channels: channel c sums weights[ws_c + j] * x[fs_c + j] over its width (fs: frequency
  start, ws: weight start) and hands the sum of unweights[...] * x[...] on to the next
  channel as its starting value; channel 0's own sum is dropped. So output i = (weights of
  channel i + 1) + (unweights of channel i), in uint64 arithmetic (a negative int16 weight
  converts to uint64 modulo 2^64, as in TFLM's C++). The frequency and weight tables must be
  constants: eerie-c checks at compile time that every index stays inside its array.
- FilterBankSquareRoot: rounded integer square root of each uint64 channel, shifted right by
  the int32 scalar input (SignalFftAutoScale's shift, undoing its gain).
- FilterBankLog: (x << input_correction_bits), then TFLM's fixed-point natural log times
  output_scale / 2^16, saturated to int16 (0 for inputs 0 and 1). The log's 129-point
  correction table is log2(1 + k/128) - k/128 in 1/65536 units, computed here (it equals
  TFLM's kLogLut).
"""
from __future__ import annotations

import math

import numpy as np

from ..templating import render
from . import Lowered, kernel
from ._signal import check_io, const_input, fail, int_attr, operand


@kernel("CUSTOM:SignalFilterBank", dtypes=("uint32",))
def lower_filter_bank(op, g, ctx):
    check_io(op, g, [("uint32", 1)] + [("int16", 1)] * 5, [("uint64", 1)])
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    channels = int_attr(op, "num_channels", 1, 4096)
    if y.size != channels:
        fail(op, f"output {list(y.shape)} but num_channels = {channels}")
    w_name, w = const_input(op, g, ctx, 1, "weights")
    u_name, u = const_input(op, g, ctx, 2, "unweights")
    fs_name, fs = const_input(op, g, ctx, 3, "freq_starts")
    ws_name, ws = const_input(op, g, ctx, 4, "weight_starts")
    wd_name, wd = const_input(op, g, ctx, 5, "widths")
    if min(fs.size, ws.size, wd.size) < channels + 1:
        fail(op, f"the channel tables need num_channels + 1 = {channels + 1} entries")
    fs, ws, wd = fs[:channels + 1], ws[:channels + 1], wd[:channels + 1]
    if (fs < 0).any() or (ws < 0).any() or (wd < 0).any() or (fs + wd > x.size).any() \
            or (ws + wd > min(w.size, u.size)).any():
        fail(op, "a channel reads past the spectrum or the weights (TFLM would read out of bounds)")
    body = render("kernels/signal_filter_bank.c.j2", which="bank", channels=channels,
                  max_width=max(int(wd.max()), 1), w=w_name, u=u_name, fs=fs_name, ws=ws_name,
                  wd=wd_name)
    return Lowered(body=body, inputs=[x.id], outputs=[y.id], macs=2 * int(wd.sum()),
                   comment=f"SignalFilterBank {x.size} bins -> {channels} channels")


@kernel("CUSTOM:SignalFilterBankSquareRoot", dtypes=("uint64",))
def lower_square_root(op, g, ctx):
    check_io(op, g, [("uint64", 1), ("int32", 0)], [("uint32", 1)])
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    if y.size < x.size:
        fail(op, f"output {list(y.shape)} is smaller than input {list(x.shape)}")
    ins = [x.id]
    shift = operand(op, g, ctx, 1, "scale_bits", ins)
    body = render("kernels/signal_filter_bank.c.j2", which="sqrt", n=x.size, shift=shift)
    return Lowered(body=body, inputs=ins, outputs=[y.id], helpers={"signal_math"},
                   comment=f"SignalFilterBankSquareRoot {x.size}")


def log_lut() -> list[int]:
    """TFLM's log2 correction table: 65536 * (log2(1 + k/128) - k/128) rounded, k = 0..128,
    and a trailing 0 (read only at k = 128 as the right end of the last segment)."""
    return [math.floor(65536 * (math.log2(1 + k / 128) - k / 128) + 0.5) for k in range(129)] + [0]


@kernel("CUSTOM:SignalFilterBankLog", dtypes=("uint32",))
def lower_log(op, g, ctx):
    check_io(op, g, [("uint32", 1)], [("int16", 1)])
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    if y.size < x.size:
        fail(op, f"output {list(y.shape)} is smaller than input {list(x.shape)}")
    bits = int_attr(op, "input_correction_bits", 0, 31)
    scale = int_attr(op, "output_scale", -2 ** 31, 2 ** 31 - 1) & 0xFFFFFFFF   # used as uint32
    lut = ctx.const(np.array(log_lut(), np.uint16), "uint16_t", "log_lut")
    body = render("kernels/signal_filter_bank.c.j2", which="log", n=x.size, bits=bits,
                  scale=scale, lut=lut)
    return Lowered(body=body, inputs=[x.id], outputs=[y.id], helpers={"signal_math"},
                   comment=f"SignalFilterBankLog {x.size}, << {bits}, scale {scale}")
