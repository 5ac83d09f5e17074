"""QUANTIZE (float32 -> int8/int16, and int -> int requantization) and DEQUANTIZE
(int8/int16/uint8 -> float32), following TFLM's reference kernels.

- float -> int: q = round_half_away(x / scale) computed in float32 (TFLM divides by the scale
  cast to float and rounds with roundf; a double division differs on some inputs), plus the
  zero point, saturated. A PyTorch (PT2E) program's QUANTIZE carries rounding="half_even":
  q = rint(x * float32(1 / scale)), as quantized_decomposed.quantize_per_tensor computes it. We saturate in float before converting, so huge values clamp to the
  type's range instead of hitting the undefined int conversion TFLM performs.
- int -> int: out = zp_out + requantize(x - zp_in) with multiplier in_scale / out_scale derived
  in double, saturated to the output type; equal scales give an exact offset shift. An int32
  input (TFLM's seanet integration test quantizes int32 -> int16) can overflow x - zp_in and
  the output offset: TFLM's int32 arithmetic wraps there, ours too, in unsigned arithmetic.
- DEQUANTIZE: TFLM computes scale * (x - zp) in double and casts to float. With a float32 scale
  and |x - zp| < 2^17 that double product is exact, so one float multiply rounds identically.
"""
import numpy as np

from ..templating import render
from ..errors import EerieError
from . import Lowered, kernel
from ._quant import quantize_multiplier
from .elementwise import _signed

RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767),
         "int32": (-(2 ** 31), 2 ** 31 - 1)}
# (input, output) dtype pairs TFLM's QUANTIZE evaluates
REQUANT_PAIRS = {("int8", "int8"), ("int8", "uint8"), ("int8", "int16"), ("int8", "int32"),
                 ("uint8", "int8"), ("int16", "int8"), ("int16", "int16"), ("int16", "int32"),
                 ("int32", "int8"), ("int32", "int16")}
FLOAT_OUTPUTS = ("int8", "int16")
# input dtype -> output dtypes: the registry's table (`eerie-c ops`), the one the kernels check
QUANTIZE_OUTPUTS = {"float32": FLOAT_OUTPUTS,
                    **{a: tuple(sorted(b for a2, b in REQUANT_PAIRS if a2 == a))
                       for a in sorted({a for a, _ in REQUANT_PAIRS})}}
DEQUANTIZE_INPUTS = ("int8", "int16", "uint8")


def _unsigned(v: int) -> str:
    """' + vu' / ' - |v|u' / '': an offset added in uint32_t arithmetic (wraps, no UB)."""
    return "" if v == 0 else (f" + {v}u" if v > 0 else f" - {-v}u")


def _per_tensor(op, t, role):
    if t.quant is None:
        raise EerieError(f"{op.kind} {op.name!r}: {role} tensor has no quantization parameters")
    if t.quant.per_channel:
        raise EerieError(f"{op.kind} {op.name!r}: per-channel {role} quantization is not "
                         "supported (TFLM requires one scale)")


def pt2e_requantize_table(x, y) -> np.ndarray:
    """quantize_per_tensor(dequantize_per_tensor(q)) for every int8 q, as torch computes it:
    (q - zp_in) * float32(scale_in), times float32(1 / scale_out), rounded half to even, plus
    zp_out, clamped."""
    q = np.arange(-128, 128, dtype=np.float32)
    real = (q - np.float32(x.zero_point)) * np.float32(x.quant.scale[0])
    inv = np.float32(1.0 / float(np.float32(y.quant.scale[0])))
    out = np.rint(real * inv) + np.float32(y.zero_point)
    return np.clip(out, -128, 127).astype(np.int8)


@kernel("QUANTIZE", dtypes=tuple(QUANTIZE_OUTPUTS), outputs=QUANTIZE_OUTPUTS)
def lower_quantize(op, g, ctx):
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    _per_tensor(op, y, "output")
    qmin, qmax = RANGE.get(y.dtype, (None, None))
    if x.dtype == "float32":
        if y.dtype not in FLOAT_OUTPUTS:
            raise EerieError(f"QUANTIZE {op.name!r}: float32 -> {y.dtype} is not supported")
        zp = y.zero_point
        # PT2E's quantize_per_tensor (a PyTorch program's input) multiplies by the float32
        # reciprocal of the scale and rounds half to even: the same here, so the int8 values
        # are the ones the program's own eager run computes.
        half_even = op.attrs.get("rounding") == "half_even"
        body = render("kernels/quantize_f32.c.j2", n=x.size, ctype=y.ctype, scale=y.scale,
                      inv_scale=float(np.float32(1.0 / y.scale)), half_even=half_even,
                      lo=qmin - zp, hi=qmax - zp, zp=_signed(zp))
        return Lowered(body=body, inputs=[x.id], outputs=[y.id])

    if (x.dtype, y.dtype) not in REQUANT_PAIRS:
        raise EerieError(f"QUANTIZE {op.name!r}: {x.dtype} -> {y.dtype} is not supported")
    _per_tensor(op, x, "input")
    if op.attrs.get("rounding") == "half_even" and x.dtype == "int8" and y.dtype == "int8":
        # A PT2E program's requantization (passes/fold_qdq.py): the program dequantizes and
        # quantizes again in float32, rounding once, half to even. TFLM's fixed-point
        # requantize rounds twice (the high multiply, then the shift), one step off on up to
        # a quarter of the values when the scales are near a power-of-two ratio, a bias the
        # layers after it compound. 256 inputs: take the program's own arithmetic as a table.
        table = pt2e_requantize_table(x, y)
        name = ctx.const(table, "int8_t", "lut", "requantize, PT2E rounding, for inputs -128..127")
        body = render("kernels/unary_lut_s8.c.j2", size=x.size, table=name,
                      what="dequantize then quantize (rounded once, half to even)")
        return Lowered(body=body, inputs=[x.id], outputs=[y.id])
    mult, shift = quantize_multiplier(float(x.quant.scale[0]) / float(y.quant.scale[0]))
    wrap = x.dtype == "int32"
    # equal scales: TFLM still multiplies by 2^30 after a left shift of 1, which wraps for
    # |x| >= 2^30, so the plain offset shift is exact only for inputs narrower than int32
    identity = (mult, shift) == (1 << 30, 1) and not wrap
    off = _unsigned if wrap else _signed
    body = render("kernels/requantize.c.j2", n=x.size, ctype=y.ctype, identity=identity,
                  mult=mult, shift=shift, in_off=off(-x.zero_point), out_off=off(y.zero_point),
                  clamp=y.dtype != "int32", lo=qmin, hi=qmax, wrap=wrap)
    return Lowered(body=body, inputs=[x.id], outputs=[y.id],
                   helpers=set() if identity else {"requant"})


@kernel("DEQUANTIZE", dtypes=DEQUANTIZE_INPUTS, outputs={d: ("float32",) for d in DEQUANTIZE_INPUTS})
def lower_dequantize(op, g, ctx):
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    _per_tensor(op, x, "input")
    if y.dtype != "float32":
        raise EerieError(f"DEQUANTIZE {op.name!r}: output must be float32 (is {y.dtype})")
    body = render("kernels/dequantize.c.j2", n=x.size, scale=float(np.float32(x.scale)),
                  off=_signed(-x.zero_point))
    return Lowered(body=body, inputs=[x.id], outputs=[y.id])
