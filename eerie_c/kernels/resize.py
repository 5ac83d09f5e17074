"""RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR (NHWC, constant output size).

Both follow TFLite's reference kernels, with every per-row / per-column quantity computed here
at compile time:
- nearest neighbour: the source row of output row y is min(floor((y + off) * scale), H - 1)
  (round() instead of floor() with align_corners; max(0, .) with half_pixel_centers), with
  scale = H_in / H_out (or (H_in - 1) / (H_out - 1) for align_corners) and the products taken
  in float32 like the reference. It is a pure gather, so it becomes a _copyplan copy (per-dim
  offset tables, memcpy of the channel runs). float32, int8, int16 (raw values: TFLM copies).
- bilinear float32: per row y0, y1 and the fraction input_y - y0 (float32 math as the
  reference, input_y = (y + 0.5) * scale - 0.5 with half_pixel_centers else y * scale), per
  column likewise, then the four-term weighted sum in the reference's order.
- bilinear int8: TFLM's integer-only path (ResizeBilinearInteger): scale in Q10
  ((1024 * H_in + H_out / 2) / H_out, or the align_corners form), input_y in Q10, the four
  products summed (they fit int32: |sum| < 2^30 for int8), then divided by 2^20 rounding half
  away from zero. Raw values, no requantization (TFLM copies the quantization through).

Frontends whose coordinate rule is none of TFLite's (PyTorch's `scale_factor` that is not
H_out / H_in) pass the per-axis tables themselves: attrs `src_rows` / `src_cols` (source index
of each output row / column) for nearest, `rows` / `cols` (one [lo, hi, frac] per output row /
column, frac the weight of `hi`) for bilinear; int8 bilinear then uses round(frac * 1024) as
its Q10 weight.
"""
from __future__ import annotations

import math

import numpy as np

from ..templating import c_float
from ..errors import EerieError
from . import Lowered, kernel
from ._copyplan import copy_body, flat_index
from ._quant import quantize_multiplier
from ..ir.resize_coords import bilinear_taps, nearest_index

Q14 = 1 << 14   # a PT2E upsampling's weight scale (the rescaling form)


def _size(op, g, what):
    if len(op.inputs) < 2 or op.inputs[1] is None or not g.t(op.inputs[1]).is_const:
        raise EerieError(f"{what}: the size tensor must be constant")
    v = [int(s) for s in np.asarray(g.t(op.inputs[1]).data).reshape(-1)]
    if len(v) != 2 or min(v) < 1:
        raise EerieError(f"{what}: size {v} must be two positive values")
    return v


def _common(op, g, what):
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    if len(x.shape) != 4:
        raise EerieError(f"{what}: needs a 4-D NHWC input, got {list(x.shape)}")
    oh, ow = _size(op, g, what)
    expect = [x.shape[0], oh, ow, x.shape[3]]
    if list(y.shape) != expect or x.dtype != y.dtype:
        raise EerieError(f"{what}: output {y.dtype}{list(y.shape)}, expected {x.dtype}{expect}")
    ac = bool(op.attrs.get("align_corners", False))
    hp = bool(op.attrs.get("half_pixel_centers", False))
    return x, y, ac, hp


@kernel("RESIZE_NEAREST_NEIGHBOR", dtypes=("float32", "int8", "int16"))
def lower_resize_nearest(op, g, ctx):
    what = f"RESIZE_NEAREST_NEIGHBOR (op {op.index})"
    x, y, ac, hp = _common(op, g, what)
    b, h, w, c = x.shape
    rows = op.attrs.get("src_rows") or nearest_index(h, y.shape[1], ac, hp)
    cols = op.attrs.get("src_cols") or nearest_index(w, y.shape[2], ac, hp)
    _check_table(rows, y.shape[1], h, what)
    _check_table(cols, y.shape[2], w, what)
    idx = flat_index(x.shape)[:, rows][:, :, cols]
    return Lowered(body=copy_body(idx, ctx, "in0", "out0", "nn"), inputs=[x.id], outputs=[y.id],
                   comment=f"RESIZE_NEAREST_NEIGHBOR {op.name}".replace("*/", ""))


def _check_table(idx, n_out, n_in, what):
    """An explicit table must index the input: it comes from an attribute, not from us."""
    if len(idx) != n_out or any(not 0 <= int(i) < n_in for i in idx):
        raise EerieError(f"{what}: source table {list(idx)} does not fit {n_out} outputs from {n_in} inputs")


def _explicit(table, n_out, n_in, q10, what):
    """(lo, hi, frac) lists from an explicit [lo, hi, frac] per output."""
    lo, hi, frac = [int(t[0]) for t in table], [int(t[1]) for t in table], [t[2] for t in table]
    _check_table(lo, n_out, n_in, what)
    _check_table(hi, n_out, n_in, what)
    if q10:
        frac = [int(np.round(np.float64(f) * 1024)) for f in frac]
    else:
        frac = [np.float32(f) for f in frac]
    return lo, hi, frac


def _c_div_trunc(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _bilinear_q10(n_in, n_out, align, half):
    if align and n_out > 1:
        s = _c_div_trunc(1024 * (n_in - 1) + (n_out - 1) // 2, n_out - 1)
    else:
        s = _c_div_trunc(1024 * n_in + n_out // 2, n_out)
    lo, hi, frac = [], [], []
    for i in range(n_out):
        v = i * s + _c_div_trunc(s, 2) - 512 if half else i * s
        a = max(_c_div_trunc(v, 1024), 0)
        lo.append(a)
        hi.append(min(_c_div_trunc(v + 1023, 1024), n_in - 1))
        frac.append(v - 1024 * a)
    return lo, hi, frac


@kernel("RESIZE_BILINEAR", dtypes=("float32", "int8"))
def lower_resize_bilinear(op, g, ctx):
    what = f"RESIZE_BILINEAR (op {op.index})"
    x, y, ac, hp = _common(op, g, what)
    if ac and hp:
        raise EerieError(f"{what}: align_corners and half_pixel_centers cannot both be set")
    b, h, w, c = x.shape
    oh, ow = y.shape[1], y.shape[2]
    rs, cs, bs = w * c, c, h * w * c   # input strides of a row, a column, a batch
    if x.dtype == "float32":
        y0, y1, fy = bilinear_taps(h, oh, ac, hp)
        x0, x1, fx = bilinear_taps(w, ow, ac, hp)
        if op.attrs.get("rows"):
            y0, y1, fy = _explicit(op.attrs["rows"], oh, h, False, what)
            x0, x1, fx = _explicit(op.attrs["cols"], ow, w, False, what)
        wtype, wname = "float", "f"
        fy_a = np.array(fy, np.float32)
        fx_a = np.array(fx, np.float32)
    elif op.attrs.get("rescale"):
        # A PT2E program's upsampling (passes/_int8_ops.py): its float weights to 14 bits, not
        # TFLite's 10, whose error (up to 1/2048 of the pixel difference) put 19% of outputs
        # one step off the program's float interpolation (seed 20261130 torch case 755)
        y0, y1, fy = bilinear_taps(h, oh, ac, hp)
        x0, x1, fx = bilinear_taps(w, ow, ac, hp)
        if op.attrs.get("rows"):
            y0, y1, fy = _explicit(op.attrs["rows"], oh, h, False, what)
            x0, x1, fx = _explicit(op.attrs["cols"], ow, w, False, what)
        wtype, wname = "int32_t", "q14"
        fy_a = np.round(np.array(fy, np.float64) * Q14).astype(np.int32)
        fx_a = np.round(np.array(fx, np.float64) * Q14).astype(np.int32)
    else:
        y0, y1, fy = _bilinear_q10(h, oh, ac, hp)
        x0, x1, fx = _bilinear_q10(w, ow, ac, hp)
        if op.attrs.get("rows"):
            y0, y1, fy = _explicit(op.attrs["rows"], oh, h, True, what)
            x0, x1, fx = _explicit(op.attrs["cols"], ow, w, True, what)
        wtype, wname = "int32_t", "q10"
        fy_a = np.array(fy, np.int32)
        fx_a = np.array(fx, np.int32)
    itype = "int32_t"
    ry0 = ctx.const(np.array(y0, np.int64) * rs, itype, "row0", "offset of the upper source row")
    ry1 = ctx.const(np.array(y1, np.int64) * rs, itype, "row1", "offset of the lower source row")
    cx0 = ctx.const(np.array(x0, np.int64) * cs, itype, "col0", "offset of the left source column")
    cx1 = ctx.const(np.array(x1, np.int64) * cs, itype, "col1", "offset of the right source column")
    ctype = "float" if x.dtype == "float32" else "int32_t"
    wy = ctx.const(fy_a, ctype, f"wy_{wname}", "vertical weight of the lower row")
    wx = ctx.const(fx_a, ctype, f"wx_{wname}", "horizontal weight of the right column")
    lines = ["int n, i, j, k;", "int o = 0;",
             f"for (n = 0; n < {b}; ++n) {{",
             f"    const {x.ctype} *src = in0 + n * {bs};",
             f"    for (i = 0; i < {oh}; ++i) {{",
             f"        const {x.ctype} *top = src + {ry0}[i];",
             f"        const {x.ctype} *bot = src + {ry1}[i];",
             f"        const {wtype} dy = {wy}[i];",
             f"        for (j = 0; j < {ow}; ++j) {{",
             f"            const int32_t l = {cx0}[j];",
             f"            const int32_t r = {cx1}[j];",
             f"            const {wtype} dx = {wx}[j];",
             f"            for (k = 0; k < {c}; ++k) {{"]
    if x.dtype == "float32":
        one = c_float(1.0)
        lines += [f"                out0[o++] = top[l + k] * ({one} - dy) * ({one} - dx) + "
                  f"bot[l + k] * dy * ({one} - dx) +",
                  f"                            top[r + k] * ({one} - dy) * dx + bot[r + k] * dy * dx;"]
    elif op.attrs.get("rescale"):
        lines += ["                /* Q14 weights: the four products sum to value * 2^28 */",
                  f"                const int64_t s = (int64_t)top[l + k] * (({Q14} - dy) * ({Q14} - dx)) + "
                  f"(int64_t)bot[l + k] * (dy * ({Q14} - dx)) +",
                  f"                                  (int64_t)top[r + k] * (({Q14} - dy) * dx) + "
                  "(int64_t)bot[r + k] * (dy * dx);"]
        lines += _int8_store(op, x, y, what)
    else:
        lines += ["                /* Q10 weights: the four products sum to value * 2^20 */",
                  "                const int32_t s = top[l + k] * (1024 - dy) * (1024 - dx) + "
                  "bot[l + k] * dy * (1024 - dx) +",
                  "                                  top[r + k] * (1024 - dy) * dx + bot[r + k] * dy * dx;"]
        lines += _int8_store(op, x, y, what)
    lines += ["            }", "        }", "    }", "}"]
    helpers = {"requant"} if x.dtype == "int8" and op.attrs.get("rescale") else set()
    return Lowered(body="\n".join(lines) + "\n", inputs=[x.id], outputs=[y.id], helpers=helpers,
                   comment=f"RESIZE_BILINEAR {op.name} align_corners {int(ac)} half_pixel "
                           f"{int(hp)}".replace("*/", ""))


def _int8_store(op, x, y, what) -> list[str]:
    """The C storing the Q20 sum `s`: TFLM's raw rounding, or (attr `rescale`) one
    requantization to the output's parameters."""
    ind = " " * 16
    if not op.attrs.get("rescale"):
        return [f"{ind}out0[o++] = (int8_t)((s + (s > 0 ? (1 << 19) : -(1 << 19))) / (1 << 20));"]
    if x.quant is None or y.quant is None or x.quant.per_channel or y.quant.per_channel:
        raise EerieError(f"{what}: rescaling needs per-tensor quantization of input and output")
    real = float(np.float32(x.scale)) / float(np.float32(y.scale))
    if x.dtype == "int8":
        # (s - zp_in * 2^28) * m >> n, m = real * 2^(n - 28) held to 26 bits, rounded once
        # (half to even, as the program's quantize): the sum of four products is below 2^36
        n = 25 - math.frexp(real)[1] + 1 + 28
        if not 29 <= n <= 62:
            raise EerieError(f"{what}: an output scale {real:g} times the input's cannot be rescaled")
        m = int(round(real * 2.0 ** (n - 28)))
        return [f"{ind}int64_t d = (s - {int(x.zero_point)}LL * {1 << 28}) * {m}LL;",
                f"{ind}int64_t rem = (int64_t)((uint64_t)d & {(1 << n) - 1}ULL);",
                f"{ind}int32_t v = (int32_t)(d >> {n});",
                f"{ind}if (rem > {1 << (n - 1)}LL || (rem == {1 << (n - 1)}LL && (v & 1))) {{",
                f"{ind}    ++v;",
                f"{ind}}}",
                f"{ind}v += {int(y.zero_point)};",
                f"{ind}v = v < -128 ? -128 : v;",
                f"{ind}v = v > 127 ? 127 : v;",
                f"{ind}out0[o++] = (int8_t)v;"]
    mult, shift = quantize_multiplier(real)
    shift -= 20   # the sum is value * 2^20
    if shift < -31:
        raise EerieError(f"{what}: output scale over {2 ** 11}x the input's cannot be rescaled")
    return [f"{ind}int32_t v = eerie_requantize(s - {int(x.zero_point) * (1 << 20)}, {mult}, {shift}) + "
            f"{int(y.zero_point)};",
            f"{ind}v = v < -128 ? -128 : v;",
            f"{ind}v = v > 127 ? 127 : v;",
            f"{ind}out0[o++] = (int8_t)v;"]
