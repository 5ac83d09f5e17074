"""TFLite control flow (IF, WHILE, CALL_ONCE) and resource variables (VAR_HANDLE,
READ_VARIABLE, ASSIGN_VARIABLE) -> IR regions and state tensors.

IF and WHILE name subgraphs by index (IfOptions then/else_subgraph_index, WhileOptions
cond/body_subgraph_index). Every use inlines a fresh copy of the subgraph (its tensor ids
prefixed, its inputs bound to the caller's tensors) as a region of an IF / WHILE op, the form
frontend/torch/control.py makes for torch.cond / torch.while_loop, so passes/control_flow.py flattens
both frontends' control flow into the same markers. Regions nest (an IF inside a WHILE body).

Every WHILE gets a compile-time maximum trip count: proved from the loop itself when its
condition compares an int32 counter (constant start, constant step) with a constant or a
loop-invariant constant, else the `max_iterations` compile option (CLI --max-iterations). A
run that needs more trips makes NAME_invoke return 1. Without either bound: a compile error.

Resource variables: each (container, shared_name) of a VAR_HANDLE is one variable (state)
tensor (Tensor.variable: static storage outside the arena, kept across invocations), shaped
and typed like the values assigned to it. Handles are resolved here at compile time (also
through IF / WHILE operands), so READ_VARIABLE becomes a copy out of the state tensor and
ASSIGN_VARIABLE a copy into it (kernels/resource_variables.py). CALL_ONCE becomes an IF on a
zero-initialised state flag whose else branch runs the init subgraph and sets the flag: the
init runs on the first invocation (and again after NAME_reset_state()).
"""
from __future__ import annotations

import re

import numpy as np

from ..errors import EerieError
from ..ir import SHAPE_ONLY, Graph, Op, Tensor
from .flatbuffer_check import malformed
from .op_rules import check_op
from .tflite_trips import prove_trips

CONTROL_KINDS = frozenset({"IF", "WHILE", "CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"})
# Each IF / WHILE / CALL_ONCE gets its own copy of the subgraphs it runs, so a hostile file whose
# subgraphs each call the next one twice would inline 2**depth copies; cap the total.
MAX_INLINED_OPS = 10_000


def expand_control(g: Graph, resources: set[str], read, n_subgraphs: int,
                   max_iterations: int | None) -> Graph:
    """Inline the subgraphs that g's control-flow ops name; `read(s, prefix)` reads subgraph s
    (as frontend/tflite.py's _read_subgraph) with tensor ids prefixed."""
    if max_iterations is not None and int(max_iterations) < 0:
        raise EerieError(f"max_iterations must be 0 or more, not {max_iterations}")
    ex = _Expander(g, read, n_subgraphs, max_iterations)
    ex.resources |= set(resources)
    for kind, ids in (("input", g.inputs), ("output", g.outputs)):
        for k, tid in enumerate(ids):
            if tid in resources:
                raise EerieError(f"graph {kind} {k} is a resource variable handle: not supported "
                                 f"as a graph {kind}")
    g.ops = ex.expand(g.ops, "subgraph 0")
    ex.make_state()
    # Per-op contracts for the inlined ops (check_graph sees only the top level).
    for op in _region_ops(g.ops):
        check_op(op, g)
    return g


def _region_ops(ops):
    for op in ops:
        for r in op.regions:
            for inner in r.ops:
                yield inner
            yield from _region_ops(r.ops)


def _is_var(t: Tensor) -> bool:
    return bool(getattr(t, "variable", False))


def _same_quant(a: Tensor, b: Tensor) -> bool:
    if a.quant is None or b.quant is None:
        return a.quant is None and b.quant is None
    return (a.quant.axis == b.quant.axis and np.array_equal(a.quant.scale, b.quant.scale)
            and np.array_equal(a.quant.zero_point, b.quant.zero_point))


class _Expander:
    def __init__(self, g: Graph, read, n_subgraphs: int, max_iterations: int | None):
        self.g = g
        self.read = read
        self.n_subgraphs = n_subgraphs
        self.max_iterations = None if max_iterations is None else int(max_iterations)
        self.resources: set[str] = set()                   # every RESOURCE tensor id seen
        self.handles: dict[str, tuple[str, str]] = {}      # resource tensor id -> variable key
        self.var_ids: dict[tuple[str, str], str] = {}      # variable key -> state tensor id
        self.assigned: dict[tuple[str, str], list[tuple[str, str]]] = {}   # key -> (value, where)
        self.reads: dict[tuple[str, str], list[tuple[str, str]]] = {}      # key -> (output, where)
        self.flags = 0
        self.stack: list[int] = []
        self.instances = 0
        self.inlined_ops = 0

    # --- ops ---------------------------------------------------------------------------------

    def expand(self, ops: list[Op], scope: str) -> list[Op]:
        out: list[Op] = []
        for op in ops:
            where = f"{scope} op {op.index} ({op.kind})"
            kind = op.kind
            if kind == "VAR_HANDLE":
                if len(op.outputs) != 1 or op.outputs[0] not in self.resources:
                    raise malformed("VAR_HANDLE must have one RESOURCE output", where)
                self.handles[op.outputs[0]] = (str(op.attrs.get("container") or ""),
                                               str(op.attrs.get("shared_name") or ""))
            elif kind == "READ_VARIABLE":
                if len(op.inputs) != 1 or len(op.outputs) != 1:
                    raise malformed("READ_VARIABLE takes one handle and has one output", where)
                key = self._handle(op.inputs[0], where)
                self._plain(op.outputs, where)
                self.reads.setdefault(key, []).append((op.outputs[0], where))
                out.append(Op("READ_VARIABLE", [self._var(key)], list(op.outputs), {},
                              op.name, op.index))
            elif kind == "ASSIGN_VARIABLE":
                if len(op.inputs) != 2 or op.outputs:
                    raise malformed("ASSIGN_VARIABLE takes a handle and a value and has no outputs", where)
                key = self._handle(op.inputs[0], where)
                self._plain(op.inputs[1:], where)
                if op.inputs[1] is None:
                    raise malformed("the value to assign is omitted", where)
                self.assigned.setdefault(key, []).append((op.inputs[1], where))
                out.append(Op("ASSIGN_VARIABLE", [op.inputs[1]], [self._var(key)], {},
                              f"assign {key[1] or key[0] or 'variable'}", op.index))
            elif kind == "CALL_ONCE":
                out.append(self._call_once(op, where))
            elif kind == "IF":
                out += self._if(op, where)
            elif kind == "WHILE":
                out.append(self._while(op, where))
            else:
                self._plain(list(op.inputs) + list(op.outputs), where)
                out.append(op)
        return out

    def _plain(self, tids, where: str):
        for t in tids:
            if t is not None and t in self.resources:
                raise EerieError(f"{where}: uses a resource variable handle; only READ_VARIABLE, "
                                 f"ASSIGN_VARIABLE, IF and WHILE may take one")

    def _handle(self, tid: str | None, where: str) -> tuple[str, str]:
        if tid is None or tid not in self.handles:
            raise malformed("the resource handle does not come from a VAR_HANDLE", where)
        return self.handles[tid]

    def _var(self, key: tuple[str, str]) -> str:
        if key not in self.var_ids:
            base = re.sub(r"[^0-9a-zA-Z]+", "_", "_".join(p for p in key if p)).strip("_").lower()
            tid, n = f"var_{base or 'resource'}", 1
            while tid in self.g.tensors or tid in self.var_ids.values():
                n += 1
                tid = f"var_{base or 'resource'}_{n}"
            self.var_ids[key] = tid
        return self.var_ids[key]

    def _sub_index(self, op: Op, attr: str, where: str) -> int:
        s = op.attrs.get(attr)
        if s is None:
            raise malformed(f"missing {attr}", where)
        s = int(s)
        if not 0 < s < self.n_subgraphs:
            raise malformed(f"{attr} {s} is not a subgraph of the model (1 to {self.n_subgraphs - 1})", where)
        return s

    def _fresh(self, like: Tensor, tid: str, label: str) -> str:
        self.g.tensors[tid] = Tensor(tid, tuple(like.shape), like.dtype, label, like.quant)
        return tid

    # --- regions -----------------------------------------------------------------------------

    def _region(self, s: int, bound: list[str], where: str, what: str,
                loop_body: bool = False) -> tuple[Graph, list[str]]:
        """A fresh copy of subgraph s with its inputs bound to `bound`; returns the region and
        its outputs (tensors made inside the region, or resource handles)."""
        if s in self.stack:
            raise EerieError(f"{where}: subgraph {s} runs itself (recursive control flow is not supported)")
        self.instances += 1
        prefix = f"sg{s}_{self.instances}_"
        tensors, ops, ins, outs, res = self.read(s, prefix)
        self.inlined_ops += len(ops) + 1   # + 1: a copy of an empty subgraph still costs
        if self.inlined_ops > MAX_INLINED_OPS:
            raise malformed(f"control flow inlines more than {MAX_INLINED_OPS} ops (subgraph {s} is copy "
                            f"{self.instances}); subgraphs calling each other this often are not supported",
                            where)
        self.resources |= set(res)
        if len(ins) != len(bound):
            raise malformed(f"subgraph {s} ({what}) has {len(ins)} inputs but gets {len(bound)} values", where)
        rename: dict[str, str] = {}
        pre: list[Op] = []
        for k, (sub_in, outer) in enumerate(zip(ins, bound)):
            if sub_in is None:
                raise malformed(f"input {k} of subgraph {s} is omitted (-1)", where)
            if sub_in in res or outer in self.resources:
                if not (sub_in in res and outer in self.handles):
                    raise malformed(f"value {k} passed to subgraph {s} ({what}) is a resource handle on "
                                    f"one side only", where)
                self.handles[sub_in] = self.handles[outer]
                continue
            st, ot = tensors[sub_in], self.g.t(outer)
            if st.dtype != ot.dtype or st.size != ot.size:
                raise malformed(f"value {k} passed to subgraph {s} ({what}) is {ot.dtype} "
                                f"{list(ot.shape)} but the subgraph input is {st.dtype} {list(st.shape)}", where)
            if tuple(st.shape) == tuple(ot.shape) and _same_quant(st, ot) and not _is_var(st):
                rename[sub_in] = outer    # read the caller's tensor directly
            else:
                # Different shape or quantization parameters: TFLite copies the bytes.
                pre.append(Op("CF_COPY", [outer], [sub_in], {}, f"{what}_in{k}", 0))
        for tid, t in tensors.items():
            if tid not in rename:
                self.g.tensors[tid] = t
        for op in ops:
            op.name = f"{what}/{op.name}"   # C names and reports say which region it is in
            op.inputs = [rename.get(t, t) if t is not None else None for t in op.inputs]
            if any(t in rename for t in op.outputs):
                raise malformed(f"op {op.index} ({op.kind}) of subgraph {s} writes a subgraph input", where)
        self.stack.append(s)
        try:
            body = self.expand(ops, f"subgraph {s}")
        finally:
            self.stack.pop()
        region = Graph(f"{self.g.name}_{what}", self.g.tensors, pre + body, [], [])
        self._check_order(region, list(bound) + [rename.get(t, t) for t in ins], s, where)
        made = {t for o in region.ops for t in o.outputs}
        # A loop body's results are copied back into the loop values one after the other, so
        # none may share bytes with a loop value: a reshape (which passes/alias_reshape.py
        # makes an alias of its input) of a loop value, e.g. a swap, is copied out first.
        shape_only = {t for o in region.ops if o.kind in SHAPE_ONLY for t in o.outputs} \
            if loop_body else set()
        result: list[str] = []
        for k, r in enumerate(outs):
            if r is None:
                raise malformed(f"output {k} of subgraph {s} is omitted (-1)", where)
            r = rename.get(r, r)
            if r in self.resources:
                result.append(r)
                continue
            t = self.g.t(r)
            if r not in made or r in result or t.is_const or _is_var(t) or r in shape_only:
                # Region outputs are tensors the region makes: copy a pass-through input, an
                # outer value, a constant or a repeated output into one.
                new = self._fresh(t, f"{prefix}out{k}", f"{what} output {k}")
                region.ops.append(Op("CF_COPY", [r], [new], {}, f"{what}_out{k}", 0))
                r = new
            result.append(r)
        return region, result

    def _check_order(self, region: Graph, inputs: list[str], s: int, where: str):
        """Inside a subgraph every op reads its inputs, constants or values made before it."""
        defined = set(inputs)
        for op in region.ops:
            for t in op.inputs:
                if t is None or t in defined:
                    continue
                tt = self.g.tensors.get(t)
                if t not in self.var_ids.values() and (tt is None or not (tt.is_const or _is_var(tt))):
                    raise malformed(f"op {op.index} ({op.kind}) of subgraph {s} reads a tensor that is "
                                    f"neither a subgraph input, a constant nor made before it", where)
            for t in op.outputs:
                tt = self.g.tensors.get(t)
                if t in self.var_ids.values() or (tt is not None and _is_var(tt)):
                    continue   # state is written any number of times
                if t in defined or tt is None or tt.is_const:
                    raise malformed(f"op {op.index} ({op.kind}) of subgraph {s} writes a tensor that is "
                                    f"a constant, an input or already made", where)
                defined.add(t)

    # --- IF, WHILE, CALL_ONCE ----------------------------------------------------------------

    def _if(self, op: Op, where: str) -> list[Op]:
        if not op.inputs or op.inputs[0] is None or op.inputs[0] in self.resources:
            raise malformed("IF needs a boolean condition as input 0", where)
        pred, args = op.inputs[0], list(op.inputs[1:])
        pt = self.g.t(pred)
        if pt.dtype != "bool" or pt.size < 1:
            raise EerieError(f"{where}: the condition is {pt.dtype} {list(pt.shape)}; IF needs a bool")
        if any(a is None for a in args):
            raise malformed("an IF operand is omitted (-1)", where)
        then_s = self._sub_index(op, "then_subgraph_index", where)
        else_s = self._sub_index(op, "else_subgraph_index", where)
        name = f"if{op.index}"
        if pt.is_const:
            # Known at compile time: inline the branch it takes.
            take = bool(np.asarray(pt.data).reshape(-1)[0])
            region, outs = self._region(then_s if take else else_s, args, where,
                                        f"{name}_{'then' if take else 'else'}")
            self._check_outputs(op, [outs], where)
            ops = list(region.ops)
            for r, y in zip(outs, op.outputs):
                if y in self.resources:
                    self.handles[y] = self.handles[r]
                else:
                    ops.append(Op("CF_COPY", [r], [y], {}, op.name, op.index))
            return ops
        then_g, then_out = self._region(then_s, args, where, f"{name}_then")
        else_g, else_out = self._region(else_s, args, where, f"{name}_else")
        self._check_outputs(op, [then_out, else_out], where)
        keep = []
        for k, y in enumerate(op.outputs):
            if y in self.resources:
                a, b = self.handles[then_out[k]], self.handles[else_out[k]]
                if a != b:
                    raise EerieError(f"{where}: output {k} is resource {a} in one branch and {b} in the "
                                     f"other (handles must be known at compile time)")
                self.handles[y] = a
            else:
                keep.append(k)
        then_g.outputs = [then_out[k] for k in keep]
        else_g.outputs = [else_out[k] for k in keep]
        ins = [pred] + [a for a in args if a not in self.resources]
        return [Op("IF", ins, [op.outputs[k] for k in keep], {}, op.name, op.index,
                   regions=[then_g, else_g])]

    def _check_outputs(self, op: Op, branches: list[list[str]], where: str):
        for outs in branches:
            if len(outs) != len(op.outputs):
                raise malformed(f"{len(op.outputs)} outputs but a branch subgraph has {len(outs)}", where)
            for k, (r, y) in enumerate(zip(outs, op.outputs)):
                if (r in self.resources) != (y in self.resources):
                    raise malformed(f"output {k} is a resource handle on one side only", where)
                if y in self.resources:
                    continue
                rt, yt = self.g.t(r), self.g.t(y)
                if rt.dtype != yt.dtype or rt.size != yt.size:
                    raise EerieError(f"{where}: output {k} is {yt.dtype} {list(yt.shape)} but a branch "
                                     f"makes {rt.dtype} {list(rt.shape)} (dynamic shapes are not supported)")

    def _while(self, op: Op, where: str) -> Op:
        inits, vs = list(op.inputs), list(op.outputs)
        if len(inits) != len(vs) or not vs:
            raise malformed(f"WHILE has {len(inits)} inputs and {len(vs)} outputs (they must pair up)", where)
        for k, (i, v) in enumerate(zip(inits, vs)):
            if i is None:
                raise malformed(f"loop value {k} is omitted (-1)", where)
            if (i in self.resources) != (v in self.resources):
                raise malformed(f"loop value {k} is a resource handle on one side only", where)
            if v in self.resources:
                self.handles[v] = self._handle(i, where)
                continue
            it, vt = self.g.t(i), self.g.t(v)
            if it.dtype != vt.dtype or it.size != vt.size:
                raise EerieError(f"{where}: loop value {k} starts as {it.dtype} {list(it.shape)} but the "
                                 f"loop makes {vt.dtype} {list(vt.shape)} (dynamic shapes are not supported)")
        cond_s = self._sub_index(op, "cond_subgraph_index", where)
        body_s = self._sub_index(op, "body_subgraph_index", where)
        name = f"while{op.index}"
        cond_g, cond_out = self._region(cond_s, vs, where, f"{name}_cond")
        if len(cond_out) != 1 or cond_out[0] in self.resources \
                or self.g.t(cond_out[0]).dtype != "bool" or self.g.t(cond_out[0]).size < 1:
            raise EerieError(f"{where}: the condition subgraph {cond_s} must return one bool")
        body_g, body_out = self._region(body_s, vs, where, f"{name}_body", loop_body=True)
        if len(body_out) != len(vs):
            raise malformed(f"the body subgraph {body_s} returns {len(body_out)} values for {len(vs)} "
                            f"loop values", where)
        keep = []
        for k, (r, v) in enumerate(zip(body_out, vs)):
            if (r in self.resources) != (v in self.resources):
                raise malformed(f"loop value {k} is a resource handle on one side only", where)
            if v in self.resources:
                if self.handles[r] != self.handles[v]:
                    raise EerieError(f"{where}: loop value {k} changes from resource {self.handles[v]} to "
                                     f"{self.handles[r]} (handles must be known at compile time)")
                continue
            rt, vt = self.g.t(r), self.g.t(v)
            if rt.dtype != vt.dtype or rt.size != vt.size:
                raise EerieError(f"{where}: loop value {k} changes from {vt.dtype} {list(vt.shape)} to "
                                 f"{rt.dtype} {list(rt.shape)} (dynamic shapes are not supported)")
            keep.append(k)
        cond_g.outputs = cond_out
        body_g.outputs = [body_out[k] for k in keep]
        proved = prove_trips(self.g.tensors, self.resources, inits, vs, cond_g, body_g, body_out)
        if proved is not None:
            bound, source = proved, "proved"
        elif self.max_iterations is not None:
            bound, source = self.max_iterations, "max_iterations"
        else:
            raise EerieError(
                f"{where}: the loop has no compile-time bound on its trip count (its condition is not "
                f"a counter compared with a constant): pass --max-iterations N (Python API: "
                f"max_iterations=N); a run that needs more than N trips makes NAME_invoke return 1")
        return Op("WHILE", [inits[k] for k in keep], [vs[k] for k in keep],
                  {"max_iterations": int(bound), "trip_bound": source}, op.name, op.index,
                  regions=[cond_g, body_g])

    def _call_once(self, op: Op, where: str) -> Op:
        if op.inputs or op.outputs:
            raise malformed("CALL_ONCE has no inputs or outputs", where)
        s = self._sub_index(op, "init_subgraph_index", where)
        self.flags += 1
        init_g, outs = self._region(s, [], where, f"call_once{op.index}")
        if outs:
            raise malformed(f"the init subgraph {s} of CALL_ONCE has outputs", where)
        flag = f"call_once_done{self.flags}" if self.flags > 1 else "call_once_done"
        while flag in self.g.tensors:
            flag += "_"
        self.g.tensors[flag] = Tensor(flag, (1,), "bool", f"CALL_ONCE {op.index} done", variable=True)
        done = f"{flag}_true"
        self.g.tensors[done] = Tensor(done, (1,), "bool", "true", data=np.ones(1, np.bool_))
        init_g.ops.append(Op("ASSIGN_VARIABLE", [done], [flag], {}, "call_once done", op.index))
        # `if (done) {} else {init}`: the flag starts at zero, so no negation is needed.
        return Op("IF", [flag], [], {"call_once": True}, f"call_once {op.index}", op.index,
                  regions=[Graph(f"{self.g.name}_call_once_skip", self.g.tensors, [], [], []), init_g])

    # --- state tensors -----------------------------------------------------------------------

    def make_state(self):
        """One variable (state) tensor per resource, shaped like the values assigned to it."""
        for key, tid in self.var_ids.items():
            label = f"resource {key[1] or key[0] or '?'}"
            assigns = self.assigned.get(key, [])
            if not assigns:
                raise EerieError(f"{self.reads[key][0][1]}: resource variable {key[1]!r} is read but "
                                 f"never assigned (its shape and type come from ASSIGN_VARIABLE)")
            first = self.g.t(assigns[0][0])
            for tid2, where in assigns[1:] + self.reads.get(key, []):
                t = self.g.t(tid2)
                if t.dtype != first.dtype or t.size != first.size:
                    raise EerieError(f"{where}: resource variable {key[1]!r} is {first.dtype} "
                                     f"{list(first.shape)} elsewhere but {t.dtype} {list(t.shape)} here")
            self.g.tensors[tid] = Tensor(tid, tuple(first.shape), first.dtype, label, first.quant,
                                         variable=True)
