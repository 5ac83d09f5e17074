"""REDUCE_MAX, REDUCE_MIN, REDUCE_ALL, SUM over constant axes; ARG_MAX / ARG_MIN along one constant axis;
CUMSUM (exclusive / reverse) along one constant axis.

Every reduction is specialised at compile time: size-1 dims are dropped and runs of adjacent
kept / reduced dims are merged, so the C is a few plain loops -- kept dims outside (one output
each), reduced dims inside, visiting the input in order as the reference does (float sums
are accumulated in the same order).

TFLM semantics (checked against the oracle):
- REDUCE_MAX / REDUCE_MIN: float32 and int8; int8 requires the output to carry the input's
  scale and zero point (TFLM refuses otherwise), so raw values are compared.
- REDUCE_ALL: bool only (TFLM's one type): true unless some reduced element is false.
- SUM: float32, int8 and int16. Integers sum the raw values in int32, then
  (sum - zp_in * count) is requantized by scale_in / scale_out (TFLite's
  MultiplyByQuantizedMultiplier, multiplier from double), + zp_out, clamped to the type.
- ARG_MAX / ARG_MIN: float32 and int8 inputs, int32 output (TFLM rejects int64 outputs); ties
  give the first index (strict comparison).
- CUMSUM: float32 and int8. int8 follows TFLM's integer path like ADD's: each
  (x - zp_in) << 20 is scaled by 1/2 (Q31 multiplier), accumulated in int32, then scaled by
  2 * scale_in / (2^20 * scale_out), + zp_out, clamped. Note the accumulator starts at the
  scaled -zp_in, not at 0 (TFLM's reference does this; the tests confirm it bit-exactly).
"""
from __future__ import annotations

import numpy as np

from ..errors import EerieError
from . import Lowered, kernel
from ._quant import quantize_multiplier

LIMITS = {"int8": (-128, 127), "int16": (-32768, 32767)}


def _axes(op, g, rank, what, single=False):
    if len(op.inputs) < 2 or op.inputs[1] is None or not g.t(op.inputs[1]).is_const:
        raise EerieError(f"{what}: the axis tensor must be constant")
    vals = [int(v) for v in np.asarray(g.t(op.inputs[1]).data).reshape(-1)]
    if single and len(vals) != 1:
        raise EerieError(f"{what}: the axis tensor must hold one value, got {vals}")
    axes = []
    for a in vals:
        a2 = a + rank if a < 0 else a
        if not 0 <= a2 < rank:
            raise EerieError(f"{what}: axis {a} out of range for rank {rank}")
        if a2 not in axes:
            axes.append(a2)
    return sorted(axes)


def _nest(shape, axes):
    """(kept, reduced): [(size, stride)] groups, size-1 dims dropped, neighbours of the same
    kind merged; strides in input elements."""
    strides = [int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape))]
    groups: list[list] = []
    for i, (n, st) in enumerate(zip(shape, strides)):
        if n == 1:
            continue
        red = i in axes
        if groups and groups[-1][0] == red and groups[-1][2] == n * st:
            groups[-1][1] *= n
            groups[-1][2] = st
        else:
            groups.append([red, n, st])
    return ([(n, st) for r, n, st in groups if not r], [(n, st) for r, n, st in groups if r])


def _index(var, loops):
    terms = [f"{var}{k}" if st == 1 else f"{var}{k} * {st}" for k, (_, st) in enumerate(loops)]
    return " + ".join(terms) or "0"


def _reduce_c(ctype_in, kept, reduced, init, step, finish):
    """C for: per kept position, acc = init; for each reduced element v: step; out = finish.
    `step` / `finish` are C statement strings using `acc`, `v` (the element) and `r`
    (the reduced-loop flat position, for ARG_*)."""
    lines = []
    ks = [f"k{k}" for k in range(len(kept))]
    rs = [f"r{k}" for k in range(len(reduced))]
    if ks or rs:
        lines.append(f"int {', '.join(ks + rs)};")
    if ks:
        lines.append("int o = 0;")
    for k, (n, _) in enumerate(kept):
        lines.append("    " * k + f"for (k{k} = 0; k{k} < {n}; ++k{k}) {{")
    ind = "    " * len(kept)
    body = [f"const {ctype_in} *x = in0 + {_index('k', kept)};" if kept else f"const {ctype_in} *x = in0;"]
    body += init
    for k, (n, _) in enumerate(reduced):
        body.append("    " * k + f"for (r{k} = 0; r{k} < {n}; ++r{k}) {{")
    rind = "    " * len(reduced)
    body.append(rind + f"const {ctype_in} v = x[{_index('r', reduced)}];")
    body += [rind + s for s in step]
    for k in reversed(range(len(reduced))):
        body.append("    " * k + "}")
    body += [s.replace("OUT", "out0[o++]" if kept else "out0[0]") for s in finish]
    lines += [ind + "{"] + [ind + "    " + s for s in body] + [ind + "}"]
    for k in reversed(range(len(kept))):
        lines.append("    " * k + "}")
    return "\n".join(lines) + "\n"


def _out_shape_ok(x, y, axes, what):
    keep = [1 if i in axes else d for i, d in enumerate(x.shape)]
    drop = [d for i, d in enumerate(x.shape) if i not in axes]
    if list(y.shape) not in (keep, drop):
        raise EerieError(f"{what}: output {list(y.shape)} does not match reducing "
                         f"{list(x.shape)} over axes {axes}")


def _same_quant(x, y, what):
    if x.quant is None or y.quant is None or x.quant.per_channel or y.quant.per_channel:
        raise EerieError(f"{what}: int tensors need per-tensor quantization")


@kernel("REDUCE_MAX", dtypes=("float32", "int8"))
def lower_reduce_max(op, g, ctx):
    return _lower_minmax(op, g, ctx, ">")


@kernel("REDUCE_MIN", dtypes=("float32", "int8"))
def lower_reduce_min(op, g, ctx):
    return _lower_minmax(op, g, ctx, "<")


def _lower_minmax(op, g, ctx, cmp):
    what = f"{op.kind} (op {op.index})"
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    axes = _axes(op, g, len(x.shape), what)
    _out_shape_ok(x, y, axes, what)
    if x.dtype != y.dtype:
        raise EerieError(f"{what}: input {x.dtype} but output {y.dtype}")
    if x.dtype == "int8":
        _same_quant(x, y, what)
        if np.float32(x.scale) != np.float32(y.scale) or x.zero_point != y.zero_point:
            raise EerieError(f"{what}: int8 output must have the input's scale and zero point "
                             f"(TFLM requires it)")
    if x.size == 0:
        raise EerieError(f"{what}: empty input")
    kept, reduced = _nest(list(x.shape), axes)
    if x.dtype == "float32":
        # TFLM starts from the type's lowest / highest finite value
        init = ["float acc = -FLT_MAX;" if cmp == ">" else "float acc = FLT_MAX;"]
        ctype = "float"
    else:
        init = ["int8_t acc = -128;" if cmp == ">" else "int8_t acc = 127;"]
        ctype = "int8_t"
    body = _reduce_c(ctype, kept, reduced, init, [f"acc = v {cmp} acc ? v : acc;"], ["OUT = acc;"])
    return Lowered(body=body, inputs=[x.id], outputs=[y.id])


@kernel("REDUCE_ALL", dtypes=("bool",))
def lower_reduce_all(op, g, ctx):
    what = f"REDUCE_ALL (op {op.index})"
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    axes = _axes(op, g, len(x.shape), what)
    _out_shape_ok(x, y, axes, what)
    if y.dtype != "bool":
        raise EerieError(f"{what}: output {y.dtype}, expected bool")
    kept, reduced = _nest(list(x.shape), axes)
    body = _reduce_c("uint8_t", kept, reduced, ["uint8_t acc = 1;"],
                     ["acc = (uint8_t)(acc & (v != 0));"], ["OUT = acc;"])
    return Lowered(body=body, inputs=[x.id], outputs=[y.id])


@kernel("SUM", dtypes=("float32", "int8", "int16"))
def lower_sum(op, g, ctx):
    what = f"SUM (op {op.index})"
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    axes = _axes(op, g, len(x.shape), what)
    _out_shape_ok(x, y, axes, what)
    if x.dtype != y.dtype:
        raise EerieError(f"{what}: input {x.dtype} but output {y.dtype}")
    kept, reduced = _nest(list(x.shape), axes)
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64)) if axes else 1
    if x.dtype == "float32":
        body = _reduce_c("float", kept, reduced, ["float acc = 0.0f;"], ["acc += v;"], ["OUT = acc;"])
        return Lowered(body=body, inputs=[x.id], outputs=[y.id])
    _same_quant(x, y, what)
    lo, hi = LIMITS[x.dtype]
    mult, shift = quantize_multiplier(float(np.float32(x.scale)) / float(np.float32(y.scale)))
    offset = -x.zero_point * count
    finish = [
        "/* (sum - zp_in * count) rescaled to the output scale */",
        f"acc = eerie_requantize(acc{' + ' + str(offset) if offset > 0 else (' - ' + str(-offset) if offset else '')}, {mult}, {shift}) + {y.zero_point};",
        f"acc = acc < {lo} ? {lo} : acc;",
        f"acc = acc > {hi} ? {hi} : acc;",
        f"OUT = ({y.ctype})acc;",
    ]
    body = _reduce_c(x.ctype, kept, reduced, ["int32_t acc = 0;"], ["acc += v;"], finish)
    return Lowered(body=body, inputs=[x.id], outputs=[y.id], helpers={"requant"})


def _lower_arg(op, g, ctx, cmp):
    what = f"{op.kind} (op {op.index})"
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    axes = _axes(op, g, len(x.shape), what, single=True)
    if y.dtype != "int32":
        raise EerieError(f"{what}: output {y.dtype}; TFLM supports int32 outputs only")
    if list(y.shape) != [d for i, d in enumerate(x.shape) if i not in axes]:
        raise EerieError(f"{what}: output {list(y.shape)} does not match {list(x.shape)} "
                         f"without axis {axes[0]}")
    if x.size == 0:
        raise EerieError(f"{what}: empty input")
    kept, reduced = _nest(list(x.shape), axes)
    ctype = x.ctype
    # reduced is one loop (a single axis) or none (an axis of size 1: always index 0)
    init = [f"{ctype} best = x[0];", "int32_t arg = 0;"]
    step = [f"if (v {cmp} best) {{", "    best = v;", "    arg = (int32_t)r0;", "}"] if reduced else []
    if not reduced:
        init = ["(void)x;"]
        body = _reduce_c(ctype, kept, [], init, ["(void)v;"], ["OUT = 0;"])
    else:
        body = _reduce_c(ctype, kept, reduced, init, step, ["OUT = arg;"])
    return Lowered(body=body, inputs=[x.id], outputs=[y.id])


@kernel("ARG_MAX", dtypes=("float32", "int8"))
def lower_arg_max(op, g, ctx):
    return _lower_arg(op, g, ctx, ">")


@kernel("ARG_MIN", dtypes=("float32", "int8"))
def lower_arg_min(op, g, ctx):
    return _lower_arg(op, g, ctx, "<")


@kernel("CUMSUM", dtypes=("float32", "int8"))
def lower_cumsum(op, g, ctx):
    what = f"CUMSUM (op {op.index})"
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    if len(x.shape) < 1:
        raise EerieError(f"{what}: needs an input of rank >= 1")
    axis = _axes(op, g, len(x.shape), what, single=True)[0]
    if list(y.shape) != list(x.shape) or x.dtype != y.dtype:
        raise EerieError(f"{what}: output {y.dtype}{list(y.shape)} must match input "
                         f"{x.dtype}{list(x.shape)}")
    exclusive = bool(op.attrs.get("exclusive", False))
    reverse = bool(op.attrs.get("reverse", False))
    n = int(x.shape[axis])
    step_st = int(np.prod(x.shape[axis + 1:], dtype=np.int64))
    # kept dims: every dim but the axis (size-1 ones dropped, neighbours merged)
    kept, _ = _nest(list(x.shape), [axis])
    ks = [f"k{k}" for k in range(len(kept))]
    lines = [f"int {', '.join(ks + ['j'])};"]
    for k, (m, _) in enumerate(kept):
        lines.append("    " * k + f"for (k{k} = 0; k{k} < {m}; ++k{k}) {{")
    ind = "    " * len(kept)
    base = _index("k", kept)
    pos = f"({n - 1} - j)" if reverse else "j"
    at = f"{pos} * {step_st}" if step_st != 1 else pos
    body = [f"const {x.ctype} *x = in0 + {base};", f"{y.ctype} *y = out0 + {base};"]
    if x.dtype == "float32":
        body += ["float acc = 0.0f;", f"for (j = 0; j < {n}; ++j) {{"]
        if exclusive:
            body += [f"    y[{at}] = acc;", f"    acc += x[{at}];"]
        else:
            body += [f"    acc += x[{at}];", f"    y[{at}] = acc;"]
        body += ["}"]
    else:
        _same_quant(x, y, what)
        s_in, s_out = float(np.float32(x.scale)), float(np.float32(y.scale))
        in_m, in_s = quantize_multiplier(s_in / (2 * s_in))
        out_m, out_s = quantize_multiplier(2 * s_in / ((1 << 20) * s_out))
        if in_s > 0 or out_s > 0:
            raise EerieError(f"{what}: scale_in / scale_out too large for TFLM's int8 CUMSUM")
        zin = x.zero_point
        body += [
            "/* inputs as (x - zp_in) * 2^20 / 2; the sum starts at the scaled -zp_in like TFLM's */",
            f"int32_t acc = eerie_requantize({-zin} * (1 << 20), {in_m}, {in_s});",
            "int32_t s, q;",
            f"for (j = 0; j < {n}; ++j) {{",
            f"    const int32_t v = eerie_requantize((x[{at}] - ({zin})) * (1 << 20), {in_m}, {in_s});",
        ]
        if exclusive:
            body += ["    s = acc;", "    acc += v;"]
        else:
            body += ["    acc += v;", "    s = acc;"]
        body += [
            f"    q = eerie_requantize(s, {out_m}, {out_s}) + {y.zero_point};",
            "    q = q < -128 ? -128 : q;",
            "    q = q > 127 ? 127 : q;",
            f"    y[{at}] = (int8_t)q;",
            "}",
        ]
    lines += [ind + "{"] + [ind + "    " + s for s in body] + [ind + "}"]
    for k in reversed(range(len(kept))):
        lines.append("    " * k + "}")
    return Lowered(body="\n".join(lines) + "\n", inputs=[x.id], outputs=[y.id],
                   helpers={"requant"} if x.dtype == "int8" else set(),
                   comment=f"CUMSUM {op.name} axis {axis}{' exclusive' if exclusive else ''}"
                           f"{' reverse' if reverse else ''}".replace("*/", ""))
