"""Random graphs for the arena-plan property tests (test_arena_proof.py), built the way the
compiler builds real ones: nested IF / WHILE regions linearized by passes/control_flow.py,
RESHAPEs aliased by passes/alias_reshape.py, ops flagged in-place as lower_graph flags them
(Op.attrs["inplace_of_input"], from Lowered.inplace: "start"/True or "end"), variable (state) tensors read and written
like TFLite resource variables, scratch buffers, and plans with the inputs in the arena.
Also the test-side helpers that look at a plan: storage roots, arena items, conflicts."""
from __future__ import annotations

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from eerie_c.ir import Graph, Op, Tensor, verify_graph
from eerie_c.passes.alias_reshape import alias_reshapes
from eerie_c.passes.control_flow import linearize_control_flow
from eerie_c.plan import plan_memory
from eerie_c.plan.proof import _live_ranges

DTYPES = ["int8", "int16", "int32", "float32", "uint8", "int64"]


class _Builder:
    def __init__(self, draw, control_flow: bool):
        self.draw, self.cf = draw, control_flow
        self.tensors: dict[str, Tensor] = {}
        self.variables: list[str] = []
        self.n = 0

    def new(self, dtype, size, data=None, variable=False) -> str:
        tid = f"t{len(self.tensors)}"
        self.tensors[tid] = Tensor(tid, (size,), dtype, data=data, variable=variable)
        return tid

    def op(self, kind, ins, outs, **attrs) -> Op:
        self.n += 1
        o = Op(kind, ins, outs, attrs, name=f"o{self.n}", index=self.n)
        if self.draw(st.integers(0, 4)) == 0:
            # the scratch is keyed by the op itself: its step is known after linearizing
            o.attrs["test_scratch"] = (f"l{self.n}_scratch", self.draw(st.integers(1, 256)))
        return o

    def like(self, src: str) -> str:
        return self.new(self.tensors[src].dtype, self.tensors[src].size)

    def compute(self, avail: list[str], out_like: str | None = None) -> Op:
        """An ordinary op; a one-input op whose output is no larger than its input may be
        flagged in-place (the planner decides whether the rule lets it run so)."""
        d = self.draw
        if d(st.booleans()):
            src = d(st.sampled_from(avail))
            t = self.tensors[src]
            # "start": output no larger than the input; "end": the input at the tail of a
            # larger output, usually larger by a multiple of 16 bytes (else the rule refuses)
            mode = d(st.sampled_from([False, True, "end"]))
            if mode == "end":
                size = t.size + d(st.sampled_from([0, 16, 32, 48, 5]))
            else:
                size = t.size if d(st.booleans()) else d(st.integers(0, t.size))
            out = self.like(out_like) if out_like else self.new(t.dtype, size)
            ins = [src]
            if d(st.booleans()):
                ins.append(self.new("int8", 4, data=np.zeros(4, np.int8)))   # a weight
            return self.op(d(st.sampled_from(["RELU", "ADD", "X"])), ins, [out],
                           inplace_of_input=mode)
        k = d(st.integers(1, min(3, len(avail))))
        ins = d(st.lists(st.sampled_from(avail), min_size=k, max_size=k))
        if d(st.booleans()):
            ins.append(self.new("int8", 4, data=np.zeros(4, np.int8)))
        if d(st.booleans()) and d(st.booleans()):
            ins.append(None)                                   # omitted optional input
        outs = [self.like(out_like)] if out_like else \
            [self.new(d(st.sampled_from(DTYPES)), d(st.integers(0, 400))) for _ in range(d(st.integers(1, 2)))]
        return self.op(d(st.sampled_from(["ADD", "CONV_2D", "X"])), ins, outs,
                       inplace_of_input=d(st.booleans()) and d(st.booleans()))

    def block(self, avail: list[str], n_ops: int, depth: int) -> list[Op]:
        """n_ops ops reading `avail` (extended with what they make) in execution order."""
        d, ops, avail = self.draw, [], list(avail)
        for _ in range(n_ops):
            kind = d(st.integers(0, 11))
            if kind <= 2:    # RESHAPE: same bytes, same dtype, another shape
                src = d(st.sampled_from(avail))
                out = self.like(src)
                self.tensors[out].shape = (1, self.tensors[src].size)
                ops.append(self.op("RESHAPE", [src], [out]))
            elif kind == 3:  # a variable (state) tensor: assigned, read, or both
                if not self.variables or d(st.booleans()):
                    self.variables.append(self.new(d(st.sampled_from(DTYPES)), d(st.integers(1, 64)),
                                                   variable=True))
                var = d(st.sampled_from(self.variables))
                how = d(st.sampled_from(["assign", "read", "update"]))
                src = d(st.sampled_from(avail))
                if how == "assign":
                    ops.append(self.op("ASSIGN_VARIABLE", [src], [var]))
                    continue
                out = self.like(var)
                ins, outs = ([var], [out]) if how == "read" else ([src, var], [out, var])
                ops.append(self.op("READ_VARIABLE" if how == "read" else "SVDF", ins, outs))
            elif kind == 4 and self.cf and depth < 2:
                ops.append(self.if_op(avail, depth))
            elif kind == 5 and self.cf and depth < 2:
                ops.append(self.while_op(avail, depth))
            else:
                ops.append(self.compute(avail))
            avail.extend(t for t in ops[-1].outputs if not self.tensors[t].variable)
        return ops

    def region(self, avail, depth, results_like, name) -> Graph:
        """A region whose results are fresh tensors shaped like `results_like` (never views of
        outer values: a loop body's results are copied onto the loop values one by one)."""
        ops = self.block(avail, self.draw(st.integers(0, 4)), depth + 1)
        inner = list(avail) + [t for o in ops for t in o.outputs if not self.tensors[t].variable]
        outs = []
        for like in results_like:
            ops.append(self.compute(inner, out_like=like))
            outs.append(ops[-1].outputs[0])
        return Graph(name, self.tensors, ops, [], outs)

    def if_op(self, avail, depth) -> Op:
        pred = self.draw(st.sampled_from(avail))
        shapes = [self.new(self.draw(st.sampled_from(DTYPES)), self.draw(st.integers(1, 200)))
                  for _ in range(self.draw(st.integers(0, 2)))]
        then_g = self.region(avail, depth, shapes, "then")
        else_g = self.region(avail, depth, shapes, "else")
        return Op("IF", [pred], shapes, {}, f"if{self.n}", self.n, regions=[then_g, else_g])

    def while_op(self, avail, depth) -> Op:
        inits = self.draw(st.lists(st.sampled_from(avail), min_size=1, max_size=2, unique=True))
        vs = [self.like(i) for i in inits]
        cond_flag = self.new("bool", 1)
        cond_g = self.region(avail + vs, depth, [cond_flag], "cond")
        body_g = self.region(avail + vs, depth, vs, "body")
        return Op("WHILE", inits, vs, {"max_iterations": 3}, f"while{self.n}", self.n,
                  regions=[cond_g, body_g])


@st.composite
def graphs(draw, control_flow: bool = True):
    """(graph, scratch {step: (name, bytes)}, inputs_in_arena), ready to plan."""
    b = _Builder(draw, control_flow)
    inputs = [b.new(draw(st.sampled_from(DTYPES)), draw(st.integers(1, 300)))
              for _ in range(draw(st.integers(1, 3)))]
    ops = b.block(inputs, draw(st.integers(1, 14)), 0)
    produced = [t for op in ops for t in op.outputs if not b.tensors[t].variable]
    assume(produced)
    n_out = draw(st.integers(1, min(3, len(produced))))
    outputs = list(dict.fromkeys(draw(st.lists(st.sampled_from(produced), min_size=n_out, max_size=n_out))))
    g = Graph("g", b.tensors, ops, inputs, outputs)
    g = alias_reshapes(linearize_control_flow(g))
    verify_graph(g, "test graph")
    scratch = {step: op.attrs.pop("test_scratch") for step, op in enumerate(g.ops)
               if "test_scratch" in op.attrs}
    return g, scratch, draw(st.booleans())


def plan_of(case):
    g, scratch, in_arena = case
    plan = plan_memory(g, scratch, inputs_in_arena=in_arena)
    return plan, {name: step for step, (name, _) in scratch.items()}


def root_of(g):
    alias = {op.outputs[0]: op.inputs[0] for op in g.ops if op.attrs.get("alias_of_input")}

    def root(t):
        while t in alias:
            t = alias[t]
        return t
    return root


def declared_inplace(g, root) -> set[frozenset]:
    """Root pairs some op declares it may run in place over (whether or not the rule lets it)."""
    return {frozenset((root(op.inputs[0]), root(op.outputs[0]))) for op in g.ops
            if op.attrs.get("inplace_of_input") and op.inputs and op.inputs[0] is not None and op.outputs}


def arena_items(g, plan, steps):
    """(key, first step, last step, offset, size) of every arena tensor and scratch buffer;
    the key is the tensor's storage root (scratch:NAME for scratch)."""
    ranges, root = _live_ranges(g), root_of(g)
    items = [(root(t), *ranges[t], p.offset, g.t(t).nbytes) for t, p in plan.tensors.items()
             if p.base == "arena" and g.t(t).nbytes > 0]
    items += [(f"scratch:{n}", steps[n], steps[n], p.offset, p.size) for n, p in plan.scratch.items()]
    return items


def conflicts(g, plan, steps) -> set[frozenset]:
    """Storage pairs live together whose bytes overlap (the in-place exception not applied)."""
    items = arena_items(g, plan, steps)
    out = set()
    for i, a in enumerate(items):
        for b in items[i + 1:]:
            if a[0] != b[0] and a[1] <= b[2] and b[1] <= a[2] and a[3] < b[3] + b[4] and b[3] < a[3] + a[4]:
                out.add(frozenset((a[0], b[0])))
    return out


def refit_arena(g, plan) -> None:
    """Make the reported arena size match the (corrupted) placements and tensor sizes, so that
    a size mismatch is never the reason a corruption is rejected."""
    ends = [p.offset + g.t(t).nbytes for t, p in plan.tensors.items() if p.base == "arena"]
    ends += [p.offset + p.size for p in plan.scratch.values()]
    end = max(ends + [0])
    plan.arena_bytes = -(-end // plan.align) * plan.align
