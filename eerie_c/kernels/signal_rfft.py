"""TFLM's SignalRfft for int16: the real FFT of each frame, as the fixed-point KISS FFT (v130,
FIXED_POINT 16) that TFLM's signal library runs, bit for bit.

The frame (input_length samples, zero-padded to fft_length L) is read as N = L/2 complex
values and transformed by KISS FFT's mixed-radix complex FFT, then split into the L/2 + 1
bins of the real spectrum (kiss_fftr). Every stage divides by its radix (C_FIXDIV: multiply by
32767 / radix, round) so nothing overflows, and every complex product rounds to 15 fractional
bits; intermediate values are int16 and wrap where KISS FFT's do.

KISS FFT's recursion (kf_work) is flattened at compile time: its leaves copy the input in a
digit-reversed order (a table here), then each stage's butterflies run over all blocks of
that stage, deepest stage first; the blocks of one stage are disjoint, so this is the order
of the recursion's arithmetic. Radices are KISS FFT's factorisation of N (4s first, then 2,
3, 5); a factor above 5 needs KISS FFT's generic butterfly, whose scratch TFLM's build cannot
allocate, so such lengths are refused. The twiddles are computed here with KISS FFT's double
formulas (floor(0.5 + 32767 cos(phase)), same phase expressions) and stored in flash.
"""
from __future__ import annotations

import math

import numpy as np

from ..templating import render
from . import Lowered, kernel
from ._signal import check_io, fail, int_attr

PI = 3.141592653589793238462643383279502884197169399375105820974944   # KISS FFT's literal


def kiss_factors(n: int) -> list[tuple[int, int]]:
    """kf_factor: [(radix p, remaining length m)], powers of 4 first, then 2, then odd primes."""
    out, p, floor_sqrt = [], 4, math.floor(math.sqrt(n))
    while True:
        while n % p:
            p = {4: 2, 2: 3}.get(p, p + 2)
            if p > floor_sqrt:
                p = n
        n //= p
        out.append((p, n))
        if n <= 1:
            return out


def _cexp(phase: float) -> tuple[int, int]:
    return math.floor(.5 + 32767 * math.cos(phase)), math.floor(.5 + 32767 * math.sin(phase))


def twiddles(n: int) -> np.ndarray:
    """KISS FFT's forward twiddles exp(-2 pi i k / n), interleaved (re, im) int16."""
    return np.array([_cexp(-2 * PI * k / n) for k in range(n)], np.int16).reshape(-1)


def super_twiddles(n: int) -> np.ndarray:
    """kiss_fftr's split twiddles for the n-point complex FFT of a 2n-point real signal."""
    pi = 3.14159265358979323846264338327   # kiss_fftr's own literal (the same double)
    return np.array([_cexp(-pi * ((k + 1) / n + .5)) for k in range(n // 2)], np.int16).reshape(-1)


def leaf_order(factors) -> list[int]:
    """Which input element each output slot of kf_work's leaves copies (digit reversal)."""
    n = factors[0][0] * factors[0][1]
    order = [0] * n

    def work(out, src, fstride, stage):
        p, m = factors[stage]
        for k in range(p):
            if m == 1:
                order[out + k] = src + k * fstride
            else:
                work(out + k * m, src + k * fstride, fstride * p, stage + 1)
    work(0, 0, 1, 0)
    return order


@kernel("CUSTOM:SignalRfft", dtypes=("int16",))
def lower_rfft(op, g, ctx):
    check_io(op, g, [("int16", None)], [("int16", None)])
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    if not x.shape or len(x.shape) != len(y.shape):
        fail(op, f"input {list(x.shape)} and output {list(y.shape)} differ in rank")
    length = int_attr(op, "fft_length", 4, 1 << 15)
    if length % 2:
        fail(op, f"fft_length {length} is odd (KISS FFT's real FFT needs an even length)")
    n = length // 2
    factors = kiss_factors(n)
    if any(p not in (2, 3, 4, 5) for p, _ in factors):
        fail(op, f"fft_length {length}: {n} has a prime factor above 5 (TFLM's KISS FFT build "
                 f"cannot run its generic butterfly)")
    in_len, out_len = x.shape[-1], y.shape[-1] // 2
    frames = x.size // in_len if in_len else 0
    if in_len == 0 or in_len > length:
        fail(op, f"frames of {in_len} samples do not fit fft_length {length}")
    if out_len < n + 1 or y.size < frames * 2 * out_len:
        fail(op, f"output {list(y.shape)} has no room for {frames} x {n + 1} complex bins")
    stages = []
    fstride = 1
    for p, m in factors:
        stages.append(dict(p=p, m=m, fstride=fstride, blocks=fstride))
        fstride *= p
    order = np.array(leaf_order(factors), np.uint16 if n <= 65535 else np.uint32)
    body = render("kernels/signal_rfft.c.j2", n=n, frames=frames, in_len=in_len,
                  out_len=out_len, stages=list(reversed(stages)),
                  tw=ctx.const(twiddles(n), "int16_t", "twiddles"),
                  stw=ctx.const(super_twiddles(n), "int16_t", "super_twiddles"),
                  order=ctx.const(order, "uint16_t", "fft_order"))
    return Lowered(body=body, inputs=[x.id], outputs=[y.id], scratch_bytes=4 * n,
                   helpers={"signal_fft"}, macs=frames * n * 2 * len(factors),
                   comment=f"SignalRfft int16 {length}-point, radices "
                           f"{'x'.join(str(p) for p, _ in factors)}, {frames} frame(s)")
