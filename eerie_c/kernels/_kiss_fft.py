"""KISS FFT v130 (the FFT of TFLM's signal library) planned at compile time, for SignalRfft
and SignalIrfft (kernels/signal_rfft.py, signal_irfft.py).

TFLM builds KISS FFT three times: FIXED_POINT 16 (int16), FIXED_POINT 32 (int32) and float.
The fixed-point builds divide every stage by its radix (C_FIXDIV: multiply by SAMP_MAX / radix,
round) and round every product to 15 or 31 fractional bits (sround); their intermediates are
int16 / int32 and wrap where KISS FFT's do. The float build does the same butterflies in float
without the divisions. The C helpers templates/helpers/signal_fft{16,32,f}.c.j2 hold each
build's arithmetic.

KISS FFT's recursion (kf_work) is flattened: its leaves copy the input in a digit-reversed
order (`leaf_order`), then each stage's butterflies run over all blocks of that stage, deepest
stage first; the blocks of one stage are disjoint, so this is the order of the recursion's
arithmetic. Radices are KISS FFT's factorisation (4s first, then 2, 3, 5); a factor above 5
needs KISS FFT's generic butterfly, whose scratch TFLM's build cannot allocate (its
KISS_FFT_TMP_ALLOC is patched to return NULL), so such lengths are refused. The twiddles are
computed here with KISS FFT's own double formulas (same phase expressions, same literals of pi,
floor(0.5 + SAMP_MAX cos) for the fixed-point builds, (float) cos for the float one) and
stored in flash.
"""
from __future__ import annotations

import math

import numpy as np

from ._signal import check_io, fail, int_attr

PI = 3.141592653589793238462643383279502884197169399375105820974944   # kiss_fft_alloc's literal
PI_R = 3.14159265358979323846264338327                                # kiss_fftr_alloc's literal

# dtype -> (C scalar type, SAMP_MAX (None: float), helper / function-name suffix)
SCALAR = {"int16": ("int16_t", 32767, "16"), "int32": ("int32_t", 2147483647, "32"),
          "float32": ("float", None, "f")}
# TFLite TensorType codes of the op's "T" option (TFLM reads a missing T as 0, FLOAT32)
T_CODE = {"float32": 0, "int32": 2, "int16": 7}


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


def _cexp(phase: float, samp_max: int | None) -> tuple:
    if samp_max is None:
        return math.cos(phase), math.sin(phase)        # rounded to float by the caller's array
    return math.floor(.5 + samp_max * math.cos(phase)), math.floor(.5 + samp_max * math.sin(phase))


def _array(values, dtype: str) -> np.ndarray:
    return np.array(values, np.float32 if dtype == "float32" else dtype).reshape(-1)


def twiddles(n: int, dtype: str = "int16", inverse: bool = False) -> np.ndarray:
    """kiss_fft_alloc's twiddles exp(-+2 pi i k / n), interleaved (re, im)."""
    samp_max = SCALAR[dtype][1]
    out = []
    for k in range(n):
        phase = -2 * PI * k / n
        if inverse:
            phase *= -1
        out.append(_cexp(phase, samp_max))
    return _array(out, dtype)


def super_twiddles(n: int, dtype: str = "int16", inverse: bool = False) -> np.ndarray:
    """kiss_fftr_alloc's split twiddles for the n-point complex FFT of a 2n-point real signal."""
    samp_max = SCALAR[dtype][1]
    out = []
    for k in range(n // 2):
        phase = -PI_R * ((k + 1) / n + .5)
        if inverse:
            phase *= -1
        out.append(_cexp(phase, samp_max))
    return _array(out, dtype)


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


def check_type_option(op, dtype: str):
    """TFLM picks the kernel's type from the "T" option and Prepare then requires both
    tensors to have it: a model whose T disagrees with its tensors fails there."""
    code = op.attrs.get("T", 0)
    if code != T_CODE[dtype]:
        fail(op, f"option T = {code} does not name the tensors' type {dtype} "
                 f"(TensorType {T_CODE[dtype]})")


def plan_fft(op, ctx, length: int, dtype: str, inverse: bool) -> dict:
    """The template variables of an fft_length-point real FFT (forward or inverse) of
    `dtype`: the complex length n, the stages (deepest first), twiddle and order tables."""
    if length % 2:
        fail(op, f"fft_length {length} is odd (KISS FFT's real FFT needs an even length)")
    n = length // 2
    factors = kiss_factors(n)
    if any(p not in (2, 3, 4, 5) for p, _ in factors):
        fail(op, f"fft_length {length}: {n} has a prime factor above 5 (TFLM's KISS FFT build "
                 f"cannot run its generic butterfly)")
    ctype, samp_max, suffix = SCALAR[dtype]
    stages, fstride = [], 1
    for p, m in factors:
        stages.append(dict(p=p, m=m, fstride=fstride, blocks=fstride))
        fstride *= p
    order = np.array(leaf_order(factors), np.uint16)   # n <= 16384: fft_length <= 32768
    sense = "inverse" if inverse else "forward"
    return dict(
        n=n, T=ctype, P=f"eerie_fft{suffix}_", fixed=samp_max is not None, inverse=inverse,
        divk={p: samp_max // p for p in (2, 3, 4, 5)} if samp_max else {},
        stages=list(reversed(stages)), radices="x".join(str(p) for p, _ in factors),
        tw=ctx.const(twiddles(n, dtype, inverse), ctype, f"{sense}_twiddles"),
        stw=ctx.const(super_twiddles(n, dtype, inverse), ctype, f"{sense}_super_twiddles"),
        order=ctx.const(order, "uint16_t", "fft_order"),
        helper=f"signal_fft{suffix}", macs_per_frame=n * 2 * len(factors))


def fft_op(op, g, ctx, inverse: bool):
    """What SignalRfft and SignalIrfft check and plan alike: one dtype in and out matching the
    op's T option, input and output of the same rank, an fft_length in [4, 2^15], and the
    FFT's plan. Returns (dtype, input tensor, output tensor, fft_length, plan)."""
    dtype = g.t(op.inputs[0]).dtype
    check_io(op, g, [(dtype, None)], [(dtype, None)])
    check_type_option(op, dtype)
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    if not x.shape or len(x.shape) != len(y.shape):
        fail(op, f"input {list(x.shape)} and output {list(y.shape)} differ in rank")
    length = int_attr(op, "fft_length", 4, 1 << 15)
    return dtype, x, y, length, plan_fft(op, ctx, length, dtype, inverse)
