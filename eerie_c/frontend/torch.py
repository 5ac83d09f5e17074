"""PyTorch frontend: an `nn.Module` or `torch.export.ExportedProgram` -> the IR.

The program is exported with `torch.export.export`, decomposed to the Core ATen opset with
`run_decompositions()`, and its FX graph walked node by node:

* parameters, buffers and lifted constants become constant tensors; any node whose inputs are
  all constants is evaluated right here with torch itself (permuted weights, `full`, `zeros`,
  arithmetic on constants), so only activations reach the IR;
* ops are lowered to the IR's TFLite op kinds, float32. PyTorch is NCHW while the IR's conv
  and pooling ops are NHWC: each such op is lowered as TRANSPOSE (NCHW -> NHWC), the op, and
  TRANSPOSE back; passes/cancel_transposes.py then removes the pairs, so a conv/relu/pool
  chain stays NHWC;
* batch norm in eval mode is folded into the weights of the convolution that feeds it (when
  the convolution has no other user), or becomes MUL + ADD with constant scale and shift;
* `torch.cond` and `torch.while_loop` become IF / WHILE ops whose branches and bodies are
  nested graphs (`Op.regions`) lowered the same way;
* a dynamic leading (batch) dimension, `torch.export.Dim("batch", max=N)` on dim 0 of every
  input, gives a per-sample graph (the batch dimension set to 1) that NAME_invoke runs once per
  sample, for `batch` samples (an extra int argument, at most N). That is exact only when no op
  mixes samples, which is checked node by node: every computed tensor has the batch symbol as
  its dim 0 and nowhere else, no op with a `dim` argument works along dim 0, and the batch
  size is used only as a shape. `Graph.dynamic_batch` (set on the graph) is N.

Nothing downstream knows the model came from PyTorch.
"""
from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from ..errors import EerieError
from ..ir import Graph, Op, Tensor

DEFAULT_MAX_ITERATIONS = 1000


def _torch():
    try:
        import torch
    except ImportError:   # pragma: no cover - torch is an optional dependency
        raise EerieError("compiling a PyTorch program needs torch (pip install torch==2.13.0)") from None
    return torch


def export_program(model, example_args=None, dynamic_shapes=None):
    """An ExportedProgram from a module (exported here) or an ExportedProgram (as is)."""
    torch = _torch()
    if isinstance(model, torch.export.ExportedProgram):
        return model
    if isinstance(model, torch.nn.Module):
        if example_args is None:
            raise EerieError("compiling an nn.Module needs example_args (a tuple of example inputs)")
        if not isinstance(example_args, tuple):
            example_args = tuple(example_args) if isinstance(example_args, list) else (example_args,)
        model = model.eval()
        try:
            return torch.export.export(model, example_args, dynamic_shapes=dynamic_shapes)
        except Exception as e:
            msg = " ".join(str(e).split())[:400]
            raise EerieError(f"torch.export could not capture {type(model).__name__}: "
                             f"{type(e).__name__}: {msg} (run `eerie_c.check(module, example_args)` "
                             f"for the lines to change)") from None
    raise EerieError(f"cannot compile a {type(model).__name__}: expected an nn.Module, an "
                     f"ExportedProgram, or a .tflite / .pt2 path")


def load_torch(model, example_args=None, name: str = "model",
               max_iterations: int = DEFAULT_MAX_ITERATIONS, dynamic_shapes=None) -> Graph:
    ep = export_program(model, example_args, dynamic_shapes)
    try:
        ep = ep.run_decompositions()
    except Exception as e:
        raise EerieError(f"torch decomposition to the Core ATen opset failed: {type(e).__name__}: "
                         f"{' '.join(str(e).split())[:300]}") from None
    names = _dim_names(ep, dynamic_shapes)
    try:
        return _Lowerer(ep, name, max_iterations, dim_names=names).run()
    except _PerSampleError as first:
        # A dynamic dim 0 that ops combine along (softmax over it, a mean over it) is not a
        # per-sample batch: compile it as any other dynamic dim (masked at the maximum size).
        try:
            return _Lowerer(ep, name, max_iterations, dim_names=names, batch_as_dim=True).run()
        except EerieError:
            raise first from None


class _PerSampleError(EerieError):
    """An op combines samples along a dynamic leading dim (see check_per_sample)."""


def _dim_names(ep, dynamic_shapes) -> dict:
    """{sympy symbol: torch.export.Dim name} from the dynamic_shapes the program was exported
    with (a .pt2 file does not keep them: parameters are then named size0, size1, ...)."""
    out = {}
    if not isinstance(dynamic_shapes, (list, tuple)):
        return out
    sig = ep.graph_signature
    users = list(sig.user_inputs)
    vals = {n.name: n.meta.get("val") for n in ep.graph_module.graph.nodes if n.op == "placeholder"}
    for k, spec in enumerate(dynamic_shapes):
        if k >= len(users) or not isinstance(spec, dict):
            continue
        val = vals.get(users[k])
        for d, dim in spec.items():
            try:
                size = val.shape[d]
            except Exception:
                continue
            if not isinstance(size, int) and getattr(size.node.expr, "is_Symbol", False):
                out.setdefault(size.node.expr, getattr(dim, "__name__", "") or "")
    return out


def load_pt2(path, name: str = "model", max_iterations: int | None = None) -> Graph:
    """A program saved with torch.export.save. max_iterations None: DEFAULT_MAX_ITERATIONS."""
    if max_iterations is None:
        max_iterations = DEFAULT_MAX_ITERATIONS
    torch = _torch()
    import logging
    quiet = logging.getLogger("torch.export")   # it logs a traceback before raising on a bad file
    level = quiet.level
    try:
        quiet.setLevel(logging.CRITICAL)
        ep = torch.export.load(str(path))
    except Exception as e:
        raise EerieError(f"{path}: not a program saved by torch.export.save ({type(e).__name__}: "
                         f"{' '.join(str(e).split())[:200]})") from None
    finally:
        quiet.setLevel(level)
    return load_torch(ep, None, name, max_iterations)


def _ir_dtype(dt) -> str:
    torch = _torch()
    table = {torch.float32: "float32", torch.float64: "float32", torch.float16: "float32",
             torch.bool: "bool", torch.int8: "int8", torch.uint8: "uint8", torch.int16: "int16",
             torch.int32: "int32", torch.int64: "int32"}
    if dt not in table:
        raise EerieError(f"tensors of type {dt} are not supported")
    return table[dt]


def _np(t, dtype: str) -> np.ndarray:
    from ..ir import DTYPE_NP
    return np.array(t.detach().cpu().numpy(), dtype=DTYPE_NP[dtype], order="C")   # keeps 0-d


class Act:
    """An activation value: an IR tensor id (shape and dtype live on the IR tensor)."""
    __slots__ = ("tid",)

    def __init__(self, tid: str):
        self.tid = tid

    def __repr__(self):
        return f"Act({self.tid})"


def _flat_values(v):
    if isinstance(v, (list, tuple)):
        for x in v:
            yield from _flat_values(x)
    elif isinstance(v, dict):
        for x in v.values():
            yield from _flat_values(x)
    else:
        yield v


def _src(node) -> str:
    st = node.meta.get("stack_trace") or ""
    lines = [ln.strip() for ln in st.strip().splitlines() if ln.strip().startswith("File ")]
    return lines[-1] if lines else ""


class _Scope:
    """One graph being built: the top-level program, or a branch / loop body region."""

    def __init__(self, name: str):
        self.g = Graph(name, {}, [], [], [])


class _Lowerer:
    def __init__(self, ep, name: str, max_iterations: int, dim_names: dict | None = None,
                 batch_as_dim: bool = False):
        self.torch = _torch()
        self.dim_names = dict(dim_names or {})
        self.batch_as_dim = batch_as_dim   # a dynamic dim 0 compiled as a masked dim, not per sample
        self.dyn = None                    # torch_dynamic.Dynamic: the program's dynamic sizes
        self.ep = ep
        self.name = name
        self.max_iterations = int(max_iterations)
        self.tensors: dict[str, Tensor] = {}     # shared by every region: ids are global
        self.counter = 0
        self.ops_made = 0
        self.scope: Graph | None = None
        self.node = None
        self.env: dict = {}
        self.folded_bn: dict = {}
        self.batch = None            # the dynamic batch symbol (sympy), if any
        self.batch_max: int | None = None

    # ---- building blocks -------------------------------------------------------------------

    def new_id(self, hint: str) -> str:
        self.counter += 1
        return f"t{self.counter}_{hint}"[:48]

    def tensor(self, shape, dtype: str, label: str = "") -> Act:
        tid = self.new_id(label or "x")
        self.tensors[tid] = Tensor(tid, tuple(int(d) for d in shape), dtype, label or tid)
        self.scope.tensors[tid] = self.tensors[tid]
        return Act(tid)

    def const(self, value, dtype: str | None = None, label: str = "const") -> str:
        torch = self.torch
        if not isinstance(value, torch.Tensor):
            value = torch.tensor(value)
        dtype = dtype or _ir_dtype(value.dtype)
        data = _np(value, dtype)
        tid = self.new_id(label)
        t = Tensor(tid, tuple(data.shape), dtype, label, data=data)
        self.tensors[tid] = t
        self.scope.tensors[tid] = t
        return tid

    def t(self, a: Act) -> Tensor:
        return self.tensors[a.tid]

    def shape(self, v) -> tuple[int, ...]:
        return self.t(v).shape if isinstance(v, Act) else tuple(v.shape)

    def op(self, kind: str, inputs, out_shape, out_dtype: str, attrs=None, label="") -> Act:
        out = self.tensor(out_shape, out_dtype, label or (self.node.name if self.node is not None else kind.lower()))
        self.ops_made += 1
        name = self.node.name if self.node is not None else kind.lower()
        src = _src(self.node) if self.node is not None else ""
        attrs = dict(attrs or {})
        if src:
            attrs["torch_source"] = src   # for messages: the user's line that made this op
        self.scope.ops.append(Op(kind, [i.tid if isinstance(i, Act) else i for i in inputs], [out.tid],
                                 attrs, name, self.ops_made))
        return out

    def act_of(self, v, like: Act | None = None) -> Act | str:
        """An operand for a binary op: activations as they are, anything else a constant id."""
        if isinstance(v, Act):
            return v
        dtype = self.t(like).dtype if like is not None else None
        if dtype == "bool":
            dtype = None
        return self.const(v if isinstance(v, self.torch.Tensor) else self.torch.tensor(v), dtype)

    def ensure_act(self, v, what: str) -> Act:
        if not isinstance(v, Act):
            raise EerieError(f"{what}: expected a tensor computed from the inputs")
        return v

    def transpose(self, x: Act, perm) -> Act:
        shape = self.t(x).shape
        return self.op("TRANSPOSE", [x, self.const(np.array(perm, np.int32), "int32", "perm")],
                       [shape[p] for p in perm], self.t(x).dtype, label=f"{self.node.name}_t")

    def reshape(self, x: Act, shape) -> Act:
        shape = tuple(int(d) for d in shape)
        if self.t(x).shape == shape:
            return x
        return self.op("RESHAPE", [x], shape, self.t(x).dtype)

    # ---- the walk -----------------------------------------------------------------------

    def run(self) -> Graph:
        ep, torch = self.ep, self.torch
        sig = ep.graph_signature
        state = dict(ep.state_dict)
        consts = dict(getattr(ep, "constants", {}) or {})
        top = Graph(self.name, {}, [], [], [])
        self.scope = self.top = top
        env: dict[Any, Any] = {}
        user_inputs = list(sig.user_inputs)
        named = {}
        named.update({k: state[v] for k, v in sig.inputs_to_parameters.items()})
        named.update({k: (state[v] if v in state else consts[v]) for k, v in sig.inputs_to_buffers.items()})
        named.update({k: consts[v] for k, v in sig.inputs_to_lifted_tensor_constants.items()})
        gm = ep.graph_module
        self._find_batch(gm, user_inputs)
        if self.dyn is not None and self.dyn.syms:
            # The actual sizes, stored by NAME_invoke for the DYN_* ops to read.
            self.dyn.sizes = self.op("DYN_SIZES", [], (len(self.dyn.syms),), "int32",
                                     {"params": list(self.dyn.names)}, label="dynamic_sizes")
        for node in gm.graph.nodes:
            if node.op != "placeholder":
                continue
            if node.name in named:
                env[node] = named[node.name].detach()
            elif node.name in user_inputs:
                val = node.meta.get("val")
                if not isinstance(val, torch.Tensor):
                    raise EerieError(f"input {node.name}: only tensor inputs are supported "
                                     f"(got {type(val).__name__})")
                self.node = node
                shape = self._static_shape(val, f"input {node.name}")
                a = self.tensor(shape, _ir_dtype(val.dtype), node.name)
                top.inputs.append(a.tid)
                env[node] = a
                if self.dyn is not None and self.dyn.syms:
                    factors = [[(int(n), None)] if isinstance(e, int) else [(int(n), e)]
                               for n, e in zip(shape, (self.dyn.sub(d) for d in val.shape))]
                    if any(rt is not None for fl in factors for _, rt in fl):
                        env[node] = self.dyn.unpack(self, a, factors)
            else:
                raise EerieError(f"unsupported program input {node.name} (not a user input, "
                                 f"parameter, buffer or constant)")
        outs = self.walk(gm, env, skip_placeholders=True)
        user_out = [s.arg.name for s in sig.output_specs if s.kind.name == "USER_OUTPUT"]
        if len(user_out) != len(outs):
            raise EerieError("programs that mutate buffers or inputs are not supported "
                             "(the program has non-user outputs)")
        if self.dyn is not None and self.dyn.factors:
            outs = [self.dyn.pack(self, o) if isinstance(o, Act) and self.dyn.has(o) else o for o in outs]
        top.outputs = self.finish_outputs(outs, top, "output")
        if self.batch is not None:
            top.dynamic_batch = self.batch_max
        if self.dyn is not None:
            out_node = next(n for n in gm.graph.nodes if n.op == "output")
            res = out_node.args[0]
            res = list(res) if isinstance(res, (list, tuple)) else [res]
            in_vals = [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder" and n.name in user_inputs]
            top.dynamic_dims = self.dyn.interface(self, in_vals, [r.meta["val"] for r in res],
                                                  self.batch_max, (0, self.batch_max))
        return top

    def _find_batch(self, gm, user_inputs):
        """The dynamic sizes: a symbol on dim 0 of every input (and nowhere else) is a per-sample
        batch (self.batch, self.batch_max); every other one a dynamic dim compiled for its
        maximum (self.dyn). A dynamic dim without a maximum is a one-line error."""
        from .torch_dynamic import Dynamic, param_names
        syms: dict = {}
        for node in gm.graph.nodes:
            if node.op != "placeholder" or node.name not in user_inputs:
                continue
            val = node.meta.get("val")
            for k, d in enumerate(getattr(val, "shape", ())):
                if isinstance(d, int):
                    continue
                expr = d.node.expr
                if not getattr(expr, "is_Symbol", False):
                    raise EerieError(f"input {node.name}: dynamic dimension {k} is {d}; only plain "
                                     f"torch.export.Dim sizes are supported (not expressions of them)")
                syms.setdefault(expr, []).append((node.name, k))
        if not syms:
            return
        ranges = {}
        for sym, where in syms.items():
            vr = self.ep.range_constraints.get(sym)
            upper, lower = getattr(vr, "upper", None), getattr(vr, "lower", 0)
            try:
                mx = int(upper)
            except Exception:
                mx = None
            if mx is None or mx >= 2 ** 31 - 1 or not getattr(upper, "is_finite", True):
                name, k = where[0]
                hint = "batch" if k == 0 else (self.dim_names.get(sym) or "seq")
                raise EerieError(f"input {name}: dynamic dimension {k} has no maximum: declare it as "
                                 f"torch.export.Dim(\"{hint}\", max=N) (eerie-c plans memory for the maximum)")
            try:
                mn = max(int(lower), 0)
            except Exception:
                mn = 0
            ranges[sym] = (mn, mx)
        batch = None
        if not self.batch_as_dim:
            for sym, where in syms.items():
                if all(k == 0 for _, k in where) and {n for n, _ in where} == set(user_inputs):
                    batch = sym
        if batch is not None:
            self.batch, self.batch_max = batch, ranges[batch][1]
        others = [s for s in syms if s != batch]
        hints = {s: self.dim_names.get(s, "") for s in others}
        self.dyn = Dynamic(others, param_names(others, hints), [ranges[s] for s in others], batch)

    def check_per_sample(self, node, result):
        """With a dynamic batch: this node must not mix samples (see the module docstring)."""
        if not self._has_act(result):
            return
        torch = self.torch
        vals = node.meta.get("val")
        vals = vals if isinstance(vals, (list, tuple)) else [vals]
        where = f" ({_src(node)})" if _src(node) else ""
        for v in vals:
            if not isinstance(v, torch.Tensor):
                continue
            shape = list(v.shape)
            ok = bool(shape) and not isinstance(shape[0], int) and self._batch_outermost(shape[0].node.expr) \
                and all(isinstance(d, int) or self.batch not in d.node.expr.free_symbols for d in shape[1:])
            if not ok:
                raise _PerSampleError(f"{node.name} (aten.{getattr(node.target, '__name__', node.target)}) gives shape "
                                 f"{[str(d) for d in shape]}: with a dynamic batch every computed tensor must "
                                 f"keep the batch as its dim 0 (ops must not combine samples){where}")
        packet = getattr(node.target, "__name__", "").split(".")[0]
        if packet in _DIM_OPS:
            dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
            dims = dim if isinstance(dim, (list, tuple)) else [dim]
            rank = len(vals[0].shape) if isinstance(vals[0], torch.Tensor) else 1
            if any(isinstance(d, int) and d % max(rank, 1) == 0 for d in dims):
                raise _PerSampleError(f"{node.name}: aten.{packet} along dim 0, the dynamic batch dimension, "
                                 f"combines samples, which is not supported{where}")

    def _batch_outermost(self, expr) -> bool:
        """dim 0 is the batch, or the batch merged with later dims by a view (batch * T)."""
        if expr == self.batch:
            return True
        if not getattr(expr, "is_Mul", False):
            return False
        rest = [a for a in expr.args if a != self.batch]
        return len(rest) == len(expr.args) - 1 and all(self.batch not in a.free_symbols for a in rest)

    def _static_shape(self, val, what: str) -> tuple[int, ...]:
        shape = []
        for d in val.shape:
            if not isinstance(d, int) and self.batch is not None and d.node.expr == self.batch:
                d = 1   # the per-sample graph
            elif not isinstance(d, int) and self.dyn is not None:
                d = self.dyn.max_of(self.dyn.sub(d))   # compiled for the maximum
            if not isinstance(d, int):
                try:
                    d = int(d)
                except Exception:
                    raise EerieError(f"{what}: dynamic dimension {d} is not supported yet "
                                     f"(export with static shapes)") from None
            shape.append(d)
        return tuple(shape)

    def finish_outputs(self, outs, g: Graph, what: str) -> list[str]:
        """Tensor ids for a graph's outputs: a fresh tensor (a copy) where an output is a
        constant, an input of the graph, or repeats another output."""
        ids = []
        for k, v in enumerate(outs):
            if not isinstance(v, Act):
                if isinstance(v, self.torch.Tensor):
                    # A constant result: materialise it with an op so it has storage to return.
                    c = self.const(v, None, f"{what}{k}_value")
                    z = self.const(self.torch.zeros_like(v), None, "zero")
                    t = self.tensors[c]
                    if t.dtype != "float32":
                        raise EerieError(f"{what} {k} is a constant {t.dtype} tensor; only "
                                         f"float32 constant results are supported")
                    v = self.op("ADD", [c, z], t.shape, t.dtype, {"fused_activation_function": "NONE"},
                                label=f"{what}{k}")
                else:
                    raise EerieError(f"{what} {k} is a {type(v).__name__}, not a tensor")
            if v.tid in g.inputs or v.tid in ids:
                v = self.op("RESHAPE", [v], self.t(v).shape, self.t(v).dtype, label=f"{what}{k}")
            ids.append(v.tid)
        return ids

    def walk(self, gm, env, skip_placeholders=False):
        prev, self.env = self.env, env
        try:
            return self._walk(gm, env, skip_placeholders)
        finally:
            self.env = prev

    def _walk(self, gm, env, skip_placeholders):
        for node in gm.graph.nodes:
            self.node = node
            if node.op == "placeholder":
                if not skip_placeholders and node not in env:
                    raise EerieError(f"region input {node.name} is unbound")
                continue
            if node.op == "get_attr":
                env[node] = getattr(gm, node.target)
                continue
            if node.op == "output":
                res = node.args[0]
                res = list(res) if isinstance(res, (list, tuple)) else [res]
                return [self.value(a, env) for a in res]
            if node.op != "call_function":
                raise EerieError(f"unsupported FX node {node.op} {node.target}")
            args = self.value(node.args, env)
            kwargs = self.value(dict(node.kwargs), env)
            env[node] = self.call(node, args, kwargs, env)
        raise EerieError("the program has no output")

    def value(self, a, env):
        fx = self.torch.fx
        if isinstance(a, fx.Node):
            return env[a]
        if isinstance(a, (list, tuple)):
            return type(a)(self.value(x, env) for x in a)
        if isinstance(a, dict):
            return {k: self.value(v, env) for k, v in a.items()}
        return a

    def _has_act(self, v) -> bool:
        if isinstance(v, Act):
            return True
        if isinstance(v, (list, tuple)):
            return any(self._has_act(x) for x in v)
        if isinstance(v, dict):
            return any(self._has_act(x) for x in v.values())
        return False

    def call(self, node, args, kwargs, env):
        target = node.target
        torch = self.torch
        if target is operator.getitem:
            return args[0][args[1]]
        if isinstance(target, torch._ops.HigherOrderOperator):
            from .torch_control import lower_higher_order
            if self.dyn is not None and any(isinstance(a, Act) and self.dyn.has(a)
                                            for a in _flat_values((args, kwargs))):
                raise EerieError(f"{node.name}: torch.cond / torch.while_loop on tensors with a dynamic "
                                 f"dim (other than a per-sample batch) is not supported"
                                 f"{' (' + _src(node) + ')' if _src(node) else ''}")
            return lower_higher_order(self, node, args, kwargs, env)
        if not self._has_act((args, kwargs)):
            # Everything is known at compile time: let torch compute it.
            try:
                with torch.no_grad():
                    return target(*args, **kwargs)
            except Exception as e:
                raise EerieError(f"evaluating {node.name} ({target}) at compile time failed: {e}") from None
        key = getattr(target, "__name__", str(target))   # e.g. "convolution.default"
        packet = key.split(".")[0]
        fn = LOWERINGS.get(key) or LOWERINGS.get(packet)
        if fn is None:
            raise EerieError(f"unsupported PyTorch op aten.{key} at node {node.name}"
                             f"{' (' + _src(node) + ')' if _src(node) else ''}")
        early = None
        if self.dyn is not None and self.dyn.factors:
            args, kwargs, early = self.dyn.before(self, node, packet, args, kwargs)
        result = early if early is not None else fn(self, node, *args, **kwargs)
        if self.dyn is not None and self.dyn.factors:
            result = self.dyn.after(self, node, packet, args, result)
        if self.batch is not None:
            self.check_per_sample(node, result)
        return result

    def meta_shape(self, node=None) -> tuple[int, ...]:
        node = node or self.node
        val = node.meta["val"]
        if isinstance(val, (list, tuple)):
            val = val[0]
        return self._static_shape(val, node.name)

    def meta_dtype(self, node=None) -> str:
        node = node or self.node
        val = node.meta["val"]
        if isinstance(val, (list, tuple)):
            val = val[0]
        return _ir_dtype(val.dtype)


# ---- lowerings: one function per ATen op (packet name or overload name) ------------------------

LOWERINGS: dict[str, Any] = {}


def lowers(*names):
    def reg(fn):
        for n in names:
            LOWERINGS[n] = fn
        return fn
    return reg


def _pairs(v, n=2):
    if isinstance(v, int):
        return [v] * n
    v = list(v)
    return v * n if len(v) == 1 else v


def _same_padding_matches(size, k, s, d, p) -> bool:
    """True when torch's symmetric padding p gives exactly TFLite's SAME windows."""
    torch_out = (size + 2 * p - d * (k - 1) - 1) // s + 1
    same_out = (size + s - 1) // s
    total = max((same_out - 1) * s + (k - 1) * d + 1 - size, 0)
    return torch_out == same_out and total // 2 == p


def _geometry(L: _Lowerer, x: Act, k, s, d, p, what: str, allow_pad_op=True, pad_value=None):
    """(input to the NHWC op, padding 'SAME'/'VALID'): an explicit PAD where torch's padding is
    not TFLite's SAME."""
    _, h, w, _ = L.t(x).shape
    if p == [0, 0]:
        return x, "VALID"
    if all(_same_padding_matches(n, kk, ss, dd, pp) for n, kk, ss, dd, pp in zip((h, w), k, s, d, p)):
        return x, "SAME"
    if not allow_pad_op:
        raise EerieError(f"{what}: padding {p} with kernel {k}, stride {s} has no TFLite equivalent")
    pads = np.array([[0, 0], [p[0], p[0]], [p[1], p[1]], [0, 0]], np.int32)
    n, h, w, c = L.t(x).shape
    ins = [x, L.const(pads, "int32", "paddings")]
    kind = "PAD"
    if pad_value is not None:
        kind = "PADV2"
        ins.append(L.const(np.array(pad_value, np.float32), "float32", "pad_value"))
    return L.op(kind, ins, (n, h + 2 * p[0], w + 2 * p[1], c), L.t(x).dtype), "VALID"


def _nchw_in(L: _Lowerer, x: Act, what: str) -> Act:
    if len(L.t(x).shape) != 4:
        raise EerieError(f"{what}: expected a 4-D NCHW tensor, got {list(L.t(x).shape)}")
    return L.transpose(x, [0, 2, 3, 1])


def _nchw_out(L: _Lowerer, y: Act) -> Act:
    return L.transpose(y, [0, 3, 1, 2])


def _bn_fold_for(L: _Lowerer, node):
    """(scale, shift) when the only user of `node` is an eval-mode batch norm, else None."""
    users = list(node.users)
    if len(users) != 1:
        return None
    bn = users[0]
    if getattr(bn.target, "__name__", "") != "_native_batch_norm_legit_no_training.default" \
            or bn.args[0] is not node:
        return None
    return bn


def _bn_params(L: _Lowerer, weight, bias, mean, var, eps):
    torch = L.torch
    for v in (weight, bias, mean, var):
        if isinstance(v, Act):
            raise EerieError("batch norm with computed (non-constant) statistics is not supported")
    c = mean.shape[0]
    w = weight if weight is not None else torch.ones(c)
    b = bias if bias is not None else torch.zeros(c)
    scale = w.double() / torch.sqrt(var.double() + eps)
    shift = b.double() - mean.double() * scale
    return scale, shift


@lowers("convolution.default")
def _conv(L: _Lowerer, node, x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    torch = L.torch
    what = f"convolution {node.name}"
    x = L.ensure_act(x, what)
    if isinstance(w, Act) or isinstance(b, Act):
        raise EerieError(f"{what}: weights and bias must be constants (parameters)")
    if transposed:
        return _conv_transpose(L, node, x, w, b, stride, padding, dilation, output_padding, groups)
    rank = len(L.t(x).shape)
    one_d = rank == 3
    if one_d:   # conv1d: a conv2d over a height of one
        n, c, length = L.t(x).shape
        x = L.reshape(x, (n, c, 1, length))
        w = w.unsqueeze(2)
        stride, padding, dilation = [1, stride[0]], [0, padding[0]], [1, dilation[0]]
    elif rank != 4:
        raise EerieError(f"{what}: {rank - 2}-D convolution is not supported")
    w = w.detach().double()
    b = b.detach().double() if b is not None else None
    bn = _bn_fold_for(L, node)
    if bn is not None:
        scale, shift = _bn_params(L, *[L._bn_arg(bn, i) for i in (1, 2, 3, 4)], bn.args[6])
        w = w * scale.reshape(-1, 1, 1, 1)
        b = (b if b is not None else torch.zeros(w.shape[0], dtype=torch.float64)) * scale + shift
        L.folded_bn[bn] = True
    k = list(w.shape[2:])
    s, d, p = _pairs(stride), _pairs(dilation), _pairs(padding)
    xn = _nchw_in(L, x, what)
    out_c, in_per_group = w.shape[0], w.shape[1]
    in_c = L.t(x).shape[1]
    xin, pad = _geometry(L, xn, k, s, d, p, what)
    n = L.t(xin).shape[0]
    oshape = L.meta_shape()
    if one_d:
        oshape = (oshape[0], oshape[1], 1, oshape[2])
    nhwc = (n, oshape[2], oshape[3], out_c)
    attrs = {"padding": pad, "stride_h": s[0], "stride_w": s[1], "dilation_h_factor": d[0],
             "dilation_w_factor": d[1], "fused_activation_function": "NONE"}

    def conv(xi, wi, bi, kind, extra=None):
        ins = [xi, L.const(wi.float(), "float32", "weights")]
        ins.append(L.const(bi.float(), "float32", "bias") if bi is not None else None)
        return L.op(kind, ins, (n, nhwc[1], nhwc[2], wi.shape[-1] if kind == "DEPTHWISE_CONV_2D" else wi.shape[0]),
                    "float32", {**attrs, **(extra or {})})

    if groups == 1:
        y = conv(xin, w.permute(0, 2, 3, 1).contiguous(), b, "CONV_2D")
    elif groups == in_c and in_per_group == 1:
        y = conv(xin, w.permute(1, 2, 3, 0).contiguous(), b, "DEPTHWISE_CONV_2D",
                 {"depth_multiplier": out_c // in_c})
    else:
        # Grouped: one CONV_2D per group on a channel slice, then concatenated.
        parts = []
        og = out_c // groups
        _, h, wd, _ = L.t(xin).shape
        for gi in range(groups):
            xs = _slice_op(L, xin, 3, gi * in_per_group, (gi + 1) * in_per_group, 1)
            wi = w[gi * og:(gi + 1) * og].permute(0, 2, 3, 1).contiguous()
            bi = b[gi * og:(gi + 1) * og] if b is not None else None
            parts.append(conv(xs, wi, bi, "CONV_2D"))
        y = L.op("CONCATENATION", parts, nhwc, "float32", {"axis": 3, "fused_activation_function": "NONE"})
    y = _nchw_out(L, y)
    if one_d:
        y = L.reshape(y, L.meta_shape())
    return y


def _conv_transpose(L: _Lowerer, node, x, w, b, stride, padding, dilation, output_padding, groups):
    """conv_transpose1d/2d, float32: TRANSPOSE_CONV with VALID padding onto the full output
    ((in - 1) * stride + k), then the rows and columns torch's padding removes are sliced off
    (output_padding keeps up to `padding` more at the end)."""
    what = f"transposed convolution {node.name}"
    rank = len(L.t(x).shape)
    one_d = rank == 3
    if one_d:
        n, c, length = L.t(x).shape
        x = L.reshape(x, (n, c, 1, length))
        w = w.unsqueeze(2)
        stride, padding, dilation = [1, stride[0]], [0, padding[0]], [1, dilation[0]]
        output_padding = [0, output_padding[0]]
    elif rank != 4:
        raise EerieError(f"{what}: {rank - 2}-D transposed convolution is not supported")
    s, p, d = _pairs(stride), _pairs(padding), _pairs(dilation)
    if d != [1, 1] or groups != 1:
        raise EerieError(f"{what}: dilated or grouped transposed convolution is not supported")
    w = w.detach().float()                      # [in_c, out_c, kh, kw]
    out_c, kh, kw = w.shape[1], w.shape[2], w.shape[3]
    xn = _nchw_in(L, x, what)
    n, h, wd, _ = L.t(xn).shape
    full = ((h - 1) * s[0] + kh, (wd - 1) * s[1] + kw)
    oshape = L.meta_shape()
    if one_d:
        oshape = (oshape[0], oshape[1], 1, oshape[2])
    oh, ow = oshape[2], oshape[3]
    if p[0] + oh > full[0] or p[1] + ow > full[1]:
        raise EerieError(f"{what}: output_padding larger than padding is not supported")
    ins = [L.const(np.array([n, full[0], full[1], out_c], np.int32), "int32", "output_shape"),
           L.const(w.permute(1, 2, 3, 0).contiguous(), "float32", "weights"), xn,
           L.const(b.detach().float(), "float32", "bias") if b is not None else None]
    y = L.op("TRANSPOSE_CONV", ins, (n, full[0], full[1], out_c), "float32",
             {"padding": "VALID", "stride_h": s[0], "stride_w": s[1], "fused_activation_function": "NONE"})
    y = _slice_op(L, y, 1, p[0], p[0] + oh, 1)
    y = _slice_op(L, y, 2, p[1], p[1] + ow, 1)
    y = _nchw_out(L, y)
    return L.reshape(y, L.meta_shape()) if one_d else y


@lowers("_native_batch_norm_legit_no_training.default")
def _batch_norm(L: _Lowerer, node, x, weight, bias, mean, var, momentum, eps):
    if L.folded_bn.get(node):
        return (x, None, None)
    x = L.ensure_act(x, f"batch norm {node.name}")
    scale, shift = _bn_params(L, weight, bias, mean, var, eps)
    rank = len(L.t(x).shape)
    bshape = (-1,) + (1,) * (rank - 2)
    shp = L.t(x).shape
    y = L.op("MUL", [x, L.const(scale.float().reshape(bshape), "float32", "bn_scale")], shp, "float32",
             {"fused_activation_function": "NONE"})
    y = L.op("ADD", [y, L.const(shift.float().reshape(bshape), "float32", "bn_shift")], shp, "float32",
             {"fused_activation_function": "NONE"})
    return (y, None, None)


def _unary(kind, attrs=None):
    def fn(L: _Lowerer, node, x, *rest, **kw):
        x = L.ensure_act(x, node.name)
        return L.op(kind, [x], L.t(x).shape, L.meta_dtype(), attrs)
    return fn


for _name, _kind in [("relu", "RELU"), ("sigmoid", "LOGISTIC"), ("tanh", "TANH"), ("abs", "ABS"),
                     ("neg", "NEG"), ("exp", "EXP"), ("log", "LOG"), ("sqrt", "SQRT"),
                     ("rsqrt", "RSQRT"), ("floor", "FLOOR"), ("ceil", "CEIL"), ("round", "ROUND"),
                     ("logical_not", "LOGICAL_NOT"), ("hardswish", "HARD_SWISH"), ("elu", "ELU")]:
    LOWERINGS[_name] = _unary(_kind)


@lowers("gelu")
def _gelu(L, node, x, approximate="none"):
    x = L.ensure_act(x, node.name)
    return L.op("GELU", [x], L.t(x).shape, "float32", {"approximate": approximate == "tanh"})


@lowers("leaky_relu")
def _leaky(L, node, x, slope=0.01):
    x = L.ensure_act(x, node.name)
    return L.op("LEAKY_RELU", [x], L.t(x).shape, "float32", {"alpha": float(slope)})


def _clamp_ops(L, x, lo, hi):
    shape, dt = L.t(x).shape, L.t(x).dtype
    if dt == "float32" and lo is not None and hi is not None and float(lo) == 0.0 and float(hi) == 6.0:
        return L.op("RELU6", [x], shape, dt)
    if dt == "float32" and lo is not None and hi is not None and float(lo) == -1.0 and float(hi) == 1.0:
        return L.op("RELU_N1_TO_1", [x], shape, dt)
    if dt == "float32" and lo is not None and float(lo) == 0.0 and hi is None:
        return L.op("RELU", [x], shape, dt)
    if lo is not None:
        x = L.op("MAXIMUM", [x, L.act_of(lo, x)], shape, dt)
    if hi is not None:
        x = L.op("MINIMUM", [x, L.act_of(hi, x)], shape, dt)
    return x


@lowers("clamp")
def _clamp(L, node, x, min=None, max=None):
    x = L.ensure_act(x, node.name)
    if isinstance(min, Act) or isinstance(max, Act):
        y = x
        if min is not None:
            y = L.op("MAXIMUM", [y, L.act_of(min, x)], L.meta_shape(), L.t(x).dtype)
        if max is not None:
            y = L.op("MINIMUM", [y, L.act_of(max, x)], L.meta_shape(), L.t(x).dtype)
        return y
    return _clamp_ops(L, x, min, max)


@lowers("hardtanh")
def _hardtanh(L, node, x, lo=-1.0, hi=1.0):
    return _clamp_ops(L, L.ensure_act(x, node.name), lo, hi)


@lowers("relu6")
def _relu6(L, node, x):
    return _clamp_ops(L, L.ensure_act(x, node.name), 0.0, 6.0)


def _binary(kind):
    def fn(L: _Lowerer, node, a, b, alpha=1, **kw):
        like = a if isinstance(a, Act) else b
        if alpha != 1:
            if isinstance(b, Act):
                b = L.op("MUL", [b, L.act_of(alpha, b)], L.t(b).shape, L.t(b).dtype,
                         {"fused_activation_function": "NONE"})
            else:
                b = b * alpha
        if kind == "DIV" and not isinstance(b, Act) and L.t(like).dtype == "float32":
            rounding = kw.get("rounding_mode")
            if rounding is None:
                # Division by a constant: multiply by its float32 reciprocal (within an ulp).
                return L.op("MUL", [a, L.act_of(1.0 / L.torch.as_tensor(b, dtype=L.torch.float64), like)],
                            L.meta_shape(), "float32", {"fused_activation_function": "NONE"})
        if kw.get("rounding_mode") is not None:
            raise EerieError(f"{node.name}: division with rounding_mode is not supported")
        dt = L.meta_dtype()
        ops = [L.act_of(a, like), L.act_of(b, like)]
        for o in ops:
            t = L.tensors[o.tid if isinstance(o, Act) else o]
            if t.dtype != dt:
                raise EerieError(f"{node.name}: mixed operand types ({t.dtype} with a {dt} result) "
                                 f"are not supported")
        return L.op(kind, ops, L.meta_shape(), dt, {"fused_activation_function": "NONE"})
    return fn


for _name, _kind in [("add", "ADD"), ("sub", "SUB"), ("mul", "MUL"), ("div", "DIV"),
                     ("maximum", "MAXIMUM"), ("minimum", "MINIMUM")]:
    LOWERINGS[_name] = _binary(_kind)


def _compare(kind):
    def fn(L: _Lowerer, node, a, b):
        like = a if isinstance(a, Act) else b
        return L.op(kind, [L.act_of(a, like), L.act_of(b, like)], L.meta_shape(), "bool")
    return fn


for _name, _kind in [("eq", "EQUAL"), ("ne", "NOT_EQUAL"), ("lt", "LESS"), ("le", "LESS_EQUAL"),
                     ("gt", "GREATER"), ("ge", "GREATER_EQUAL"), ("logical_and", "LOGICAL_AND"),
                     ("logical_or", "LOGICAL_OR")]:
    LOWERINGS[_name] = _compare(_kind)


def _bitwise(kind):
    def fn(L: _Lowerer, node, a, b):
        if L.meta_dtype() != "bool":
            raise EerieError(f"{node.name}: bitwise ops on integers are not supported (on bools they are)")
        return _compare(kind)(L, node, a, b)
    return fn


LOWERINGS["bitwise_and"] = _bitwise("LOGICAL_AND")
LOWERINGS["bitwise_or"] = _bitwise("LOGICAL_OR")
LOWERINGS["bitwise_not"] = _unary("LOGICAL_NOT")


@lowers("where")
def _where(L, node, c, a, b):
    like = a if isinstance(a, Act) else b if isinstance(b, Act) else None
    dt = L.meta_dtype()
    ops = []
    for v in (a, b):
        ops.append(v if isinstance(v, Act) else L.const(v if isinstance(v, L.torch.Tensor) else L.torch.tensor(v), dt))
    if not isinstance(c, Act):
        c = L.const(c, "bool")
    del like
    return L.op("SELECT_V2", [c, *ops], L.meta_shape(), dt)


@lowers("pow")
def _pow(L, node, x, e):
    if isinstance(x, Act) and not isinstance(e, Act):
        e = float(e)
        if e == 2.0:
            return L.op("SQUARE", [x], L.t(x).shape, "float32")
        if e == 1.0:
            return x
        if e == 0.5:
            return L.op("SQRT", [x], L.t(x).shape, "float32")
        if e == -0.5:
            return L.op("RSQRT", [x], L.t(x).shape, "float32")
        if e == 3.0:
            sq = L.op("SQUARE", [x], L.t(x).shape, "float32")
            return L.op("MUL", [sq, x], L.t(x).shape, "float32", {"fused_activation_function": "NONE"})
        if e == -1.0:
            one = L.const(np.array(1.0, np.float32), "float32", "one")
            return L.op("DIV", [one, x], L.t(x).shape, "float32", {"fused_activation_function": "NONE"})
    raise EerieError(f"{node.name}: pow with exponent {e} is not supported (2, 3, 0.5, -0.5, -1 are)")


@lowers("_to_copy")
def _to_copy(L, node, x, dtype=None, **kw):
    dt = L.meta_dtype()
    if dt == L.t(x).dtype:
        return x
    return L.op("CAST", [x], L.t(x).shape, dt)


@lowers("clone", "alias", "detach", "lift_fresh_copy", "contiguous")
def _identity(L, node, x, *rest, **kw):
    return x


@lowers("view", "_unsafe_view", "reshape", "squeeze", "unsqueeze", "flatten")
def _view(L, node, x, *rest, **kw):
    return L.reshape(L.ensure_act(x, node.name), L.meta_shape())


@lowers("expand")
def _expand(L, node, x, size, **kw):
    x = L.ensure_act(x, node.name)
    shape = L.meta_shape()
    if L.t(x).size == int(np.prod(shape)):
        return L.reshape(x, shape)
    # Broadcast by adding zeros of the target shape (the elementwise kernel broadcasts).
    zero = L.const(np.zeros(shape, np.float32), "float32", "zeros") if L.t(x).dtype == "float32" else None
    if zero is None:
        raise EerieError(f"{node.name}: expand of a {L.t(x).dtype} tensor is not supported")
    return L.op("ADD", [x, zero], shape, "float32", {"fused_activation_function": "NONE"})


@lowers("permute")
def _permute(L, node, x, dims):
    x = L.ensure_act(x, node.name)
    rank = len(L.t(x).shape)
    perm = [d % rank for d in dims] if rank else []
    if perm == list(range(rank)):
        return x
    return L.transpose(x, perm)


@lowers("cat")
def _cat(L, node, tensors, dim=0):
    dt = L.meta_dtype()
    shape = L.meta_shape()
    ins = [t if isinstance(t, Act) else L.const(t, dt) for t in tensors if int(np.prod(L.shape(t))) > 0]
    rank = len(shape)
    return L.op("CONCATENATION", ins, shape, dt, {"axis": dim % rank, "fused_activation_function": "NONE"})


def _slice_op(L, x: Act, dim: int, start: int, end: int, step: int) -> Act:
    shape = list(L.t(x).shape)
    rank = len(shape)
    dim %= rank
    n = shape[dim]
    start, end = max(0, min(n, start + n if start < 0 else start)), max(0, min(n, end + n if end < 0 else end))
    begin, stop, strides = [0] * rank, list(shape), [1] * rank
    begin[dim], stop[dim], strides[dim] = start, end, step
    out = list(shape)
    out[dim] = max(0, (end - start + step - 1) // step)
    if out == shape:
        return x
    return L.op("STRIDED_SLICE", [x, L.const(np.array(begin, np.int32), "int32", "begin"),
                                  L.const(np.array(stop, np.int32), "int32", "end"),
                                  L.const(np.array(strides, np.int32), "int32", "strides")],
                out, L.t(x).dtype, {"begin_mask": 0, "end_mask": 0, "shrink_axis_mask": 0,
                                    "ellipsis_mask": 0, "new_axis_mask": 0})


@lowers("slice")
def _slice(L, node, x, dim=0, start=None, end=None, step=1):
    x = L.ensure_act(x, node.name)
    n = L.t(x).shape[dim]
    start = 0 if start is None else start
    end = n if end is None or end > n else end
    return _slice_op(L, x, dim, start, end, step)


@lowers("select")
def _select(L, node, x, dim, index):
    x = L.ensure_act(x, node.name)
    n = L.t(x).shape[dim]
    index = index + n if index < 0 else index
    y = _slice_op(L, x, dim, index, index + 1, 1)
    return L.reshape(y, L.meta_shape())


@lowers("split_with_sizes", "split")
def _split(L, node, x, sizes, dim=0):
    x = L.ensure_act(x, node.name)
    n = L.t(x).shape[dim]
    if isinstance(sizes, int):
        sizes = [min(sizes, n - k) for k in range(0, n, sizes)]
    outs, pos = [], 0
    for s in sizes:
        outs.append(_slice_op(L, x, dim, pos, pos + s, 1))
        pos += s
    return outs


@lowers("constant_pad_nd")
def _pad(L, node, x, pad, value=0.0):
    x = L.ensure_act(x, node.name)
    rank = len(L.t(x).shape)
    pads = np.zeros((rank, 2), np.int32)
    for k in range(len(pad) // 2):
        pads[rank - 1 - k] = [pad[2 * k], pad[2 * k + 1]]
    if (pads < 0).any():
        raise EerieError(f"{node.name}: negative padding (cropping) is not supported")
    ins = [x, L.const(pads, "int32", "paddings")]
    kind = "PAD"
    if float(value) != 0.0:
        kind = "PADV2"
        ins.append(L.const(np.array(value, np.float32), "float32", "pad_value"))
    return L.op(kind, ins, L.meta_shape(), L.t(x).dtype)


@lowers("addmm", "mm", "linear")
def _matmul(L, node, *args, **kw):
    torch = L.torch
    key = node.target.__name__.split(".")[0]
    if key == "addmm":
        bias, x, w = args[:3]
        if kw.get("beta", 1) != 1 or kw.get("alpha", 1) != 1:
            raise EerieError(f"{node.name}: addmm with alpha/beta is not supported")
        wt = None if isinstance(w, Act) else w.T
    elif key == "mm":
        x, w = args
        bias = None
        wt = None if isinstance(w, Act) else w.T
    else:
        x, w = args[:2]
        bias = args[2] if len(args) > 2 else None
        wt = None if isinstance(w, Act) else w
    if not isinstance(x, Act) or wt is None or isinstance(bias, Act):
        # A product of two computed tensors (or a constant on the left): BATCH_MATMUL.
        y = _batch_matmul(L, node, x, w, adj_y=key == "linear")
        if bias is not None:
            y = L.op("ADD", [y, L.act_of(bias, y)], L.meta_shape(), "float32",
                     {"fused_activation_function": "NONE"})
        return y
    wt = wt.detach().double()
    units = wt.shape[0]
    b = None
    if bias is not None:
        b = torch.broadcast_to(bias.detach().double(), (units,)) if bias.dim() <= 1 else None
        if b is None:
            raise EerieError(f"{node.name}: a bias that varies per row is not supported")
    bn = _bn_fold_for(L, node)
    if bn is not None and len(L.meta_shape()) == 2:
        scale, shift = _bn_params(L, *[L._bn_arg(bn, i) for i in (1, 2, 3, 4)], bn.args[6])
        wt = wt * scale.reshape(-1, 1)
        b = (b if b is not None else torch.zeros(units, dtype=torch.float64)) * scale + shift
        L.folded_bn[bn] = True
    ins = [x, L.const(wt.float().contiguous(), "float32", "weights"),
           L.const(b.float(), "float32", "bias") if b is not None else None]
    return L.op("FULLY_CONNECTED", ins, L.meta_shape(), "float32",
                {"fused_activation_function": "NONE", "keep_num_dims": len(L.meta_shape()) > 2})


def _batch_matmul(L, node, a, b, adj_y=False):
    """a @ b (b transposed in its last two dims when adj_y) as a float32 BATCH_MATMUL; either
    operand may be a constant."""
    if any(isinstance(v, Act) and L.t(v).dtype != "float32" for v in (a, b)):
        raise EerieError(f"{node.name}: matrix products are supported for float32 only")
    if len(L.shape(a)) < 2 or len(L.shape(b)) < 2:
        raise EerieError(f"{node.name}: matrix products of vectors (1-D operands) are not supported")
    ins = [a if isinstance(a, Act) else L.const(a.detach().float().contiguous(), "float32", "lhs"),
           b if isinstance(b, Act) else L.const(b.detach().float().contiguous(), "float32", "rhs")]
    return L.op("BATCH_MATMUL", ins, L.meta_shape(), "float32", {"adj_x": False, "adj_y": bool(adj_y)})


@lowers("bmm")
def _bmm(L, node, a, b):
    return _batch_matmul(L, node, a, b)


def _reduce_axes(L, x, dims):
    rank = len(L.t(x).shape)
    if dims is None or dims == []:
        return list(range(rank))
    dims = [dims] if isinstance(dims, int) else list(dims)
    return sorted({d % rank for d in dims})


@lowers("mean")
def _mean(L, node, x, dims=None, keepdim=False, **kw):
    x = L.ensure_act(x, node.name)
    axes = _reduce_axes(L, x, dims)
    return L.op("MEAN", [x, L.const(np.array(axes, np.int32), "int32", "axes")], L.meta_shape(),
                "float32", {"keep_dims": bool(keepdim)})


@lowers("sum")
def _sum(L, node, x, dims=None, keepdim=False, **kw):
    x = L.ensure_act(x, node.name)
    axes = _reduce_axes(L, x, dims)
    if "SUM" in _registry():
        return L.op("SUM", [x, L.const(np.array(axes, np.int32), "int32", "axes")], L.meta_shape(),
                    "float32", {"keep_dims": bool(keepdim)})
    count = int(np.prod([L.t(x).shape[a] for a in axes]))
    m = L.op("MEAN", [x, L.const(np.array(axes, np.int32), "int32", "axes")], L.meta_shape(),
             "float32", {"keep_dims": bool(keepdim)})
    return L.op("MUL", [m, L.const(np.array(float(count), np.float32), "float32", "count")],
                L.meta_shape(), "float32", {"fused_activation_function": "NONE"})


def _registry():
    from ..kernels import load_all
    return load_all()


@lowers("amax", "amin")
def _amax(L, node, x, dims=None, keepdim=False):
    x = L.ensure_act(x, node.name)
    kind = "REDUCE_MAX" if node.target.__name__.startswith("amax") else "REDUCE_MIN"
    axes = _reduce_axes(L, x, dims)
    return L.op(kind, [x, L.const(np.array(axes, np.int32), "int32", "axes")], L.meta_shape(),
                L.t(x).dtype, {"keep_dims": bool(keepdim)})


def _softmax_like(L, node, x, dim, log):
    x = L.ensure_act(x, node.name)
    rank = len(L.t(x).shape)
    dim %= max(rank, 1)
    perm = list(range(rank))
    if rank and dim != rank - 1:
        perm[dim], perm[-1] = perm[-1], perm[dim]
        x = L.transpose(x, perm)
    y = L.op("SOFTMAX", [x], L.t(x).shape, "float32", {"beta": 1.0})
    if log:
        y = L.op("LOG", [y], L.t(y).shape, "float32")
    if perm != list(range(rank)):
        y = L.transpose(y, perm)
    return y


@lowers("_softmax", "softmax")
def _softmax(L, node, x, dim, half_to_float=False):
    return _softmax_like(L, node, x, dim, False)


@lowers("_log_softmax", "log_softmax")
def _log_softmax(L, node, x, dim, half_to_float=False):
    return _softmax_like(L, node, x, dim, True)


@lowers("max_pool2d_with_indices", "max_pool2d")
def _max_pool(L, node, x, kernel, stride=None, padding=0, dilation=1, ceil_mode=False):
    what = f"max pool {node.name}"
    x = L.ensure_act(x, what)
    k = _pairs(kernel)
    s = _pairs(stride) if stride else list(k)
    p, d = _pairs(padding), _pairs(dilation)
    if d != [1, 1]:
        raise EerieError(f"{what}: dilated pooling is not supported")
    oshape = L.meta_shape()
    xn = _nchw_in(L, x, what)
    if _ceil_changes(L.t(xn).shape, k, s, p, ceil_mode):
        xin, pad = _pool_pad_explicit(L, xn, k, s, p, oshape, -math.inf), "VALID"
    else:
        xin, pad = _geometry(L, xn, k, s, d, p, what, pad_value=-math.inf)
    n, c = L.t(xn).shape[0], L.t(xn).shape[3]
    y = L.op("MAX_POOL_2D", [xin], (n, oshape[2], oshape[3], c), "float32",
             {"padding": pad, "stride_h": s[0], "stride_w": s[1], "filter_height": k[0],
              "filter_width": k[1], "fused_activation_function": "NONE"})
    _check_pool_shape(L, xin, y, k, s, pad, what, ceil_mode)
    y = _nchw_out(L, y)
    return (y, None) if node.target.__name__.startswith("max_pool2d_with_indices") else y


def _pool_out(n, k, s, p, ceil_mode):
    """torch's pooled extent: with ceil_mode a last partial window, unless it would start
    beyond the input and its left padding."""
    out = (n + 2 * p - k + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _ceil_changes(nhwc, k, s, p, ceil_mode) -> bool:
    return bool(ceil_mode) and any(_pool_out(n, kk, ss, pp, True) != _pool_out(n, kk, ss, pp, False)
                                   for n, kk, ss, pp in zip(nhwc[1:3], k, s, p))


def _pool_pad_explicit(L, xn, k, s, p, oshape, value):
    """The NHWC input padded (value) so that a VALID pool gives exactly torch's windows: p
    before, and after whatever the last window needs (cropped when it needs less than none)."""
    n, h, w, c = L.t(xn).shape
    after = [(o - 1) * ss + kk - size - pp for o, ss, kk, size, pp in zip(oshape[2:4], s, k, (h, w), p)]
    for dim, a in ((1, after[0]), (2, after[1])):
        if a < 0:   # the last rows/columns fall in no window
            xn = _slice_op(L, xn, dim, 0, L.t(xn).shape[dim] + a, 1)
    pads = np.array([[0, 0], [p[0], max(after[0], 0)], [p[1], max(after[1], 0)], [0, 0]], np.int32)
    _, h, w, _ = L.t(xn).shape
    ins = [xn, L.const(pads, "int32", "paddings")]
    kind = "PAD"
    if value != 0.0:
        kind = "PADV2"
        ins.append(L.const(np.array(value, np.float32), "float32", "pad_value"))
    return L.op(kind, ins, (n, h + int(pads[1].sum()), w + int(pads[2].sum()), c), L.t(xn).dtype)


def _avg_divisors(size, k, s, p, out, count_include_pad):
    """torch's divisor per output position along one dim: the window clipped to the padded
    input (count_include_pad) or to the input itself."""
    d = []
    for o in range(out):
        start = o * s - p
        end = min(start + k, size + p)
        d.append(end - start if count_include_pad else min(end, size) - max(start, 0))
    return np.array(d, np.float64)


def _check_pool_shape(L, xin, y, k, s, pad, what, ceil_mode):
    _, h, w, _ = L.t(xin).shape
    if pad == "SAME":
        exp = ((h + s[0] - 1) // s[0], (w + s[1] - 1) // s[1])
    else:
        exp = ((h - k[0]) // s[0] + 1, (w - k[1]) // s[1] + 1)
    if exp != tuple(L.t(y).shape[1:3]):
        raise EerieError(f"{what}: output {list(L.t(y).shape[1:3])} differs from the TFLite pooling "
                         f"geometry {list(exp)}{' (ceil_mode)' if ceil_mode else ''}")


@lowers("avg_pool2d")
def _avg_pool(L, node, x, kernel, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
              divisor_override=None):
    what = f"average pool {node.name}"
    x = L.ensure_act(x, what)
    if divisor_override:
        raise EerieError(f"{what}: divisor_override is not supported")
    k = _pairs(kernel)
    s = _pairs(stride) if stride else list(k)
    p = _pairs(padding)
    oshape = L.meta_shape()
    xn = _nchw_in(L, x, what)
    _, h, w, _ = L.t(xn).shape
    same_ok = p == [0, 0] or all(_same_padding_matches(n, kk, ss, 1, pp) for n, kk, ss, pp in zip((h, w), k, s, p))
    if _ceil_changes(L.t(xn).shape, k, s, p, ceil_mode) or (not count_include_pad and not same_ok):
        # Zero padding, a VALID pool (which divides by k*k), then a constant per-position
        # factor k*k / torch's divisor where the two differ.
        xin = _pool_pad_explicit(L, xn, k, s, p, oshape, 0.0)
        n, c = L.t(xn).shape[0], L.t(xn).shape[3]
        y = L.op("AVERAGE_POOL_2D", [xin], (n, oshape[2], oshape[3], c), "float32",
                 {"padding": "VALID", "stride_h": s[0], "stride_w": s[1], "filter_height": k[0],
                  "filter_width": k[1], "fused_activation_function": "NONE"})
        _check_pool_shape(L, xin, y, k, s, "VALID", what, ceil_mode)
        div = np.outer(_avg_divisors(h, k[0], s[0], p[0], oshape[2], count_include_pad),
                       _avg_divisors(w, k[1], s[1], p[1], oshape[3], count_include_pad))
        if (div != k[0] * k[1]).any():
            fix = (k[0] * k[1] / div).astype(np.float32).reshape(1, oshape[2], oshape[3], 1)
            y = L.op("MUL", [y, L.const(fix, "float32", "divisor_fix")], L.t(y).shape, "float32",
                     {"fused_activation_function": "NONE"})
        return _nchw_out(L, y)
    if p != [0, 0] and count_include_pad:
        # Padding counted in the average: pad with zeros explicitly and pool VALID.
        n, h, w, c = L.t(xn).shape
        xin = L.op("PAD", [xn, L.const(np.array([[0, 0], [p[0], p[0]], [p[1], p[1]], [0, 0]], np.int32),
                                       "int32", "paddings")], (n, h + 2 * p[0], w + 2 * p[1], c), "float32")
        pad = "VALID"
    else:
        xin, pad = _geometry(L, xn, k, s, [1, 1], p, what, allow_pad_op=False)
    n, c = L.t(xn).shape[0], L.t(xn).shape[3]
    y = L.op("AVERAGE_POOL_2D", [xin], (n, oshape[2], oshape[3], c), "float32",
             {"padding": pad, "stride_h": s[0], "stride_w": s[1], "filter_height": k[0],
              "filter_width": k[1], "fused_activation_function": "NONE"})
    _check_pool_shape(L, xin, y, k, s, pad, what, ceil_mode)
    return _nchw_out(L, y)


@lowers("_adaptive_avg_pool2d", "adaptive_avg_pool2d")
def _adaptive_avg(L, node, x, output_size):
    what = f"adaptive average pool {node.name}"
    x = L.ensure_act(x, what)
    _, c, h, w = L.t(x).shape
    oh, ow = _pairs(output_size)
    oh, ow = oh or h, ow or w
    if (oh, ow) == (1, 1):
        return L.op("MEAN", [x, L.const(np.array([2, 3], np.int32), "int32", "axes")], L.meta_shape(),
                    "float32", {"keep_dims": True})
    if h % oh or w % ow:
        raise EerieError(f"{what}: input {h}x{w} is not a multiple of the output {oh}x{ow}")
    xn = _nchw_in(L, x, what)
    k = [h // oh, w // ow]
    y = L.op("AVERAGE_POOL_2D", [xn], (L.t(xn).shape[0], oh, ow, c), "float32",
             {"padding": "VALID", "stride_h": k[0], "stride_w": k[1], "filter_height": k[0],
              "filter_width": k[1], "fused_activation_function": "NONE"})
    return _nchw_out(L, y)


@lowers("full_like", "zeros_like", "ones_like", "empty_like")
def _full_like(L, node, x, *rest, **kw):
    torch = L.torch
    name = node.target.__name__.split(".")[0]
    value = {"zeros_like": 0, "ones_like": 1, "empty_like": 0}.get(name, rest[0] if rest else kw.get("fill_value"))
    val = node.meta["val"]
    return torch.full(tuple(L.meta_shape()), value, dtype=val.dtype)


def _bn_arg(self, bn, i):
    a = bn.args[i]
    if a is None:
        return None
    v = self.env.get(a)
    if v is None or isinstance(v, Act):
        raise EerieError(f"batch norm {bn.name}: its parameters must be constants")
    return v


_Lowerer._bn_arg = _bn_arg


@lowers("max", "min")
def _max_min(L, node, x, *rest, **kw):
    is_max = node.target.__name__.startswith("max")
    overload = node.target.__name__.split(".")[-1]
    if overload == "other":          # elementwise max(x, y)
        return _binary("MAXIMUM" if is_max else "MINIMUM")(L, node, x, rest[0])
    x = L.ensure_act(x, node.name)
    kind = "REDUCE_MAX" if is_max else "REDUCE_MIN"
    if overload == "default":       # over everything, a 0-d result
        axes, keep = list(range(len(L.t(x).shape))), False
    else:                            # max.dim: (values, indices); only values are supported
        axes, keep = [rest[0] % len(L.t(x).shape)], bool(rest[1]) if len(rest) > 1 else False
        if len(node.users) and any(u.args[1] != 0 for u in node.users):
            raise EerieError(f"{node.name}: the indices of max/min along a dim are not supported")
    y = L.op(kind, [x, L.const(np.array(axes, np.int32), "int32", "axes")], L.meta_shape(),
             L.t(x).dtype, {"keep_dims": keep})
    return y if overload == "default" else (y, None)


@lowers("index_select")
def _index_select(L, node, x, dim, index):
    """GATHER along `dim`; a constant index table is a compile-time copy, a computed one (a
    loop counter) is read and bounds-checked at run time."""
    x = L.ensure_act(x, node.name)
    rank = len(L.t(x).shape)
    idx = index if isinstance(index, Act) else L.const(index, "int32", "indices")
    if isinstance(index, Act) and L.t(index).dtype != "int32":
        raise EerieError(f"{node.name}: index_select needs integer indices")
    return L.op("GATHER", [x, idx], L.meta_shape(), L.t(x).dtype, {"axis": dim % rank, "batch_dims": 0})


@lowers("index")
def _index(L, node, x, indices):
    """x[i] with one integer index tensor (on any one dim, the others `:`): GATHER. Boolean
    masks give value-dependent shapes, which eerie-c cannot compile."""
    x = L.ensure_act(x, node.name)
    used = [(d, i) for d, i in enumerate(indices) if i is not None]
    if len(used) != 1:
        raise EerieError(f"{node.name}: indexing with {len(used)} index tensors is not supported "
                         f"(one integer index tensor is)")
    dim, idx = used[0]
    dt = L.t(idx).dtype if isinstance(idx, Act) else _ir_dtype(idx.dtype)
    if dt == "bool":
        raise EerieError(f"{node.name}: boolean-mask indexing gives a value-dependent shape")
    if not isinstance(idx, Act):
        idx = L.const(idx, "int32", "indices")
    return L.op("GATHER", [x, idx], L.meta_shape(), L.t(x).dtype, {"axis": dim, "batch_dims": 0})


# Ops whose `dim` argument (args[1]) may combine samples without changing the shape.
_DIM_OPS = {"_softmax", "softmax", "_log_softmax", "log_softmax", "cumsum", "cumprod", "flip",
            "roll", "sort", "argsort", "logcumsumexp"}
_SHAPE_USERS = {"view", "_unsafe_view", "reshape", "expand", "full", "zeros", "ones", "empty",
                "new_zeros", "new_ones", "new_full", "new_empty", "empty_strided", "full_like"}


@lowers("sym_size")
def _sym_size(L, node, x, dim):
    """A size of a computed tensor: static sizes as they are; the dynamic batch size is 1 in
    the per-sample graph and another dynamic size its maximum, which is right only where it
    is a shape (also through integer arithmetic on sizes), so any other use fails."""
    x = L.ensure_act(x, node.name)
    val = node.meta.get("val")
    if isinstance(val, int):
        return val
    expr = getattr(getattr(val, "node", None), "expr", None)
    if L.batch is not None and expr == L.batch:
        value, what = 1, "the dynamic batch size"
    elif L.dyn is not None and expr in L.dyn.syms:
        value = L.dyn.ranges[L.dyn.syms.index(expr)][1]
        what = f"the dynamic size {L.dyn.names[L.dyn.syms.index(expr)]}"
    else:
        raise EerieError(f"{node.name}: the size {val} is not known at compile time")
    _only_shape_uses(node, what)
    return value


def _only_shape_uses(node, what):
    for u in node.users:
        packet = getattr(u.target, "__name__", "").split(".")[0]
        if u.op == "call_function" and packet in _SHAPE_USERS:
            continue
        if u.op == "call_function" and u.target in (operator.mul, operator.add, operator.sub,
                                                    operator.floordiv):
            _only_shape_uses(u, what)   # size arithmetic: fine if the result is a shape
            continue
        raise EerieError(f"{u.name}: {what} is used as a value "
                         f"({getattr(u.target, '__name__', u.target)}); it may only be a shape"
                         f"{' (' + _src(u) + ')' if _src(u) else ''}")
