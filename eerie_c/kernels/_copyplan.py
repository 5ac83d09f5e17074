"""Compile-time planning of pure data-movement kernels (split, pack, space/depth, resize...).

A data-movement op is described by an index map: for each output element (in output order),
the flat index of the input element it copies. From that map the planner finds the cheapest
C it can prove equivalent:

- size-1 output dims are dropped;
- if the map is separable (index = base + f_0(i_0) + f_1(i_1) + ...), each dim whose f is
  affine (f(i) = i * stride) becomes a plain loop, neighbouring affine dims that walk the input
  contiguously are merged, and a dim whose f is irregular (mirror padding, nearest-neighbour
  resize) reads a small per-dim offset table from flash;
- an innermost run that is contiguous in the input becomes one memcpy;
- anything else (never produced by the kernels here, but kept as a safe fallback) reads one
  flat index table.

Every bound, stride and offset is a literal; the result is checked against the map in numpy
before any C is produced, so a planning bug fails the compile instead of miscopying.
"""
from __future__ import annotations

import numpy as np

MEMCPY_MIN = 4      # shorter contiguous runs are copied element by element


def flat_index(shape) -> np.ndarray:
    """Flat row-major index of every element of `shape`, shaped like it."""
    n = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
    return np.arange(n, dtype=np.int64).reshape(tuple(int(d) for d in shape))


def _separable(idx: np.ndarray):
    """(base, [per-dim offset arrays]) when idx == base + sum_d f_d[i_d], else None."""
    base = int(idx.reshape(-1)[0])
    fs = []
    total = np.full(idx.shape, base, dtype=np.int64)
    for d in range(idx.ndim):
        sel = tuple(slice(None) if k == d else 0 for k in range(idx.ndim))
        f = idx[sel].astype(np.int64) - base
        fs.append(f)
        shape = [1] * idx.ndim
        shape[d] = idx.shape[d]
        total = total + f.reshape(shape)
    if not np.array_equal(total, idx):
        return None
    return base, fs


def _affine_stride(f: np.ndarray):
    if len(f) < 2:
        return 0
    s = int(f[1] - f[0])
    return s if np.array_equal(f, np.arange(len(f), dtype=np.int64) * s) else None


def _block(lines: list[str]) -> str:
    return "{\n" + "".join("    " + ln + "\n" if ln else "\n" for ln in lines) + "}\n"


def copy_body(idx: np.ndarray, ctx, src: str = "in0", dst: str = "out0", hint: str = "idx",
              scatter: bool = False) -> str:
    """C statements (one braced block) copying src -> dst as the index map says: idx holds,
    per dst element in order, its src index -- or with scatter=True, per src element in order,
    its dst index (PACK writes each input into a strided slab of the output)."""
    idx = np.asarray(idx, dtype=np.int64)
    n_out = int(idx.size)
    if n_out == 0:
        return f"(void){src};\n(void){dst};\n"
    dims = [int(d) for d in idx.shape if int(d) != 1]
    idx = idx.reshape(dims) if dims else idx.reshape(1)
    if not dims:
        if scatter:
            return f"{dst}[{int(idx[0])}] = {src}[0];\n"
        return f"{dst}[0] = {src}[{int(idx[0])}];\n"
    sep = _separable(idx)
    if sep is None:
        itype = "uint16_t" if int(idx.max()) < 65536 else "int32_t"
        tbl = ctx.const(idx.reshape(-1).astype(np.int64), itype, f"{hint}_map",
                        "input index of each output element")
        return _block([f"int i;",
                       f"for (i = 0; i < {n_out}; ++i) {{",
                       f"    {dst}[{tbl}[i]] = {src}[i];" if scatter else f"    {dst}[i] = {src}[{tbl}[i]];",
                       "}"])
    base, fs = sep
    # loops: [size, stride or None, table name or None]
    loops: list[list] = []
    for d, f in enumerate(fs):
        s = _affine_stride(f)
        if s is not None:
            if loops and loops[-1][1] is not None and loops[-1][1] == s * len(f):
                loops[-1][0] *= len(f)
                loops[-1][1] = s
                continue
            loops.append([len(f), s, None])
        else:
            itype = "uint16_t" if int(f.max()) < 65536 and int(f.min()) >= 0 else "int32_t"
            loops.append([len(f), None, ctx.const(f, itype, f"{hint}_off{d}",
                                                 "input offset along one output dim")])
    run = 1
    if loops[-1][1] == 1 and loops[-1][0] >= MEMCPY_MIN:
        run = loops.pop()[0]
    if not loops:
        return (f"memcpy({dst}{' + ' + str(base) if base and scatter else ''}, "
                f"{src}{' + ' + str(base) if base and not scatter else ''}, {run} * sizeof(*{dst}));\n")
    lines = [f"int {', '.join(f'i{k}' for k in range(len(loops)))};", "int o = 0;"]
    for k, (n, _, _) in enumerate(loops):
        lines.append("    " * k + f"for (i{k} = 0; i{k} < {n}; ++i{k}) {{")
    terms = [str(base)] if base else []
    for k, (n, s, tbl) in enumerate(loops):
        if tbl is not None:
            terms.append(f"{tbl}[i{k}]")
        elif s == 1:
            terms.append(f"i{k}")
        elif s:
            terms.append(f"i{k} * {s}" if s > 0 else f"- i{k} * {-s}")
    expr = " + ".join(terms).replace("+ -", "-") or "0"
    if expr.startswith("- "):
        expr = "0 " + expr
    ind = "    " * len(loops)
    if run > 1:
        d, s_ = (f"{dst} + {expr}", f"{src} + o") if scatter else (f"{dst} + o", f"{src} + {expr}")
        lines.append(ind + f"memcpy({d}, {s_}, {run} * sizeof(*{dst}));")
        lines.append(ind + f"o += {run};")
    elif scatter:
        lines.append(ind + f"{dst}[{expr}] = {src}[o++];")
    else:
        lines.append(ind + f"{dst}[o++] = {src}[{expr}];")
    for k in reversed(range(len(loops))):
        lines.append("    " * k + "}")
    return _block(lines)
