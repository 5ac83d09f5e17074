"""The PyTorch frontend's walker: an exported program's FX graph, node by node, into IR ops.

`Lowerer` binds the program's inputs, parameters and constants, walks the graph (and, through
control.py, the graphs of torch.cond / torch.while_loop), evaluates nodes whose inputs are all
constants with torch itself, and hands every other node to the lowering registered for its ATen
op in `registry.LOWERINGS`. Importing this module imports every module that registers
lowerings (lower_*.py, batch.py), so the registry is complete whenever a walker exists.
"""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ...errors import EerieError
from ...ir import DTYPE_NP, Graph, Op, Quant, Tensor
from ..tensor_checks import shape_problem
# Each of these registers its lowerings on import (the walker needs them all).
from . import (batch, lower_any, lower_elementwise, lower_nn, lower_norm, lower_pool,  # noqa: F401
               lower_pow, lower_quant, lower_reduce, lower_resize, lower_shape)
from .batch import check_per_sample, find_dynamic_sizes
from .control import lower_higher_order
from .lower_quant import QUANTIZE_OPS, _params, note_const_dequantize
from .lut_regions import evaluate, find_regions
from .registry import LOWERINGS
from .values import Act, _flat_values, _ir_dtype, _np, _src, _torch


def registered_lowerings() -> dict:
    """Every registered lowering (all registering modules are imported with this one)."""
    return LOWERINGS


class Lowerer:
    def __init__(self, ep, name: str, max_iterations: int, dim_names: dict | None = None,
                 batch_as_dim: bool = False):
        self.torch = _torch()
        self.dim_names = dict(dim_names or {})
        self.batch_as_dim = batch_as_dim   # a dynamic dim 0 compiled as a masked dim, not per sample
        self.dyn = None                    # dynamic.Dynamic: the program's dynamic sizes
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
        self.quant_hints: list = []   # scales of dequantized constants (PT2E weights)
        self.quantized = False        # the program quantizes activations (PT2E)
        # PT2E: element-wise regions of one int8 value, run as one table (lut_regions.py)
        self.table_regions: dict = {}

    # ---- building blocks -------------------------------------------------------------------

    def new_id(self, hint: str) -> str:
        self.counter += 1
        return f"t{self.counter}_{hint}"[:48]

    def check_limits(self, shape, dtype: str, label: str, activation: bool):
        """The IR's limits (frontend/tensor_checks.py) on every tensor the walker makes, so that
        a .pt2 whose sizes were edited fails here in one line, not in a kernel or the C proof."""
        problem = shape_problem(shape, "shape", np.dtype(DTYPE_NP[dtype]).itemsize,
                                allow_zero=not activation)
        if problem:
            node = self.node
            where = (f"{'input' if node.op == 'placeholder' else 'node'} {node.name}"
                     if node is not None else label or "the program")
            raise EerieError(f"{where}: {problem}")

    def tensor(self, shape, dtype: str, label: str = "") -> Act:
        tid = self.new_id(label or "x")
        shape = tuple(int(d) for d in shape)
        self.check_limits(shape, dtype, label, activation=True)
        self.tensors[tid] = Tensor(tid, shape, dtype, label or tid)
        self.scope.tensors[tid] = self.tensors[tid]
        return Act(tid)

    def const(self, value, dtype: str | None = None, label: str = "const") -> str:
        torch = self.torch
        if not isinstance(value, torch.Tensor):
            value = torch.tensor(value)
        dtype = dtype or _ir_dtype(value.dtype)
        self.check_limits(tuple(value.shape), dtype, label, activation=False)
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
        find_dynamic_sizes(self, gm, user_inputs)
        if any(getattr(n.target, "__name__", "") in QUANTIZE_OPS for n in gm.graph.nodes):
            self.table_regions = find_regions(gm, user_inputs, torch)
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
        if self.quantized:
            top.quantized_from = "pt2e"
            top.quant_hints = self.quant_hints
        if self.dyn is not None:
            out_node = next(n for n in gm.graph.nodes if n.op == "output")
            res = out_node.args[0]
            res = list(res) if isinstance(res, (list, tuple)) else [res]
            in_vals = [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder" and n.name in user_inputs]
            top.dynamic_dims = self.dyn.interface(self, in_vals, [r.meta["val"] for r in res],
                                                  self.batch_max, (0, self.batch_max))
        return top

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
        inside = {n for _, nodes in self.table_regions.values() for n in nodes[:-1]}
        for node in gm.graph.nodes:
            self.node = node
            if node in inside:   # computed with its region's end, as a table or op by op
                continue
            if node in self.table_regions:
                source, nodes = self.table_regions[node]
                made = self.table_lookup(node, source, nodes, env)
                if made is not None:
                    env[node] = made
                    continue
                for n in nodes[:-1]:
                    self.node = n
                    env[n] = self.call(n, self.value(n.args, env), self.value(dict(n.kwargs), env), env)
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

    def table_lookup(self, end, source, nodes, env) -> Act | None:
        """The region ending at quantize node `end` as one TABLE_LOOKUP of `source`'s int8
        tensor (lut_regions.py), or None: then its nodes are lowered one by one."""
        x = env.get(source)
        if not isinstance(x, Act) or self.t(x).dtype != "int8" or self.dyn is not None:
            return None
        made = evaluate(self.torch, source, nodes, env)
        if made is None:
            return None
        table, what = made
        scale, zp, _ = _params(self, end, *self.value(tuple(end.args[1:6]), env))
        y = self.op("TABLE_LOOKUP", [x], self.t(x).shape, "int8", {"table": table, "function": what})
        self.t(y).quant = Quant(np.array([scale], np.float32), np.array([zp], np.int64))
        return y

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
            if self.dyn is not None and any(isinstance(a, Act) and self.dyn.has(a)
                                            for a in _flat_values((args, kwargs))):
                raise EerieError(f"{node.name}: torch.cond / torch.while_loop on tensors with a dynamic "
                                 f"dim (other than a per-sample batch) is not supported"
                                 f"{' (' + _src(node) + ')' if _src(node) else ''}")
            return lower_higher_order(self, node, args, kwargs, env)
        if not self._has_act((args, kwargs)):
            # Everything is known at compile time: let torch compute it (once its size, from
            # the program's metadata, is known to be within the limits: nothing huge is made).
            val = node.meta.get("val")
            if isinstance(val, torch.Tensor) and all(isinstance(d, int) for d in val.shape):
                self.check_limits(tuple(val.shape), _ir_dtype(val.dtype), node.name, activation=False)
            try:
                with torch.no_grad():
                    result = target(*args, **kwargs)
                note_const_dequantize(self, node, args, result)
                return result
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
        try:
            result = early if early is not None else fn(self, node, *args, **kwargs)
        except EerieError as e:
            # Every lowering's refusal names the user's line that made the node.
            src = _src(node)
            if src and src not in str(e):
                raise EerieError(f"{e} ({src})") from None
            raise
        if self.dyn is not None and self.dyn.factors:
            result = self.dyn.after(self, node, packet, args, result)
        if self.batch is not None:
            check_per_sample(self, node, result)
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
