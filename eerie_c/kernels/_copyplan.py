"""Compile-time planning of pure data-movement kernels (split, pack, space/depth, resize...).

A data-movement op is described by two index maps of the same shape: element i of the copy
reads src[src_idx[i]] and writes dst[dst_idx[i]] (for a gather, dst_idx is just the output
order). From the maps the planner finds cheap C:

- size-1 dims are dropped;
- if both maps are separable (index = base + f_0(i_0) + f_1(i_1) + ...), each dim whose f is
  affine (f(i) = i * stride) becomes a plain loop, neighbouring affine dims that walk both
  sides contiguously are merged, and a dim whose f is irregular (mirror padding,
  nearest-neighbour resize) reads a small per-dim offset table from flash;
- an innermost run contiguous on both sides becomes one memcpy;
- anything else (not produced by the kernels here, kept as a safe fallback) reads flat index
  tables.

Every bound, stride and offset is a literal. The loop plan is replayed in numpy and compared
with the maps before any C is produced, so a planning bug fails the compile instead of
miscopying.
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
    """C statements copying src -> dst as the index map says: idx holds, per dst element in
    order, its src index -- or with scatter=True, per src element in order, its dst index
    (PACK writes each input into a strided slab of the output)."""
    idx = np.asarray(idx, dtype=np.int64)
    order = flat_index(idx.shape)
    return copy_nd(order if scatter else idx, idx if scatter else order, ctx, src, dst, hint)


def _dim_plan(f: np.ndarray, ctx, hint: str):
    """(stride, None) for an affine per-dim offset, else (None, flash table name)."""
    s = _affine_stride(f)
    if s is not None:
        return s, None
    itype = "uint16_t" if int(f.max()) < 65536 and int(f.min()) >= 0 else "int32_t"
    return None, ctx.const(f, itype, hint, "element offset along one dim of a copy")


def _replay(loops, run, base, side, tables) -> np.ndarray:
    """The flat indices the planned loops touch, in loop order (side 0: src, 1: dst)."""
    acc = np.array([base], dtype=np.int64)
    for lp in loops:
        n, st, tb = lp[0], lp[1 + 2 * side], lp[2 + 2 * side]
        off = tables[tb] if tb is not None else np.arange(n, dtype=np.int64) * st
        acc = (acc[:, None] + off[None, :]).reshape(-1)
    return (acc[:, None] + np.arange(run, dtype=np.int64)[None, :]).reshape(-1)


def _term(k: int, s, tbl) -> str:
    if tbl is not None:
        return f"{tbl}[i{k}]"
    if s == 1:
        return f"i{k}"
    if s:
        return f"i{k} * {s}" if s > 0 else f"- i{k} * {-s}"
    return ""


def _expr(base: int, terms: list[str]) -> str:
    e = " + ".join([str(base)] * bool(base) + [t for t in terms if t]).replace("+ -", "-") or "0"
    return "0 " + e if e.startswith("- ") else e


def copy_nd(src_idx: np.ndarray, dst_idx: np.ndarray, ctx, src: str = "in0", dst: str = "out0",
            hint: str = "idx") -> str:
    """C copying src[src_idx[i]] to dst[dst_idx[i]] for every i (both maps the same shape)."""
    src_idx = np.asarray(src_idx, dtype=np.int64)
    dst_idx = np.asarray(dst_idx, dtype=np.int64)
    assert src_idx.shape == dst_idx.shape
    if src_idx.size == 0:
        return ""
    dims = [int(d) for d in src_idx.shape if int(d) != 1]
    src_idx = src_idx.reshape(dims or [1])
    dst_idx = dst_idx.reshape(dims or [1])
    if src_idx.size == 1:
        return f"{dst}[{int(dst_idx.reshape(-1)[0])}] = {src}[{int(src_idx.reshape(-1)[0])}];\n"
    ss, ds = _separable(src_idx), _separable(dst_idx)
    if ss is None or ds is None:
        # not separable: one flat table per side, at most (never produced by the kernels here)
        n = int(src_idx.size)
        names = []
        for side, m in (("src", src_idx), ("dst", dst_idx)):
            flat = m.reshape(-1)
            if np.array_equal(flat, np.arange(n) + flat[0]):
                names.append(f"{int(flat[0])} + i" if flat[0] else "i")
            else:
                itype = "uint16_t" if int(flat.max()) < 65536 else "int32_t"
                names.append(ctx.const(flat, itype, f"{hint}_{side}_map", f"{side} index of each copied element") + "[i]")
        return _block(["int i;", f"for (i = 0; i < {n}; ++i) {{",
                       f"    {dst}[{names[1]}] = {src}[{names[0]}];", "}"])
    (sbase, sfs), (dbase, dfs) = ss, ds
    loops: list[list] = []    # [size, src stride, src table, dst stride, dst table]
    tables: dict[str, np.ndarray] = {}
    for d, (sf, df) in enumerate(zip(sfs, dfs)):
        n = len(sf)
        s_st, s_tb = _dim_plan(sf, ctx, f"{hint}_src{d}")
        d_st, d_tb = _dim_plan(df, ctx, f"{hint}_dst{d}")
        tables.update({s_tb: sf, d_tb: df})
        if loops and None not in (s_st, d_st, loops[-1][1], loops[-1][3]) \
                and loops[-1][1] == s_st * n and loops[-1][3] == d_st * n:
            loops[-1][0] *= n
            loops[-1][1], loops[-1][3] = s_st, d_st
            continue
        loops.append([n, s_st, s_tb, d_st, d_tb])
    run = 1
    if loops[-1][1] == 1 and loops[-1][3] == 1 and loops[-1][0] >= MEMCPY_MIN:
        run = loops.pop()[0]
    for side, m, base in ((0, src_idx, sbase), (1, dst_idx, dbase)):
        if not np.array_equal(_replay(loops, run, base, side, tables), m.reshape(-1)):
            raise AssertionError("copy plan does not reproduce its index map")
    if not loops:
        return (f"memcpy({dst}{' + ' + str(dbase) if dbase else ''}, "
                f"{src}{' + ' + str(sbase) if sbase else ''}, {run} * sizeof(*{dst}));\n")
    lines = [f"int {', '.join(f'i{k}' for k in range(len(loops)))};"]
    for k, (n, *_r) in enumerate(loops):
        lines.append("    " * k + f"for (i{k} = 0; i{k} < {n}; ++i{k}) {{")
    se = _expr(sbase, [_term(k, lp[1], lp[2]) for k, lp in enumerate(loops)])
    de = _expr(dbase, [_term(k, lp[3], lp[4]) for k, lp in enumerate(loops)])
    ind = "    " * len(loops)
    if run > 1:
        lines.append(ind + f"memcpy({dst} + {de}, {src} + {se}, {run} * sizeof(*{dst}));")
    else:
        lines.append(ind + f"{dst}[{de}] = {src}[{se}];")
    for k in reversed(range(len(loops))):
        lines.append("    " * k + "}")
    return _block(lines)
