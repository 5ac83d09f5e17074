"""The int8 MAX_POOL_2D kernel (templates/kernels/pool_s8_split.c.j2): per output pixel
its channels in vectors, 16 per Helium vector on the M55 (VMAX.S8, the last partial vector
predicated), 4 per word on DSP cores (SSUB8 + SEL, helpers/pool_max_dsp.c.j2), one at a time
elsewhere and past the DSP words (helpers/pool_max.c.j2: a compare and a predicated move on
Arm, a compare and branch on RISC-V, measured faster there than a branch-free form). Output
pixels whose window lies wholly inside the input read it at constant offsets (unrolled up to
MAX_UNROLL taps), the border's windows are clipped to the input as in the portable kernel.
The running max starts at the fused activation's minimum, so the low clamp costs nothing; the
high clamp is one min, emitted only where it can bite. Same bytes as TFLM: max and clamps are
exact. Lowered.work["pool"] counts the vector loads and stores for estimate.py."""
from __future__ import annotations

from ..templating import render
from . import Lowered
from ._dsp import has_dsp
from ._mve import has_mve

MAX_UNROLL = 25   # interior windows up to 5x5 unrolled (a global pool keeps its loops)


def interior_range(out: int, size: int, filt: int, stride: int, pad: int) -> tuple[int, int]:
    """[first, last + 1) of the outputs whose window (start k * stride - pad, filt long) lies
    wholly inside 0 .. size; first == last when there is none."""
    first = min(out, -(-pad // stride))
    last = min(out, (size - filt + pad) // stride + 1)
    return first, max(first, last)


# Per family: C type, lanes, load (of p + index) / max / min / store (to q + index) and whether
# the channels past the last whole vector are predicated lanes (else scalar, as SCALAR).
VECTORS = {
    "mve": dict(type="eerie_v8", lanes=16, ld="eerie_vld8({})", max="eerie_vmax8",
                min="eerie_vmin8", st="eerie_vst8({}, m)", ld_n="eerie_vld8_n({}, {n})",
                st_n="eerie_vst8_n({}, m, {n})", dup="eerie_vdup8({})",
                helpers=("base_mve", "pool_max_mve")),
    "dsp": dict(type="int32_t", lanes=4, ld="eerie_read_s8x4({})", max="eerie_max_s8x4",
                min="eerie_min_s8x4", st="eerie_write_s8x4({}, m)", dup=None,
                helpers=("dsp", "pool_max_dsp", "pool_max")),
}
SCALAR = dict(type="int32_t", lanes=1, ld="*({})", max="eerie_max_i32", min="eerie_min_i32",
              st="*({}) = (int8_t)m", dup="{}", helpers=("pool_max",))


def _at(base: str, ch: str, off: int) -> str:
    """base + ch + off as short as C allows."""
    parts = [x for x in (ch if ch != "0" else "", str(off) if off else "") if x]
    return f"{base} + {' + '.join(parts)}" if parts else base


def _const(v: dict, value: int) -> str:
    if v["dup"] is None:   # DSP: the byte in all four lanes of a word
        w = (value & 0xff) * 0x01010101
        return str(w - (1 << 32) if w >= 1 << 31 else w)
    return v["dup"].format(value)


def _group(v: dict, ch: str, window, lo: int, hi: int, tail: int = 0) -> list[str]:
    """One vector of channels from ch: the running max over the window, the high clamp, the
    store. window: the interior's tap offsets (unrolled when few), or None: loops over
    v["rows"] x v["cols"] (the border's clipped window, or a large interior one)."""
    ld, st = (v["ld_n"], v["st_n"]) if tail else (v["ld"], v["st"])
    ld, st = ld.replace("{n}", str(tail)), st.replace("{n}", str(tail))
    if window is not None and len(window) <= MAX_UNROLL:
        first = lo == -128   # no low clamp: start from the first tap
        out = [f"{v['type']} m = {ld.format(_at('p', ch, window[0])) if first else _const(v, lo)};"]
        out += [f"m = {v['max']}(m, {ld.format(_at('p', ch, off))});"
                for off in (window[1:] if first else window)]
    elif isinstance(v["rows"], int) and v["cols"] * v["c"] == v["row"]:   # whole rows: one run
        out = [f"{v['type']} m = {_const(v, lo)};",
               f"for (fx = 0; fx < {v['rows'] * v['cols']}; ++fx) {{",
               f"    m = {v['max']}(m, {ld.format(_at('p', ch, 0) + ' + fx * ' + str(v['c']))});", "}"]
    else:
        at = f" + fy * {v['row']} + fx * {v['c']}"
        out = [f"{v['type']} m = {_const(v, lo)};",
               f"for (fy = 0; fy < {v['rows']}; ++fy) {{",
               f"    for (fx = 0; fx < {v['cols']}; ++fx) {{",
               f"        m = {v['max']}(m, {ld.format(_at('p', ch, 0) + at)});",
               "    }", "}"]
    if hi < 127:
        out.append(f"m = {v['min']}(m, {_const(v, hi)});")
    out.append(st.format(_at("q", ch, 0)) + ";")
    return out


def _pixel(v: dict, c: int, window, lo: int, hi: int) -> tuple[str, bool]:
    """The code of one output pixel (all c channels) and whether it uses the variable ch."""
    lanes = v["lanes"]
    end, tail = c - c % lanes, c % lanes
    lines, uses_ch = [], False

    def block(head: str, body: list[str]):
        lines.append(f"{head} {{" if head else "{")
        lines.extend("    " + x for x in body)
        lines.append("}")
    if end > lanes:
        step = f"ch += {lanes}" if lanes > 1 else "++ch"
        block(f"for (ch = 0; ch < {end}; {step})", _group(v, "ch", window, lo, hi))
        uses_ch = True
    elif end:
        block("", _group(v, "0", window, lo, hi))
    if tail and "ld_n" in v:
        block("", _group(v, str(end), window, lo, hi, tail))
    elif tail:
        s = dict(SCALAR, rows=v["rows"], cols=v["cols"], row=v["row"], c=v["c"])
        if tail > 1:
            block(f"for (ch = {end}; ch < {c}; ++ch)", _group(s, "ch", window, lo, hi))
            uses_ch = True
        else:
            block("", _group(s, str(end), window, lo, hi))
    return "\n".join(lines), uses_ch


def max_split(x, y, geo: dict, lo: int, hi: int, target: str) -> Lowered:
    """The int8 MAX_POOL_2D layer x -> y (geometry from pooling._pool_params, clamps lo..hi)."""
    fam = "mve" if has_mve(target) else "dsp" if has_dsp(target) else "scalar"
    c, fh, fw = geo["channels"], geo["filter_h"], geo["filter_w"]
    row = geo["in_w"] * c
    v = dict(VECTORS.get(fam, SCALAR), row=row, c=c)
    taps = window_taps(geo)
    inner, uses_in = _pixel(dict(v, rows=fh, cols=fw), c, taps, lo, hi)
    border, uses_b = _pixel(dict(v, rows="rows", cols="cols"), c, None, lo, hi)
    body = render_split(geo, inner, border, uses_in, uses_b,
                        "The running max starts at the fused activation's minimum (the low clamp).")
    return Lowered(body=body, inputs=[x.id], outputs=[y.id], helpers=set(v["helpers"]),
                   work={"pool": pool_work(geo, v["lanes"], "ld_n" in v)})


def window_taps(geo: dict) -> list[int]:
    """The offsets of a whole window's elements from its first (row by row)."""
    row, c = geo["in_w"] * geo["channels"], geo["channels"]
    return [fy * row + fx * c for fy in range(geo["filter_h"]) for fx in range(geo["filter_w"])]


def render_split(geo: dict, interior_code: str, border_code: str, interior_uses_ch: bool,
                 border_uses_ch: bool, note: str) -> str:
    """The pool kernel's loops (templates/kernels/pool_s8_split.c.j2) around one output
    pixel's code for the interior and for the border."""
    oy_a, oy_b = interior_range(geo["out_h"], geo["in_h"], geo["filter_h"], geo["stride_h"], geo["pad_h"])
    ox_a, ox_b = interior_range(geo["out_w"], geo["in_w"], geo["filter_w"], geo["stride_w"], geo["pad_w"])
    interior = oy_a < oy_b and ox_a < ox_b
    return render("kernels/pool_s8_split.c.j2", row=geo["in_w"] * geo["channels"], oy_a=oy_a,
                  oy_b=oy_b, ox_a=ox_a, ox_b=ox_b, interior=interior, interior_code=interior_code,
                  border_code=border_code, uses_ch=border_uses_ch or (interior and interior_uses_ch),
                  note=note, **geo)


def pool_work(geo: dict, lanes: int, predicated: bool) -> dict:
    """The vector loads (one per window pixel and channel vector, summed over the output
    pixels: the clipped windows as run) and stores of a pool kernel whose channel vectors
    have `lanes` lanes, the channels past the last whole vector predicated or one at a time:
    what estimate.py counts."""
    def clipped(out, size, filt, stride, pad):
        return sum(min(k * stride - pad + filt, size) - max(k * stride - pad, 0) for k in range(out))
    c = geo["channels"]
    vectors = c // lanes + ((1 if c % lanes else 0) if predicated else c % lanes)
    window = clipped(geo["out_h"], geo["in_h"], geo["filter_h"], geo["stride_h"], geo["pad_h"]) \
        * clipped(geo["out_w"], geo["in_w"], geo["filter_w"], geo["stride_w"], geo["pad_w"])
    pixels = geo["out_h"] * geo["out_w"]
    return {"lanes": lanes, "loads": geo["batches"] * window * vectors,
            "stores": geo["batches"] * pixels * vectors}
