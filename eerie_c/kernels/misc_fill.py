"""BROADCAST_TO, FILL, ZEROS_LIKE, MIRROR_PAD, L2_NORMALIZATION and LOG_SOFTMAX.

The first four are data movement or constant writes, planned at compile time:
- BROADCAST_TO (every dtype TFLM takes: float32, int8, int16, int32, int64, uint8, bool):
  NumPy broadcasting of the input to the constant shape, as a _copyplan copy (broadcast dims
  are stride-0 loops, contiguous runs are memcpy).
- FILL (float32, int8, int32): the dims must be constant; a constant value becomes a constant
  write, an activation value is read once. Raw bytes: TFLM copies the value as it is.
- ZEROS_LIKE (float32, int8, int32, int64): raw zeros -- for int8 TFLM writes 0, not the zero
  point (checked against the oracle); the input is not read.
- MIRROR_PAD (float32, int8; REFLECT excludes the edge, SYMMETRIC repeats it): each output
  dim maps to an input index through a small per-dim table (or a plain loop where the dim is
  not padded), so the copy is one _copyplan gather.
L2_NORMALIZATION (float32, int8) and LOG_SOFTMAX (float32 only so far) are described below.
"""
from __future__ import annotations

import numpy as np

from ..templating import c_float
from ..errors import EerieError
from . import Lowered, kernel
from ._copyplan import copy_body, flat_index

ALL = ("float32", "int8", "int16", "int32", "int64", "uint8", "bool")


def _const_ints(op, g, k, what, name):
    if len(op.inputs) <= k or op.inputs[k] is None or not g.t(op.inputs[k]).is_const:
        raise EerieError(f"{what}: {name} must be a constant tensor")
    return [int(v) for v in np.asarray(g.t(op.inputs[k]).data).reshape(-1)]


def _literal(value, dtype) -> str:
    if dtype == "float32":
        return c_float(float(value))
    if dtype == "bool":
        return "1" if value else "0"
    v = int(value)
    if dtype == "int64":
        return f"INT64_C({v})"
    if dtype == "int32" and v == -(2 ** 31):
        return "INT32_MIN"
    return str(v)


@kernel("BROADCAST_TO", dtypes=ALL)
def lower_broadcast_to(op, g, ctx):
    what = f"BROADCAST_TO (op {op.index})"
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    shape = _const_ints(op, g, 1, what, "the shape")
    if x.dtype != y.dtype or list(y.shape) != shape:
        raise EerieError(f"{what}: output {y.dtype}{list(y.shape)}, expected {x.dtype}{shape}")
    try:
        idx = np.broadcast_to(flat_index(x.shape), tuple(shape))
    except ValueError:
        raise EerieError(f"{what}: {list(x.shape)} does not broadcast to {shape}") from None
    params: list[str] = []
    if x.is_const:
        src = ctx.tensor_const(x, "value")
    else:
        params.append(x.id)
        src = "in0"
    return Lowered(body=copy_body(idx, ctx, src, "out0", "bcast"), inputs=params, outputs=[y.id],
                   comment=f"BROADCAST_TO {op.name} {list(x.shape)} -> {shape}".replace("*/", ""))


def _fill_c(n: int, value: str) -> str:
    if n == 1:
        return f"out0[0] = {value};\n"
    return f"{{\n    int i;\n    for (i = 0; i < {n}; ++i) {{\n        out0[i] = {value};\n    }}\n}}\n"


@kernel("FILL", dtypes=("float32", "int8", "int32"), key_input=1)
def lower_fill(op, g, ctx):
    what = f"FILL (op {op.index})"
    v, y = g.t(op.inputs[1]), g.t(op.outputs[0])
    dims = _const_ints(op, g, 0, what, "the dims")
    if list(y.shape) != dims or v.dtype != y.dtype or v.size != 1:
        raise EerieError(f"{what}: output {y.dtype}{list(y.shape)} from dims {dims} and a "
                         f"{v.dtype}{list(v.shape)} value")
    if v.is_const:
        value = _literal(np.asarray(v.data).reshape(-1)[0], v.dtype)
        return Lowered(body=_fill_c(y.size, value), inputs=[], outputs=[y.id])
    body = f"const {y.ctype} v = in0[0];\n" + _fill_c(y.size, "v")
    return Lowered(body=body, inputs=[v.id], outputs=[y.id])


@kernel("ZEROS_LIKE", dtypes=("float32", "int8", "int32", "int64"))
def lower_zeros_like(op, g, ctx):
    what = f"ZEROS_LIKE (op {op.index})"
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    if x.dtype != y.dtype or list(x.shape) != list(y.shape):
        raise EerieError(f"{what}: output {y.dtype}{list(y.shape)} must match the input")
    # raw zero bytes: 0, 0.0f; int8 gets 0 like TFLM, not the zero point
    body = f"memset(out0, 0, {y.size} * sizeof(*out0));\n"
    return Lowered(body=body, inputs=[], outputs=[y.id])


def _mirror(n: int, lo: int, hi: int, symmetric: bool) -> np.ndarray:
    out = []
    for p in range(n + lo + hi):
        i = p - lo
        if i < 0:
            i = -i - 1 if symmetric else -i
        elif i >= n:
            i = 2 * n - 1 - i if symmetric else 2 * n - 2 - i
        out.append(i)
    return np.array(out, dtype=np.int64)


@kernel("MIRROR_PAD", dtypes=("float32", "int8"))
def lower_mirror_pad(op, g, ctx):
    what = f"MIRROR_PAD (op {op.index})"
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    rank = len(x.shape)
    pads = _const_ints(op, g, 1, what, "the paddings")
    if len(pads) != 2 * rank:
        raise EerieError(f"{what}: paddings has {len(pads)} values, expected {2 * rank}")
    mode = op.attrs.get("mode", 0)
    symmetric = mode in (1, "SYMMETRIC")
    pairs = [(pads[2 * d], pads[2 * d + 1]) for d in range(rank)]
    limit = 0 if symmetric else 1
    for n, (lo, hi) in zip(x.shape, pairs):
        if lo < 0 or hi < 0 or lo > n - limit or hi > n - limit:
            raise EerieError(f"{what}: paddings {pairs} too large for {list(x.shape)} in "
                             f"{'SYMMETRIC' if symmetric else 'REFLECT'} mode")
    expect = [n + lo + hi for n, (lo, hi) in zip(x.shape, pairs)]
    if list(y.shape) != expect or x.dtype != y.dtype:
        raise EerieError(f"{what}: output {y.dtype}{list(y.shape)}, expected {x.dtype}{expect}")
    strides = [int(np.prod(x.shape[d + 1:], dtype=np.int64)) for d in range(rank)]
    idx = np.zeros(expect, dtype=np.int64)
    for d, (n, (lo, hi)) in enumerate(zip(x.shape, pairs)):
        shape = [1] * rank
        shape[d] = expect[d]
        idx = idx + (_mirror(n, lo, hi, symmetric) * strides[d]).reshape(shape)
    return Lowered(body=copy_body(idx, ctx, "in0", "out0", "mirror"), inputs=[x.id],
                   outputs=[y.id],
                   comment=f"MIRROR_PAD {op.name} {'SYMMETRIC' if symmetric else 'REFLECT'} "
                           f"{pairs}".replace("*/", ""))


# L2_NORMALIZATION along the last dim. float32: x / max(sqrt(sum x^2), 1e-6), summing in order
# like the reference. int8 (TFLM requires output scale 1/128, zero point 0): per row the
# int32 sum of (x - zp_in)^2 goes through TFLite's GetInvSqrtQuantizedMultiplierExp -- a Q3
# Newton-Raphson 1/sqrt with exactly gemmlowp's rounding, run at run time since it depends on
# the data -- and each (x - zp_in) is scaled by the resulting multiplier with shift + 7
# (output in 1/128 steps), clamped to int8. Rows whose sum is 0 or 1 use INT32_MAX, shift 0.
_L2_S8 = """\
int i, k, t;
for (i = 0; i < {outer}; ++i) {{
    const int8_t *x = in0 + i * {depth};
    int8_t *y = out0 + i * {depth};
    int32_t acc = 0;
    int32_t inv = INT32_MAX;
    int shift = 0;
    for (k = 0; k < {depth}; ++k) {{
        const int32_t d = x[k] - ({zp});
        acc += d * d;
    }}
    if (acc > 1) {{
        /* normalise acc into [2^27, 2^29) by an even shift, tracking the exponent */
        int32_t v = acc;
        int pairs;
        int32_t half, xr;
        shift = 11;
        for (t = 0; t < 2; ++t) {{
            if (v >= (1 << 29)) {{
                v /= 4;
                ++shift;
            }}
        }}
        pairs = (eerie_clz32((uint32_t)v) - 1) / 2 - 1;
        shift -= pairs;
        v = (int32_t)((uint32_t)v << (2 * pairs));
        /* Newton-Raphson for 1/sqrt in Q3.28: x <- 1.5 x - (v/2) x^3, five steps from 1 */
        half = eerie_rounding_divide_by_pot(v >> 1, 1);
        xr = 1 << 28;
        for (t = 0; t < 5; ++t) {{
            const int32_t x3 = eerie_sat_shift_left(eerie_sat_round_doubling_high_mul(
                eerie_sat_round_doubling_high_mul(xr, xr), xr), 6);
            xr = eerie_sat_shift_left(eerie_wsub(eerie_sat_round_doubling_high_mul(402653184, xr),
                                                 eerie_sat_round_doubling_high_mul(half, x3)), 3);
        }}
        inv = eerie_sat_round_doubling_high_mul(xr, 1518500250);   /* times sqrt(2)/2 */
        if (shift < 0) {{
            inv = (int32_t)((uint32_t)inv << -shift);
            shift = 0;
        }}
        shift = -shift;
    }}
    for (k = 0; k < {depth}; ++k) {{
        int32_t q = eerie_requantize(x[k] - ({zp}), inv, shift + 7);
        q = q < -128 ? -128 : q;
        q = q > 127 ? 127 : q;
        y[k] = (int8_t)q;
    }}
}}
"""

_L2_F32 = """\
int i, k;
for (i = 0; i < {outer}; ++i) {{
    const float *x = in0 + i * {depth};
    float *y = out0 + i * {depth};
    float sq = 0.0f;
    float norm;
    for (k = 0; k < {depth}; ++k) {{
        sq += x[k] * x[k];
    }}
    norm = sqrtf(sq);
    norm = norm > 1e-6f ? norm : 1e-6f;
    for (k = 0; k < {depth}; ++k) {{
        y[k] = x[k] / norm;
    }}
}}
"""


@kernel("L2_NORMALIZATION", dtypes=("float32", "int8"))
def lower_l2_normalization(op, g, ctx):
    what = f"L2_NORMALIZATION (op {op.index})"
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    if list(x.shape) != list(y.shape) or x.dtype != y.dtype or not x.shape:
        raise EerieError(f"{what}: output {y.dtype}{list(y.shape)} must match the input")
    act = op.attrs.get("fused_activation_function", "NONE")
    if act not in ("NONE", None):
        raise EerieError(f"{what}: fused activation {act} is not supported (TFLM: NONE only)")
    depth = int(x.shape[-1])
    outer = int(np.prod(x.shape[:-1], dtype=np.int64))
    if x.dtype == "float32":
        return Lowered(body=_L2_F32.format(outer=outer, depth=depth), inputs=[x.id],
                       outputs=[y.id])
    if x.quant is None or y.quant is None or np.float32(y.scale) != np.float32(1 / 128) \
            or y.zero_point != 0:
        raise EerieError(f"{what}: int8 output must have scale 1/128 and zero point 0 (TFLM)")
    body = _L2_S8.format(outer=outer, depth=depth, zp=x.zero_point)
    return Lowered(body=body, inputs=[x.id], outputs=[y.id], helpers={"requant", "fixedpoint"})


# LOG_SOFTMAX along the last dim, float32 (int8 is not implemented yet): like the reference,
# max of the row, sum of exp(x - max), then x - max - log(sum).
_LOGSM_F32 = """\
int i, k;
for (i = 0; i < {outer}; ++i) {{
    const float *x = in0 + i * {depth};
    float *y = out0 + i * {depth};
    float mx = x[0];
    float sum = 0.0f;
    float log_sum;
    for (k = 1; k < {depth}; ++k) {{
        mx = x[k] > mx ? x[k] : mx;
    }}
    for (k = 0; k < {depth}; ++k) {{
        sum += expf(x[k] - mx);
    }}
    log_sum = logf(sum);
    for (k = 0; k < {depth}; ++k) {{
        y[k] = x[k] - mx - log_sum;
    }}
}}
"""


@kernel("LOG_SOFTMAX", dtypes=("float32",))
def lower_log_softmax(op, g, ctx):
    what = f"LOG_SOFTMAX (op {op.index})"
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    if list(x.shape) != list(y.shape) or x.dtype != y.dtype or not x.shape:
        raise EerieError(f"{what}: output {y.dtype}{list(y.shape)} must match the input")
    depth = int(x.shape[-1])
    outer = int(np.prod(x.shape[:-1], dtype=np.int64))
    return Lowered(body=_LOGSM_F32.format(outer=outer, depth=depth), inputs=[x.id], outputs=[y.id])
