"""Dynamic dimensions other than a per-sample batch (e.g. a sequence length T in [B, T, F]):
the program is compiled once, for the maximum of every dimension, and the actual sizes are
int arguments of NAME_invoke.

Every tensor is held at its maximum size. Which part of it is valid is tracked per torch node
as `factors`: per dim, a list of (maximum extent, actual extent) pairs, outermost first (the
actual extent is None when it is the maximum, else a sympy expression of the sizes). A plain
dim has one factor; a view that merges dims (`[B, T, F] -> [B*T, F]`) concatenates them, so a
row is valid when each of its mixed-radix digits is below that factor's actual extent.

Ops that treat positions independently (elementwise, matrix products with weights, per-row
ops) work on the whole maximum-size tensor, and whatever they compute past the actual sizes is
never read. An op that reads ACROSS a dynamic dim gets its input through DYN_MASK, which
replaces the elements past the actual size by the op's neutral value (0 for sums, means,
convolutions and matrix products, -inf for max and softmax, +inf for min); a mean is then
rescaled to the actual count (DYN_SCALE). That is exact: a convolution's zero padding past the
end is exactly the masked zeros. Anything else on a dynamic dim (concatenation or right padding
along it, a gather along it, ops eerie-c does not know to be safe) is a one-line error.

User inputs arrive in compact layout (the actual sizes, like a torch tensor) and are spread out
by DYN_UNPACK; outputs with a dynamic dim are gathered back by DYN_PACK.
"""
from __future__ import annotations

import re

import numpy as np

from ...errors import EerieError
from .dynamic_sizes import SymbolicSizes
from .values import Act, _flat_values, _src

# Ops that handle every position of every dim independently (or only combine positions along
# static dims: matrix products with a constant weight contract over the last dim).
POINTWISE = {
    "relu", "sigmoid", "tanh", "abs", "neg", "exp", "log", "sqrt", "rsqrt", "floor", "ceil",
    "round", "logical_not", "hardswish", "elu", "gelu", "leaky_relu", "clamp", "hardtanh", "relu6",
    "add", "sub", "mul", "div", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
    "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_not", "where",
    "pow", "reciprocal", "_assert_tensor_metadata",
    "_to_copy", "clone", "alias", "detach", "lift_fresh_copy", "contiguous", "expand",
    "full_like", "zeros_like", "ones_like", "empty_like", "_native_batch_norm_legit_no_training",
    "addmm", "linear",
}
VIEWS = {"view", "_unsafe_view", "reshape", "squeeze", "unsqueeze", "flatten"}
# reduction packet -> (fill value of the masked elements, where its dims argument is)
REDUCTIONS = {"sum": 0.0, "mean": 0.0, "amax": -np.inf, "amin": np.inf, "max": -np.inf,
              "min": np.inf, "_softmax": -np.inf, "softmax": -np.inf, "_log_softmax": -np.inf,
              "log_softmax": -np.inf}
_RESERVED = {"input", "output", "sample", "batch_input", "batch_output", "sz", "records", "in", "out",
             "n", "rc", "main", "argc", "argv", "i", "j", "k"}


class Dynamic(SymbolicSizes):
    """The dynamic sizes of one program (SymbolicSizes) and the factors of every tensor that
    has a dynamic dim."""

    def __init__(self, syms, names, ranges, batch=None):
        super().__init__(syms, names, ranges, batch)
        self.factors: dict[str, list] = {}
        self.sizes = None               # Act of the int32 sizes tensor (top graph)

    # ---- factors -------------------------------------------------------------------------

    def of(self, L, a) -> list:
        f = self.factors.get(a.tid)
        if f is not None:
            return f
        return [[(int(d), None)] for d in L.t(a).shape]

    def has(self, a) -> bool:
        return getattr(a, "tid", None) in self.factors

    def dim_expr(self, fl):
        e = 1
        for m, rt in fl:
            e = e * (m if rt is None else rt)
        return e

    def set(self, tid, factors):
        if any(rt is not None for fl in factors for _, rt in fl):
            self.factors[tid] = factors
        else:
            self.factors.pop(tid, None)

    def factors_for(self, exprs, candidates=()):
        """Factors of a new tensor from its symbolic shape: a dim equal to a dim of an input
        keeps that dim's layout; any other dynamic extent is one new factor."""
        out = []
        for e in exprs:
            if isinstance(e, int):
                out.append([(e, None)])
                continue
            found = None
            for fl in candidates:
                if (self.dim_expr(fl) - e).expand() == 0:
                    found = fl
                    break
            out.append(list(found) if found is not None else [(self.max_of(e), e)])
        return out

    def reshape(self, in_factors, exprs, what):
        flat = [f for fl in in_factors for f in fl if not (f[0] == 1 and f[1] is None)]
        out = []
        for e in exprs:
            m = self.max_of(e)
            group, prod = [], 1
            while prod < m:
                if not flat:
                    raise EerieError(f"{what}: cannot follow the dynamic dims through this reshape")
                fm, rt = flat[0]
                if m % (prod * fm) == 0:
                    group.append(flat.pop(0))
                    prod *= fm
                elif rt is None and fm % (m // prod) == 0:
                    need = m // prod
                    group.append((need, None))
                    flat[0] = (fm // need, None)
                    prod = m
                else:
                    raise EerieError(f"{what}: this reshape splits a dynamic dim; only merging a dynamic "
                                     f"dim with the dims after it (or before it) is supported")
            if group and isinstance(e, int) and any(rt is not None for _, rt in group):
                raise EerieError(f"{what}: a dynamic dim reshaped into a static one")
            if group and not isinstance(e, int) and (self.dim_expr(group) - e).expand() != 0:
                raise EerieError(f"{what}: this reshape mixes a dynamic dim with the dims before it "
                                 f"({e} is not {self.dim_expr(group)})")
            out.append(group or [(1, None)])
        if flat:
            raise EerieError(f"{what}: cannot follow the dynamic dims through this reshape")
        return out

    def levels(self, factors, dims=None, ref=lambda k: f"in1[{k}]"):
        """[extent, limit C or None] per level (consecutive always-valid levels merged), inner."""
        raw = []
        for d, fl in enumerate(factors):
            for m, rt in fl:
                lim = self.c_expr(rt, ref) if rt is not None and (dims is None or d in dims) else None
                raw.append((m, lim))
        merged = []
        for m, lim in raw:
            if lim is None and merged and merged[-1][1] is None:
                merged[-1] = (merged[-1][0] * m, None)
            else:
                merged.append((m, lim))
        inner = 1
        if merged and merged[-1][1] is None:
            inner = merged.pop()[0]
        return [[m, lim] for m, lim in merged], inner

    # ---- ops -----------------------------------------------------------------------------

    def _op(self, L, kind, x, shape, attrs):
        return L.op(kind, [x, self.sizes], shape, L.t(x).dtype, attrs)

    def mask(self, L, x, dims, fill):
        lv, inner = self.levels(self.of(L, x), dims)
        if not any(lim is not None for _, lim in lv):
            return x
        y = self._op(L, "DYN_MASK", x, L.t(x).shape, {"levels": lv, "inner": inner, "fill": float(fill)})
        self.factors[y.tid] = self.factors[x.tid]
        return y

    def unpack(self, L, x, factors):
        lv, inner = self.levels(factors)
        y = self._op(L, "DYN_UNPACK", x, L.t(x).shape, {"levels": lv, "inner": inner})
        self.set(y.tid, factors)
        return y

    def pack(self, L, x):
        lv, inner = self.levels(self.of(L, x))
        return self._op(L, "DYN_PACK", x, L.t(x).shape, {"levels": lv, "inner": inner})

    # ---- hooks around the lowering of one torch node ----------------------------------------

    def before(self, L, node, packet, args, kwargs):
        """Masks for the node's inputs; returns (args, kwargs, result or None)."""
        acts = [a for a in _flat_values((args, kwargs)) if isinstance(a, Act) and self.has(a)]
        if not acts:
            return args, kwargs, None
        where = f" ({_src(node)})" if _src(node) else ""
        what = f"{node.name} (aten.{packet})"

        def dyn_dims(a):
            return {d for d, fl in enumerate(self.of(L, a)) if any(rt is not None for _, rt in fl)}

        if packet in POINTWISE or packet in VIEWS or packet in ("permute", "sym_size"):
            return args, kwargs, None
        args = list(args)
        x = args[0] if args else None
        if packet in REDUCTIONS and isinstance(x, Act):
            rank = len(L.t(x).shape)
            dims = args[1] if len(args) > 1 else kwargs.get("dim", None)
            over = node.target.__name__.split(".")[-1]
            if packet in ("max", "min") and over == "other":
                return args, kwargs, None
            if packet in ("max", "min") and over == "default":
                dims = None
            if dims is None or dims == []:
                dims = list(range(rank))
            dims = {d % max(rank, 1) for d in ([dims] if isinstance(dims, int) else dims)}
            if dims & dyn_dims(x):
                args[0] = self.mask(L, x, dims, REDUCTIONS[packet])
                if packet == "mean":
                    L._dyn_mean = [(m, rt) for d in sorted(dims) for m, rt in self.of(L, x)[d]]
            return tuple(args), kwargs, None
        if packet == "convolution" and isinstance(x, Act):
            spatial = set(range(2, len(L.t(x).shape)))
            if dyn_dims(x) - spatial:
                raise EerieError(f"{what}: the channels of a convolution cannot be dynamic{where}")
            args[0] = self.mask(L, x, spatial, 0.0)
            return tuple(args), kwargs, None
        if packet in ("max_pool2d_with_indices", "max_pool2d", "avg_pool2d") and isinstance(x, Act):
            if dyn_dims(x) - {2, 3}:
                raise EerieError(f"{what}: pooling with a dynamic batch or channel dim{where}")
            if packet == "avg_pool2d":
                pad = args[3] if len(args) > 3 else kwargs.get("padding", 0)
                ceil = args[4] if len(args) > 4 else kwargs.get("ceil_mode", False)
                incl = args[5] if len(args) > 5 else kwargs.get("count_include_pad", True)
                if ceil or (not incl and any(p for p in ([pad] if isinstance(pad, int) else pad))):
                    raise EerieError(f"{what}: an average pool that divides by the number of elements "
                                     f"inside the input (ceil_mode, count_include_pad=False) along a "
                                     f"dynamic dim is not supported{where}")
            args[0] = self.mask(L, x, {2, 3}, -np.inf if packet.startswith("max") else 0.0)
            return tuple(args), kwargs, None
        if packet in ("mm", "bmm", "matmul") and len(args) >= 2:
            a, b = args[0], args[1]
            if isinstance(a, Act) and isinstance(b, Act):
                args[0] = self.mask(L, a, {len(L.t(a).shape) - 1}, 0.0)
                args[1] = self.mask(L, b, {len(L.t(b).shape) - 2}, 0.0)
            return tuple(args), kwargs, None
        if packet == "cat":
            dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
            for t in args[0]:
                if isinstance(t, Act) and self.has(t) and (dim % len(L.t(t).shape)) in dyn_dims(t):
                    raise EerieError(f"{what}: concatenation along a dynamic dim is not supported{where}")
            return tuple(args), kwargs, None
        if packet in ("slice", "select") and isinstance(x, Act):
            dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
            dim %= len(L.t(x).shape)
            if dim not in dyn_dims(x):
                return tuple(args), kwargs, None
            fl = self.of(L, x)[dim]
            if len(fl) != 1:
                raise EerieError(f"{what}: slicing a merged dynamic dim is not supported{where}")
            start = args[2] if len(args) > 2 else kwargs.get("start" if packet == "slice" else "index", 0)
            if packet == "slice":
                step = args[4] if len(args) > 4 else kwargs.get("step", 1)
                if start is not None and start < 0:
                    raise EerieError(f"{what}: a slice from the end of a dynamic dim (negative start) is "
                                     f"not supported; select single positions (x[:, -1]) or slice from "
                                     f"the front{where}")
                del step
                return tuple(args), kwargs, None
            if start >= 0:
                return tuple(args), kwargs, None
            return tuple(args), kwargs, self._select_from_end(L, node, x, dim, start)
        if packet == "constant_pad_nd" and isinstance(x, Act):
            pad = list(args[1])
            rank = len(L.t(x).shape)
            for k in range(len(pad) // 2):
                if (rank - 1 - k) in dyn_dims(x) and pad[2 * k + 1] != 0:
                    raise EerieError(f"{what}: padding at the end of a dynamic dim is not supported{where}")
            return tuple(args), kwargs, None
        if packet in ("index_select", "index", "gather") and isinstance(x, Act):
            dims = dyn_dims(x)
            if packet == "index":
                used = {d for d, i in enumerate(args[1]) if i is not None}
            else:
                used = {args[1] % len(L.t(x).shape)}
            if used & dims:
                raise EerieError(f"{what}: indexing along a dynamic dim is not supported{where}")
            return tuple(args), kwargs, None
        raise EerieError(f"{what} on a tensor with a dynamic dim is not supported (eerie-c runs it at "
                         f"the maximum size and cannot tell that this op is exact there){where}")

    def _select_from_end(self, L, node, x, dim, index):
        shape = L.t(x).shape
        fl = self.of(L, x)[dim]
        m, rt = fl[0]
        outer = int(np.prod(shape[:dim])) if dim else 1
        inner = int(np.prod(shape[dim + 1:])) if dim + 1 < len(shape) else 1
        start = self.c_expr((rt if rt is not None else m) + index, lambda k: f"in1[{k}]")
        y = self._op(L, "DYN_SLICE", x, tuple(shape[:dim]) + (1,) + tuple(shape[dim + 1:]),
                     {"outer": outer, "extent": m, "count": 1, "inner": inner, "start": start})
        out_shape = L.meta_shape()
        fx = [f for d, f in enumerate(self.of(L, x)) if d != dim]
        y = L.reshape(y, out_shape)
        self.set(y.tid, fx)
        return y

    def after(self, L, node, packet, args, result):
        """Factors of the node's results (and the rescale of a mean over a dynamic dim)."""
        torch = L.torch
        vals = node.meta.get("val")
        single = not isinstance(result, (list, tuple))
        results = [result] if single else list(result)
        vals = [vals] if not isinstance(vals, (list, tuple)) else list(vals)
        mean = getattr(L, "_dyn_mean", None)
        L._dyn_mean = None
        ins = [a for a in _flat_values(args) if isinstance(a, Act)]
        cands = [fl for a in ins for fl in self.of(L, a)]
        out = []
        for r, v in zip(results, vals):
            if isinstance(r, Act) and isinstance(v, torch.Tensor):
                exprs = [self.sub(d) for d in v.shape]
                if mean and packet == "mean":
                    num = int(np.prod([m for m, _ in mean]))
                    den = 1
                    for m, rt in mean:
                        den = den * (m if rt is None else rt)
                    r = L.op("DYN_SCALE", [r, self.sizes], L.t(r).shape, "float32",
                             {"num": num, "den": self.c_expr(den, lambda k: f"in1[{k}]")})
                if packet in VIEWS and ins:
                    self.set(r.tid, self.reshape(self.of(L, ins[0]), exprs, f"{node.name} (aten.{packet})"))
                elif packet == "permute" and ins:
                    perm = [p % len(exprs) for p in args[1]]
                    src = self.of(L, ins[0])
                    self.set(r.tid, [src[p] for p in perm])
                elif all(isinstance(e, int) for e in exprs):
                    if r.tid not in [a.tid for a in ins]:
                        self.factors.pop(r.tid, None)
                elif r.tid not in self.factors:
                    self.set(r.tid, self.factors_for(exprs, cands))
            out.append(r)
        if single:
            return out[0]
        return type(result)(out) if isinstance(result, tuple) else out

    # ---- the interface ---------------------------------------------------------------------

    def interface(self, L, inputs_meta, outputs_meta, batch_max, batch_range):
        """What the templates and harnesses need: the size parameters and, per input and
        output, its symbolic shape and its compact per-sample element count in C."""
        params = []
        if batch_max is not None:
            params.append({"name": "batch", "min": int(batch_range[0]), "max": int(batch_max),
                           "batch": True})
        for n, (lo, hi) in zip(self.names, self.ranges):
            params.append({"name": n, "min": int(lo), "max": int(hi), "batch": False})
        off = 1 if batch_max is not None else 0

        def io(vals):
            items = []
            for v in vals:
                full = [d if isinstance(d, int) else d.node.expr for d in v.shape]
                per = [self.sub(d) for d in v.shape]
                if batch_max is not None and per:
                    per = per[1:]
                elems = 1
                for e in per:
                    elems = elems * e
                items.append({
                    "shape": full,
                    "shape_text": "[" + ", ".join(_shape_name(self, L, e, off) for e in full) + "]",
                    "elements_c": self.c_expr(elems if not isinstance(elems, int) else int(elems),
                                              lambda k: self.names[k]),
                    "elements_h": self.c_expr(elems if not isinstance(elems, int) else int(elems),
                                              lambda k: f"sz[{k + off}]"),
                })
            return items
        return {"params": params, "inputs": io(inputs_meta), "outputs": io(outputs_meta),
                "batch_max": batch_max, "syms": ([L.batch] if batch_max is not None else []) + self.syms}


def _shape_name(dyn, L, e, off):
    if isinstance(e, int):
        return str(e)
    text = str(e)
    subs = {}
    if L.batch is not None:
        subs[str(L.batch)] = "batch"
    for s, n in zip(dyn.syms, dyn.names):
        subs[str(s)] = n
    return re.sub(r"[A-Za-z_][A-Za-z0-9_]*", lambda m: subs.get(m.group(0), m.group(0)), text)


def param_names(syms, hints: dict) -> list[str]:
    """C parameter names for the dynamic sizes: the torch.export.Dim names where known."""
    from ...names import _C_KEYWORDS
    names = []
    for k, s in enumerate(syms):
        n = re.sub(r"[^0-9A-Za-z_]", "_", hints.get(s, "") or "")
        if not n or n[0].isdigit() or n in _C_KEYWORDS or n in _RESERVED or n in names \
                or n.startswith("_") or n.upper().startswith("EERIE") \
                or re.fullmatch(r"(input|output|batch_input|batch_output)\d*", n):
            n = f"size{k}"
        names.append(n)
    return names
