"""The int8 AVERAGE_POOL_2D kernel (templates/kernels/pool_s8_split.c.j2, the loops it shares
with MAX_POOL_2D): per output pixel the window sums of its channels in vectors, 8 int16 lanes
per Helium vector on the M55 (VLDRB.S16 + VADD.I16, the last partial vector predicated), two
halfword sums of 4 channels per word on DSP cores (SXTAB16, helpers/pool_dsp.c.j2), one at a
time elsewhere and past the DSP words; then TFLM's rounding division and the clamp. Interior
windows (wholly inside the input) are read at constant offsets and have a fixed count, whose
division is a multiply-high by a constant (avg_magic, checked here against TFLM's rule for
every sum an int8 window can have), in the Helium lanes too; the border's clipped windows
divide by their count (helpers/pool_avg.c.j2). The DSP and Helium sums are int16, so those
kernels take windows of at most MAX_WINDOW elements (pooling.py keeps the portable one past
it)."""
from __future__ import annotations

import math

import numpy as np

from . import Lowered
from ._dsp import has_dsp
from ._mve import has_mve
from ._pool_split import MAX_UNROLL, _at, pool_work, render_split, window_taps

# Largest window the Helium and DSP kernels sum in int16 lanes: 256 x 128 = 32768 = -INT16_MIN,
# 256 x 127 <= INT16_MAX
MAX_WINDOW = 256


def tflm_average(sums: np.ndarray, count: int) -> np.ndarray:
    """TFLM's int8 average pool division: sum / count rounded half away from zero."""
    h = count // 2
    return np.where(sums > 0, (sums + h) // count, -((h - sums) // count))


def avg_magic(count: int) -> tuple[int, int, int, int] | None:
    """(add, even, mult, shift) for eerie_pool_avg_const (helpers/pool_avg.c.j2): for every
    sum s of `count` int8 values, t = s + add - (1 if even and s < 0) lies in 0..65535 and
    ((t * mult) >> 16 >> shift) - 128 is TFLM's average; None where no 16-bit multiplier does
    (count 1, or windows past MAX_WINDOW)."""
    if not 2 <= count <= MAX_WINDOW:
        return None
    s = np.arange(-128 * count, 127 * count + 1, dtype=np.int64)
    want = tflm_average(s, count)
    add, even = count // 2 + 128 * count, count % 2 == 0
    t = s + add - ((s < 0) & even)
    if t.min() < 0 or t.max() > 0xffff:
        return None
    for shift in range(16):
        mult = -(-(1 << (16 + shift)) // count)
        if mult > 0xffff:
            break
        if np.array_equal(((t * mult) >> 16 >> shift) - 128, want):
            return add, int(even), mult, shift
    return None


def avg_rescale(x, y, geo: dict) -> dict:
    """The single rounding of a rescaling average (helpers/pool_avg.c.j2
    eerie_pool_avg_rescale): a common shift n and per window count k the multiplier
    m[k] = scale_in / (scale_out * k) * 2^n, n chosen so that m[1] fills 31 bits."""
    real = float(np.float32(x.scale)) / float(np.float32(y.scale))
    n = max(1, min(30 - math.frexp(real)[1] + 1, 62))
    most = geo["filter_h"] * geo["filter_w"]
    m = [0] + [int(round(real / k * (1 << n))) for k in range(1, most + 1)]
    return {"n": n, "m": m, "zp_in": int(x.zero_point), "zp_out": int(y.zero_point)}


def _divide(value: str, count, magic, lo: int, hi: int, rescale=None) -> str:
    if rescale is not None:
        m = f"{rescale['m'][count]}LL" if isinstance(count, int) else "m_by_count[count]"
        return (f"eerie_pool_avg_rescale({value}, {count}, {rescale['zp_in']}, {m}, {rescale['n']}, "
                f"{rescale['zp_out']}, {lo}, {hi})")
    if magic is None:
        return f"eerie_pool_avg_out({value}, {count}, {lo}, {hi})"
    add, even, mult, shift = magic
    return f"eerie_pool_avg_const({value}, {add}, {even}, {mult}u, {shift}, {lo}, {hi})"


def _sums(init: str, add_tap, taps, unroll: bool, v: dict) -> list[str]:
    """The window's sum: add_tap(index expression) per tap, unrolled over the interior's taps
    or looped over v["rows"] x v["cols"] (one loop where a fixed window spans whole rows: a
    global pool)."""
    if unroll:
        return [init] + [add_tap(str(off)) for off in taps]
    if isinstance(v["rows"], int) and v["cols"] * v["c"] == v["row"]:   # whole rows: one run
        return [init, f"for (fx = 0; fx < {v['rows'] * v['cols']}; ++fx) {{",
                "    " + add_tap(f"fx * {v['c']}"), "}"]
    return [init, f"for (fy = 0; fy < {v['rows']}; ++fy) {{",
            f"    for (fx = 0; fx < {v['cols']}; ++fx) {{",
            "        " + add_tap(f"fy * {v['row']} + fx * {v['c']}"), "    }", "}"]


def _idx(ch: str, off: str) -> str:
    """ch + off as short as C allows."""
    return " + ".join(x for x in (ch, off) if x != "0") or "0"


def _group(fam: str, ch: str, n: int, taps, unroll: bool, v: dict, div) -> list[str]:
    """One vector of channels from ch (n of them where predicated or scalar)."""
    def at(off):
        return _idx(ch, off)
    if fam == "mve":
        ld = "eerie_vld8_16" if n == 8 else "eerie_vld8_16_n"
        tail = "" if n == 8 else f", {n}"
        lines = _sums("eerie_v16 s = eerie_vzero16();",
                      lambda off: f"s = eerie_vadd16(s, {ld}(p + {at(off)}{tail}));", taps, unroll, v)
        if v["magic"] is not None:
            add, even, mult, shift = v["magic"]
            return lines + [f"eerie_vpool_avg_const({_at('q', ch, 0)}, s, {add}, {even}, {mult}u, "
                            f"{shift}, {v['lo']}, {v['hi']}, {n});"]
        return lines + ["{", "    int16_t sums[8];", "    int k;", "    eerie_vst16(sums, s);",
                        f"    for (k = 0; k < {n}; ++k) {{",
                        f"        q[{at('k')}] = {div('sums[k]')};", "    }", "}"]
    if fam == "dsp":
        lines = _sums("int32_t s02 = 0, s13 = 0, w;   /* halfword sums of channels +0, +2 | +1, +3 */",
                      lambda off: f"w = eerie_read_s8x4(p + {at(off)}); s02 = eerie_sxtab16(s02, w); "
                                  "s13 = eerie_sxtab16_ror8(s13, w);", taps, unroll, v)
        parts = ("eerie_sum_lo16(s02)", "eerie_sum_lo16(s13)", "eerie_sum_hi16(s02)", "eerie_sum_hi16(s13)")
        return lines + [f"q[{at(str(k))}] = {div(p)};" for k, p in enumerate(parts)]
    lines = _sums("int32_t s = 0;", lambda off: f"s += p[{at(off)}];", taps, unroll, v)
    return lines + [f"q[{at('0')}] = {div('s')};"]


def _pixel(fam: str, lanes: int, c: int, taps, unroll: bool, v: dict, div) -> tuple[str, bool]:
    end, tail = c - c % lanes, c % lanes
    lines, uses_ch = [], False

    def block(head: str, body: list[str]):
        lines.append(f"{head} {{" if head else "{")
        lines.extend("    " + x for x in body)
        lines.append("}")
    if end > lanes:
        step = f"ch += {lanes}" if lanes > 1 else "++ch"
        block(f"for (ch = 0; ch < {end}; {step})", _group(fam, "ch", lanes, taps, unroll, v, div))
        uses_ch = True
    elif end:
        block("", _group(fam, "0", lanes, taps, unroll, v, div))
    if tail and fam == "mve":
        block("", _group(fam, str(end), tail, taps, unroll, v, div))
    elif tail > 1:
        block(f"for (ch = {end}; ch < {c}; ++ch)", _group("scalar", "ch", 1, taps, unroll, v, div))
        uses_ch = True
    elif tail:
        block("", _group("scalar", str(end), 1, taps, unroll, v, div))
    return "\n".join(lines), uses_ch


def avg_split(x, y, geo: dict, lo: int, hi: int, target: str, rescale: dict | None = None) -> Lowered:
    """The int8 AVERAGE_POOL_2D layer x -> y (geometry from pooling._pool_params, clamps lo..hi);
    with `rescale` (avg_rescale's) each average is requantized to y's parameters, rounded once."""
    count = geo["filter_h"] * geo["filter_w"]
    fam = "scalar"
    if count <= MAX_WINDOW:
        fam = "mve" if has_mve(target) else "dsp" if has_dsp(target) else "scalar"
    lanes = {"mve": 8, "dsp": 4, "scalar": 1}[fam]
    c = geo["channels"]
    taps = window_taps(geo)
    magic = avg_magic(count) if rescale is None else None
    v = dict(row=geo["in_w"] * c, c=c, lo=lo, hi=hi)
    inner, uses_in = _pixel(fam, lanes, c, taps, len(taps) <= MAX_UNROLL,
                            dict(v, rows=geo["filter_h"], cols=geo["filter_w"], magic=magic),
                            lambda s: _divide(s, count, magic, lo, hi, rescale))
    border, uses_b = _pixel(fam, lanes, c, taps, False, dict(v, rows="rows", cols="cols", magic=None),
                            lambda s: _divide(s, "count", None, lo, hi, rescale))
    head = "const int count = rows * cols;\n"
    how = "Each divides its window's sum by the window's element count, as TFLM."
    if rescale is not None:
        head = ("/* scale_in / (scale_out * count) * 2^" + str(rescale["n"]) + " per window count */\n"
                "static const int64_t m_by_count[" + str(count + 1) + "] = {"
                + ", ".join(f"{m}LL" for m in rescale["m"]) + "};\n" + head)
        how = ("Each requantizes its window's average to the output's parameters, rounded once "
               "(the program's float average, then its quantize).")
    body = render_split(geo, inner, head + border, uses_in, uses_b, how)
    helpers = {"pool_avg", *{"mve": ("pool_mve",), "dsp": ("dsp", "pool_dsp")}.get(fam, ())}
    return Lowered(body=body, inputs=[x.id], outputs=[y.id], helpers=helpers, noinline=True,
                   work={"pool": pool_work(geo, lanes, fam == "mve")})
