"""TFLM's SignalIrfft (int16, int32, float32): the inverse real FFT of each frame, as KISS FFT
v130's kiss_fftri of that type in TFLM's signal library runs it, bit for bit
(kernels/_kiss_fft.py).

Each input frame (the last axis) holds at least fft_length / 2 + 1 complex bins as (re, im)
pairs; kiss_fftri folds bins 0..N (N = fft_length / 2) into an N-point complex spectrum, whose
inverse FFT (inverse twiddles, kf_bfly4's inverse branch) is the fft_length real samples of
the output frame. The fixed-point builds scale by 1 / fft_length through their stage divisions;
TFLM's float wrapper divides the result by fft_length.
"""
from __future__ import annotations

from ..templating import render
from . import Lowered, kernel
from ._kiss_fft import fft_op
from ._signal import fail


@kernel("CUSTOM:SignalIrfft", dtypes=("int16", "int32", "float32"))
def lower_irfft(op, g, ctx):
    dtype, x, y, length, fft = fft_op(op, g, ctx, inverse=True)
    n = fft["n"]
    # TFLM reads bins 0..N of each input frame and writes fft_length samples at each output
    # frame: anything shorter would read or write past the frame (and the tensor).
    in_len, out_len = x.shape[-1] // 2, y.shape[-1]
    if in_len < n + 1:
        fail(op, f"input frames of {in_len} complex bins are fewer than the {n + 1} bins of "
                 f"fft_length {length}")
    # TFLM steps through the tensor as complex values, in_len at a time (an odd last axis
    # makes the frames straddle its rows): the last frame's bins must still be in the tensor.
    frames = -(-(x.size // 2) // in_len)
    if 2 * ((frames - 1) * in_len + n) + 1 >= x.size:
        fail(op, f"input {list(x.shape)}: frame {frames - 1} would read past the tensor")
    if out_len < length or y.size < frames * out_len:
        fail(op, f"output {list(y.shape)} has no room for {frames} x {length} samples")
    body = render("kernels/signal_irfft.c.j2", frames=frames, in_len=in_len, out_len=out_len, **fft)
    return Lowered(body=body, inputs=[x.id], outputs=[y.id], scratch_bytes=2 * n * (2 if dtype == "int16" else 4),
                   helpers={fft["helper"]}, macs=frames * fft["macs_per_frame"],
                   comment=f"SignalIrfft {dtype} {length}-point, radices {fft['radices']}, "
                           f"{frames} frame(s)")
