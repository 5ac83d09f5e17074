"""TFLM's SignalRfft (int16, int32, float32): the real FFT of each frame, as the KISS FFT v130
build of that type in TFLM's signal library runs it, bit for bit (kernels/_kiss_fft.py).

Each frame (the last axis, input_length samples) is zero-padded to fft_length L, read as N = L/2
complex values, transformed by KISS FFT's mixed-radix complex FFT, then split into the L/2 + 1
bins of the real spectrum (kiss_fftr), written as (re, im) pairs at the start of each output
frame. Frames beyond the last axis run one after another, as TFLM's Eval loops over them.
"""
from __future__ import annotations

from ..templating import render
from . import Lowered, kernel
from ._kiss_fft import fft_op, kiss_factors   # noqa: F401 (tests import kiss_factors here)
from ._signal import fail


@kernel("CUSTOM:SignalRfft", dtypes=("int16", "int32", "float32"))
def lower_rfft(op, g, ctx):
    dtype, x, y, length, fft = fft_op(op, g, ctx, inverse=False)
    n = fft["n"]
    in_len, out_len = x.shape[-1], y.shape[-1] // 2
    frames = x.size // in_len if in_len else 0
    if in_len == 0 or in_len > length:
        fail(op, f"frames of {in_len} samples do not fit fft_length {length}")
    if out_len < n + 1 or y.size < frames * 2 * out_len:
        fail(op, f"output {list(y.shape)} has no room for {frames} x {n + 1} complex bins")
    body = render("kernels/signal_rfft.c.j2", frames=frames, in_len=in_len, out_len=out_len, **fft)
    return Lowered(body=body, inputs=[x.id], outputs=[y.id], scratch_bytes=2 * n * (2 if dtype == "int16" else 4),
                   helpers={fft["helper"]}, macs=frames * fft["macs_per_frame"],
                   comment=f"SignalRfft {dtype} {length}-point, radices {fft['radices']}, "
                           f"{frames} frame(s)")
