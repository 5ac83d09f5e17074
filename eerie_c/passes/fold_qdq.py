"""Fold the quantize/dequantize pairs of a PT2E program into int8 tensors.

A program quantized with PT2E (`prepare_pt2e`, calibrate, `convert_pt2e`) stays a float
program in which every quantized value makes a round trip: `QUANTIZE` (float -> int8) then
`DEQUANTIZE` (int8 -> float) before the float op that reads it, and weights are int8
constants dequantized at compile time. The PyTorch frontend lowers it as it is; this pass
then rewrites it into the integer program TFLite would have:

* every float tensor made by a DEQUANTIZE has an int8 *view*: the int8 tensor it is exactly
  the dequantization of;
* a float op whose activation inputs all have views, and whose result is read only by a
  QUANTIZE (directly, or through a RELU / RELU6 / RELU_N1_TO_1 that becomes the op's fused
  activation), becomes the same op on int8 tensors writing the QUANTIZE's output. Its weights
  are recovered exactly as int8 from the float constant and the quantizer's scales (checked:
  `q * scale` must give back every float weight bit for bit), its bias becomes int32 with
  scale `input_scale * weight_scale`, as TFLite stores it. The kernels then derive the
  requantization constants at compile time from those scales, exactly as for a TFLite model;
* ops that only move values (reshape, transpose, pooling by max, ...) keep their input's
  quantization; a QUANTIZE of a value that already has a view becomes a rename (same
  parameters) or an int8 -> int8 requantization;
* DEQUANTIZEs nobody reads any more disappear.

What cannot be folded stays a float op between a DEQUANTIZE and a QUANTIZE: a *float
island*. Each one is recorded on the graph (`Graph.float_islands`) with the reason, for the
reports and `eerie-c check`; nothing falls back silently.
"""
from __future__ import annotations

from ..ir import Graph, Op, Tensor
from ._int8_ops import (ACTIVATIONS, FUSES_ACTIVATION, LAYOUT, MOVES_VALUES, PASS_THROUGH, Folder,
                        int8_kernel_exists)


def fold_qdq(g: Graph) -> Graph:
    if not g.quantized_from:   # not a PT2E program: nothing to fold
        return g
    f = _Fold(g)
    f.run()
    return g


class _Fold(Folder):
    def __init__(self, g: Graph):
        super().__init__(g)
        self.readers = g.readers(regions=True)
        self.rename: dict[str, str] = {}    # tensor id -> the id that replaced it
        self.done: set[int] = set()         # ids of ops consumed by a fold (fused act, QUANTIZE)
        self.islands: list[dict] = []

    def run(self):
        g = self.g
        out: list[Op] = []
        for op in g.ops:
            if id(op) in self.done:
                continue
            op.inputs = [self.rename.get(t, t) if t is not None else None for t in op.inputs]
            new = self.visit(op)
            out.extend(new)
        g.ops = self.dequantize_where_read(out)
        g.outputs = [self.rename.get(t, t) for t in g.outputs]
        _fuse_int8_activations(g)
        _drop_dead(g)
        g.float_islands = self.islands_of(g)

    # ---- one op ---------------------------------------------------------------------------

    def visit(self, op: Op) -> list[Op]:
        g = self.g
        if op.kind == "DEQUANTIZE" and self.dtype(op.inputs[0]) in ("int8", "int16"):
            self.view[op.outputs[0]] = op.inputs[0]
            return [op]
        if op.kind == "QUANTIZE" and self.dtype(op.inputs[0]) == "float32":
            return self.visit_quantize(op)
        if not op.outputs or any(self.dtype(t) != "float32" for t in op.outputs):
            return [op]
        acts = [t for t in op.inputs if t is not None and not g.t(t).is_const]
        if len(acts) == 1 and acts[0] not in self.view:
            early = self.quantize_early(op, acts[0])
            if early is not None:
                return early
        if not acts or any(t not in self.view for t in acts):
            return [op]    # reads a float value that is not a dequantized one: stays float
        target = self.quantize_target(op)
        if target is not None:
            act, quant_op, direct = target
            if direct:
                out = quant_op.outputs[0]
            else:   # the layout ops after it run in int8 and reach the QUANTIZE (a rename)
                y = op.outputs[0]
                out = self.fresh(y, self.g.t(y).shape, "int8", self.g.t(quant_op.outputs[0]).quant)
            made = self.fold(op, act, out)
            if made is not None:
                if direct:
                    self.done.add(id(quant_op))
                else:
                    self.view[op.outputs[0]] = out
                if act is not None:   # now the op's clamp: its readers read what it read
                    self.done.add(id(act))
                    self.rename[act.outputs[0]] = act.inputs[0]
                return made
            self.note_island(op, self.why_not)
            return [op]
        # No QUANTIZE after it: an op that only moves values keeps its input's quantization.
        moved = self.fold_moving(op)
        if moved is not None:
            return moved
        self.note_island(op, "its result is not quantized by the quantizer (it is read as float)")
        return [op]

    def quantize_early(self, op: Op, x: str) -> list[Op] | None:
        """A float value that only moves (a zero PAD, a reshape, a transpose) on its way into a
        QUANTIZE, the program's input typically: quantizing commutes with moving values (0
        quantizes to the zero point, which int8 PAD writes), so quantize first and move int8
        bytes: a quarter of the data, and no float op left."""
        g = self.g
        if op.kind not in MOVES_VALUES or len(op.outputs) != 1 or g.t(x).dtype != "float32":
            return None
        if any(t is not None and g.t(t).is_const and g.t(t).dtype == "float32" for t in op.inputs):
            return None   # PADV2's value, say
        q = self.only_reader(op.outputs[0])
        if q is None or q.kind != "QUANTIZE" or self.dtype(q.outputs[0]) != "int8":
            return None
        out = q.outputs[0]
        xq = self.fresh(x, g.t(x).shape, "int8", g.t(out).quant)
        self.done.add(id(q))
        return [Op("QUANTIZE", [x], [xq], dict(q.attrs), q.name, q.index, q.subgraph),
                Op(op.kind, [xq if t == x else t for t in op.inputs], [out], dict(op.attrs), op.name,
                   op.index, op.subgraph)]

    def visit_quantize(self, op: Op) -> list[Op]:
        x, y = op.inputs[0], op.outputs[0]
        v = self.view.get(x)
        if v is None:
            return [op]    # a float value entering the int8 world (the program's input, or an island's result)
        if self.same_quant(self.g.t(v), self.g.t(y)) and y not in self.g.outputs:
            self.rename[y] = v
            return []
        return [self.requantize(op, v, y, op.name)]

    def quantize_target(self, op: Op):
        """(fused activation op or None, the QUANTIZE that fixes the result's parameters,
        whether that QUANTIZE reads the result directly) when op's float result goes only
        into one QUANTIZE: directly, through a fusable activation, or through ops that only
        change the layout (a flatten before a linear layer, the reshapes and transposes
        around a conv1d), which then run in int8 at the same parameters."""
        y = op.outputs[0]
        if len(op.outputs) != 1 or y in self.g.outputs:
            return None
        act = None
        direct = True
        r = self.only_reader(y)
        for _ in range(16):
            if r is not None and r.kind in ACTIVATIONS and act is None and op.kind in FUSES_ACTIVATION \
                    and op.attrs.get("fused_activation_function", "NONE") == "NONE":
                act = r
            elif r is not None and r.kind in PASS_THROUGH:
                direct = False
            else:
                break
            r = self.only_reader(r.outputs[0])
        if r is None or r.kind != "QUANTIZE" or self.dtype(r.outputs[0]) != "int8":
            return None
        return act, r, direct

    def only_reader(self, t: str) -> Op | None:
        rs = self.readers.get(t, [])
        return rs[0] if len(rs) == 1 and t not in self.g.outputs else None

    def dequantize_where_read(self, ops: list[Op]) -> list[Op]:
        """A float value whose producer now runs in int8 (an op that only moves values) but
        that a float op or the program's output still reads: DEQUANTIZE it right after."""
        g = self.g
        made = set(g.inputs) | {t for op in ops for t in op.outputs}
        out: list[Op] = []
        need = {t for op in ops for t in op.inputs if t is not None} | set(g.outputs)
        need = {t for t in need if t not in made and not g.t(t).is_const and not g.t(t).variable}
        for op in ops:
            out.append(op)
            for t in sorted(need):
                if self.view.get(t) in op.outputs:
                    out.append(Op("DEQUANTIZE", [self.view[t]], [t], {}, f"{op.name}_dq", op.index,
                                  op.subgraph))
                    need.discard(t)
        return out

    # ---- float islands -------------------------------------------------------------------

    def note_island(self, op: Op, why: str):
        self.islands.append({"op": op.name, "kind": op.kind, "source": op.attrs.get("torch_source", ""),
                             "reason": why})

    def islands_of(self, g: Graph) -> list[dict]:
        """The float ops left in the program (QUANTIZE / DEQUANTIZE aside), grouped into
        islands: runs of float ops one after another. Each island: its ops and their kinds,
        the source lines that made them, and why its first op was not folded."""
        why = {i["op"]: i["reason"] for i in self.islands}
        islands: list[dict] = []
        last = -2
        for k, op in enumerate(g.ops):
            if op.kind in ("QUANTIZE", "DEQUANTIZE") or op.kind.startswith(("CF_", "DYN_")):
                continue
            if not any(t is not None and g.t(t).dtype == "float32" and not g.t(t).is_const
                       for t in list(op.inputs) + list(op.outputs)):
                continue
            if k != last + 1 or not islands:
                reason = why.get(op.name) or ("no int8 kernel for " + op.kind
                                              if not int8_kernel_exists(op.kind)
                                              else "the quantizer left its inputs in float")
                islands.append({"ops": [], "kinds": [], "sources": [], "reason": reason})
            isl = islands[-1]
            isl["ops"].append(op.name)
            isl["kinds"].append(op.kind)
            src = op.attrs.get("torch_source", "")
            if src and src not in isl["sources"]:
                isl["sources"].append(src)
            last = k
        return islands


def dequantize_last(g: Graph) -> Graph:
    """A DEQUANTIZE whose only reader is a layout op (reshape, transpose): swap them, so the
    values move as int8 (a quarter of the bytes) and the float tensor is made once, at the end.
    cancel_transposes pushes transposes down through DEQUANTIZE to meet their inverses; one
    that met none (the NCHW result of a PyTorch program) ends up here."""
    if not g.quantized_from:
        return g
    changed = True
    while changed:
        changed = False
        readers = g.readers(regions=True)
        pinned = set(g.outputs) | set(g.inputs)
        for k, d in enumerate(g.ops):
            if d.kind != "DEQUANTIZE" or d.outputs[0] in pinned:
                continue
            rs = readers.get(d.outputs[0], [])
            if len(rs) != 1 or rs[0].kind not in LAYOUT or rs[0].inputs[0] != d.outputs[0] \
                    or len(rs[0].outputs) != 1 or rs[0].regions:
                continue
            u = rs[0]
            x, y = g.t(d.inputs[0]), g.t(u.outputs[0])
            z = f"{y.id}_int8"
            while z in g.tensors:
                z += "_"
            g.tensors[z] = Tensor(z, y.shape, x.dtype, y.label, x.quant)
            j = next(i for i, o in enumerate(g.ops) if o is u)
            g.ops[k] = Op(u.kind, [x.id] + list(u.inputs[1:]), [z], dict(u.attrs), u.name, u.index, u.subgraph)
            g.ops[j] = Op("DEQUANTIZE", [z], [y.id], {}, d.name, d.index, d.subgraph)
            del g.tensors[d.outputs[0]]
            changed = True
            break
    return g


def quantization_report(g: Graph) -> dict:
    """report.json's "quantization" section for a PT2E program: int8 and float op counts, the
    quantization step of each output (the scale its final DEQUANTIZE reads; 0 for an output
    computed in float), and the float islands."""
    def is_float(op):
        return any(t is not None and g.t(t).dtype == "float32" and not g.t(t).is_const
                   for t in list(op.inputs) + list(op.outputs))
    compute = [op for op in g.ops if op.kind not in ("QUANTIZE", "DEQUANTIZE")
               and not op.kind.startswith(("CF_", "DYN_"))]
    steps = []
    for out in g.outputs:
        p = next((op for op in g.ops if out in op.outputs), None)
        steps.append(float(g.t(p.inputs[0]).scale) if p is not None and p.kind == "DEQUANTIZE" else 0.0)
    return {"from": g.quantized_from, "int8_ops": sum(1 for op in compute if not is_float(op)),
            "float_ops": sum(1 for op in compute if is_float(op)), "output_steps": steps,
            "float_islands": list(g.float_islands)}


def _fuse_int8_activations(g: Graph):
    """An int8 RELU / RELU6 / RELU_N1_TO_1 whose input and output share their parameters (a
    quantizer that annotates conv and relu apart, as ExecuTorch's does without channels-last)
    is the fused clamp of the op before it, when that op's result is read by nothing else."""
    readers = g.readers(regions=True)
    producer = {t: op for op in g.ops for t in op.outputs}
    drop = set()
    for op in g.ops:
        if op.kind not in ACTIVATIONS or g.t(op.outputs[0]).dtype != "int8":
            continue
        x, y = op.inputs[0], op.outputs[0]
        p = producer.get(x)
        if p is None or p.kind not in FUSES_ACTIVATION or len(p.outputs) != 1 \
                or p.attrs.get("fused_activation_function", "NONE") != "NONE" \
                or len(readers.get(x, [])) != 1 or x in g.outputs or x in g.inputs \
                or not Folder.same_quant(g.t(x), g.t(y)):
            continue
        p.outputs = [y]
        p.attrs = {**p.attrs, "fused_activation_function": op.kind}
        drop.add(id(op))
    g.ops = [op for op in g.ops if id(op) not in drop]


def _drop_dead(g: Graph):
    """Remove ops whose outputs nobody reads (folded-away DEQUANTIZEs) and unused tensors."""
    while True:
        read = set(g.outputs)
        for op in g.ops:
            read.update(t for t in op.inputs if t is not None)
        keep = [op for op in g.ops
                if op.regions or op.kind.startswith(("CF_", "DYN_")) or op.attrs.get("rewrites")
                or any(t in read or g.t(t).variable for t in op.outputs)]
        if len(keep) == len(g.ops):
            break
        g.ops = keep
    used = set(g.inputs) | set(g.outputs)

    def use(ops):
        for op in ops:
            used.update(t for t in list(op.inputs) + list(op.outputs) if t is not None)
            for reg in op.regions:
                used.update(reg.inputs)
                used.update(reg.outputs)
                use(reg.ops)
    use(g.ops)
    for tid in [t for t in g.tensors if t not in used]:
        del g.tensors[tid]
