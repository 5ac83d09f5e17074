"""Run-time sizes of dynamic dimensions (torch.export.Dim(..., max=N) other than a per-sample
batch): the program is compiled for the maximum sizes, and these ops use the actual sizes,
which NAME_invoke receives as int arguments and DYN_SIZES stores in a small int32 tensor.

A tensor of a dynamic dimension is held at its maximum size; only a part of it is valid (a
prefix of each dynamic extent). Its layout is described by `levels`: the tensor's index space
as a mixed-radix number, outermost first, [extent, limit] per level where `limit` is None (all
valid) or a C expression of the sizes (`in1[k]`), then `inner` contiguous elements that are
always valid. Ops that read across a dynamic dimension get their input through DYN_MASK
(invalid elements replaced by the op's neutral value: 0 for sums and convolutions, -inf for
max and softmax); user inputs come in compact (actual-size) layout and are spread out by
DYN_UNPACK, outputs are gathered back into compact layout by DYN_PACK.

Every loop bound is a literal (the maximum); the sizes only choose what each visit does.
"""
from __future__ import annotations

from ..errors import EerieError
from . import Lowered, kernel

DTYPES = ("float32", "int32", "bool")


def _fill_text(value, dtype: str) -> str:
    v = float(value)
    if dtype == "float32":
        if v == float("inf"):
            return "INFINITY"
        if v == float("-inf"):
            return "-INFINITY"
        return f"{v!r}f"
    if dtype == "bool":
        return "1" if v else "0"
    iv = int(max(-2 ** 31, min(2 ** 31 - 1, v))) if v not in (float("inf"), float("-inf")) else \
        (2 ** 31 - 1 if v > 0 else -2 ** 31)
    return "(-2147483647 - 1)" if iv == -2 ** 31 else str(iv)


def _walk(levels, inner: int, valid: list[str], invalid: list[str], counters: list[str]) -> str:
    """Nested loops over the padded blocks in order (p: padded offset of the block); `valid`
    runs for blocks whose every digit is below its limit, `invalid` for the others."""
    n = len(levels)
    idx = [f"i{k}" for k in range(n)]
    lines = []
    decl = ["int32_t p = 0;"] + [f"int32_t {c} = 0;" for c in counters] + ["int32_t j;"]
    if n:
        decl.insert(0, "int " + ", ".join(idx) + ";")
    lims = [(k, ext, lim) for k, (ext, lim) in enumerate(levels) if lim is not None]
    for k, ext, lim in lims:
        decl.append(f"int32_t lim{k} = {lim};")
    for k, ext, _ in lims:
        # clamp: a size outside its range never reads or writes past the maximum
        lines.append(f"lim{k} = lim{k} < 0 ? 0 : (lim{k} > {ext} ? {ext} : lim{k});")
    ind = ""
    for k, (ext, _) in enumerate(levels):
        lines.append(f"{ind}for ({idx[k]} = 0; {idx[k]} < {ext}; ++{idx[k]}) {{")
        ind += "    "
    cond = " && ".join(f"{idx[k]} < lim{k}" for k, _, _ in lims) or "1"
    if invalid:
        lines.append(f"{ind}if ({cond}) {{")
        lines += [f"{ind}    {s}" for s in valid]
        lines.append(f"{ind}}} else {{")
        lines += [f"{ind}    {s}" for s in invalid]
        lines.append(f"{ind}}}")
    else:
        lines.append(f"{ind}if ({cond}) {{")
        lines += [f"{ind}    {s}" for s in valid]
        lines.append(f"{ind}}}")
    lines.append(f"{ind}p += {inner};")
    for k in range(n - 1, -1, -1):
        ind = ind[:-4]
        lines.append(f"{ind}}}")
    return "\n".join(decl + lines) + "\n"


def _levels(op):
    lv = [(int(e), lim) for e, lim in op.attrs["levels"]]
    return lv, int(op.attrs["inner"])


def _check(op, g):
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    lv, inner = _levels(op)
    total = inner
    for e, _ in lv:
        total *= e
    return x, y, lv, inner, total


@kernel("DYN_MASK", dtypes=DTYPES)
def lower_mask(op, g, ctx):
    x, y, lv, inner, total = _check(op, g)
    if total != x.size or x.size != y.size:
        raise EerieError(f"DYN_MASK (op {op.index}): levels cover {total} of {x.size} elements")
    fill = _fill_text(op.attrs.get("fill", 0.0), x.dtype)
    body = _walk(lv, inner,
                 [f"for (j = 0; j < {inner}; ++j) out0[p + j] = in0[p + j];"],
                 [f"for (j = 0; j < {inner}; ++j) out0[p + j] = {fill};"], [])
    return Lowered(body, [x.id, op.inputs[1]], [y.id],
                   comment=f"dynamic size: elements past the actual size become {fill}")


@kernel("DYN_UNPACK", dtypes=DTYPES)
def lower_unpack(op, g, ctx):
    x, y, lv, inner, total = _check(op, g)
    if total != y.size:
        raise EerieError(f"DYN_UNPACK (op {op.index}): levels cover {total} of {y.size} elements")
    zero = _fill_text(0, y.dtype)
    body = _walk(lv, inner,
                 [f"for (j = 0; j < {inner}; ++j) out0[p + j] = in0[c + j];", f"c += {inner};"],
                 [f"for (j = 0; j < {inner}; ++j) out0[p + j] = {zero};"], ["c"])
    return Lowered(body, [x.id, op.inputs[1]], [y.id],
                   comment="dynamic size: the caller's compact input spread out to the maximum size")


@kernel("DYN_PACK", dtypes=DTYPES)
def lower_pack(op, g, ctx):
    x, y, lv, inner, total = _check(op, g)
    if total != x.size:
        raise EerieError(f"DYN_PACK (op {op.index}): levels cover {total} of {x.size} elements")
    body = _walk(lv, inner,
                 [f"for (j = 0; j < {inner}; ++j) out0[c + j] = in0[p + j];", f"c += {inner};"],
                 [], ["c"])
    return Lowered(body, [x.id, op.inputs[1]], [y.id],
                   comment="dynamic size: the valid part gathered into the caller's compact output")


@kernel("DYN_SCALE", dtypes=("float32",))
def lower_scale(op, g, ctx):
    """y = x * num / den(sizes): a mean over a dynamic extent, computed as a mean over the
    maximum extent of zero-masked values, rescaled to the actual count."""
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    num, den = int(op.attrs["num"]), op.attrs["den"]
    body = (f"int32_t i;\nint32_t den = {den};\n"
            f"/* the actual count (at least 1: a mean over nothing is not defined) */\n"
            f"const float s = (float){num} / (float)(den > 0 ? den : 1);\n"
            f"for (i = 0; i < {x.size}; ++i) {{\n    out0[i] = in0[i] * s;\n}}\n")
    return Lowered(body, [x.id, op.inputs[1]], [y.id],
                   comment="dynamic size: mean over the maximum extent rescaled to the actual count")


@kernel("DYN_SLICE", dtypes=DTYPES)
def lower_slice(op, g, ctx):
    """out[o, j, i] = in[o, start + j, i] with `start` known at run time (x[..., -1, ...] on a
    dynamic dimension), clamped so that it never reads past the maximum."""
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    outer, ext, count, inner = (int(op.attrs[k]) for k in ("outer", "extent", "count", "inner"))
    if outer * count * inner != y.size or outer * ext * inner != x.size or count > ext:
        raise EerieError(f"DYN_SLICE (op {op.index}): inconsistent geometry")
    body = (f"int32_t o, j, i;\nint32_t start = {op.attrs['start']};\n"
            f"start = start < 0 ? 0 : (start > {ext - count} ? {ext - count} : start);\n"
            f"for (o = 0; o < {outer}; ++o) {{\n"
            f"    for (j = 0; j < {count}; ++j) {{\n"
            f"        for (i = 0; i < {inner}; ++i) {{\n"
            f"            out0[(o * {count} + j) * {inner} + i] = in0[(o * {ext} + start + j) * {inner} + i];\n"
            f"        }}\n    }}\n}}\n")
    return Lowered(body, [x.id, op.inputs[1]], [y.id],
                   comment="dynamic size: a slice at an offset known at run time")


@kernel("DYN_SIZES", dtypes=("int32",))
def lower_sizes(op, g, ctx):
    """Statements of NAME_invoke: store its size arguments in the sizes tensor the DYN_* ops
    read (the tensor lives in the arena like any other)."""
    names = list(op.attrs["params"])
    lines = [f"((int32_t *)({{in0}}))[{k}] = (int32_t){n};" for k, n in enumerate(names)]
    return Lowered("", [op.outputs[0]], [], control=(0, lines, 0),
                   comment="dynamic sizes")
