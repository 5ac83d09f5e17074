"""Fuse a residual ADD into the int8 CONV_2D that produces one of its operands.

    z = CONV_2D(x, w, b)            y = CONV_2D_ADD(r, x, w, b)
    y = ADD(r, z)          ->       (z requantized as before, then added to r element by element)

The fused op runs at the convolution's position; z no longer exists as a tensor (one output
pixel of it at a time lives in the kernel's scratch), and the ADD's pass over memory is gone.
Its input 0 is the residual r, which it reads exactly at the element it writes: the kernel is
in place over r (Lowered.inplace), so when nothing after it reads r the planner puts y over r
(plan/lifetimes.py; plan/proof.py checks the rule). In a residual block that removes the third
live tensor: the block's input (r), the first convolution's output (x) and the second's (z).

Conditions (anything else is left alone):
  * the ADD is int8 with per-tensor quantization, both operands activations of the output's
    shape (no broadcasting);
  * the operand z comes from an int8 CONV_2D with constant int8 (not 4-bit) weights, and z is read by that ADD
    only and is not a graph output;
  * the other operand r is defined before the convolution (a graph input or an earlier op's
    output), so the fused op may run where the convolution ran; when both operands qualify,
    the later convolution is fused;
  * no control-flow marker lies between the convolution and the ADD.
When both operands come from convolutions, the later one may first be moved before the other
(see _hoist: a downsampling block's shortcut convolution, so the block's input dies earlier).
The eliminated tensor z stays in g.tensors (no op uses it) as attrs["conv_output"]: the
kernel takes the convolution's output quantization from it.
"""
from __future__ import annotations

from ..ir import Graph, Op


def _per_tensor(t) -> bool:
    return t.quant is not None and len(t.quant.scale) == 1


def _conv_candidate(g: Graph, pos: dict[int, int], add: Op, k: int, order: bool = True):
    """(conv op, residual id) when operand k of `add` can be fused, else None (with
    order=False: whatever the position of the residual's producer)."""
    z, r = add.inputs[k], add.inputs[1 - k]
    conv = g.producer(z)
    if conv is None or conv.kind != "CONV_2D" or conv.outputs != [z] or conv.regions:
        return None
    if len(conv.inputs) < 2 or conv.inputs[0] is None or conv.inputs[1] is None:
        return None
    x, w = g.t(conv.inputs[0]), g.t(conv.inputs[1])
    # (4-bit weights, Tensor.int4: the fused kernel does not read them; the conv keeps its own)
    if x.dtype != "int8" or g.t(z).dtype != "int8" or not w.is_const or w.int4 or x.is_const \
            or x.variable:
        return None
    if len(conv.inputs) > 2 and conv.inputs[2] is not None and not g.t(conv.inputs[2]).is_const:
        return None
    if z in g.outputs or [id(op) for op in g.consumers(z)] != [id(add)]:
        return None
    if not _per_tensor(g.t(z)):
        return None
    rprod = g.producer(r)
    if order and rprod is not None and pos[id(rprod)] >= pos[id(conv)]:
        return None   # the residual is computed after the convolution
    if rprod is None and r not in g.inputs:
        return None
    between = g.ops[pos[id(conv)] + 1:pos[id(add)]]
    if any(op.kind.startswith("CF_") or op.regions for op in between):
        return None
    return conv, r


def _hoist(g: Graph, pos: dict[int, int], first: Op, second: Op) -> bool:
    """Both ADD operands come from convolutions. Fusing into the later one (`second`) keeps
    everything `second` reads live while `first` runs; in a downsampling residual block that
    is the block's input, read by `first`'s producer chain and by the shortcut `second` only.
    When `second` reads nothing made after `first` starts, and one of its inputs is read by
    an op before `first` and by nothing else from `first` on, move `second` just before
    `first`: that input dies there,
    and the ADD is then fused into `first` with `second`'s output as the residual."""
    i, j = pos[id(first)], pos[id(second)]
    if any(op.kind.startswith("CF_") or op.regions for op in g.ops[i:j]):
        return False
    acts = [t for t in second.inputs if t is not None and not g.t(t).is_const]
    for t in acts:
        prod = g.producer(t)
        if prod is not None and pos[id(prod)] >= i:
            return False
    # an input that an earlier op reads too (so it is live anyway until `first`) and that
    # nothing else reads from `first` on
    dies = []
    for t in acts:
        others = [pos[id(op)] for op in g.consumers(t) if op is not second]
        if t not in g.outputs and others and max(others) < i:
            dies.append(t)
    if not dies:
        return False
    del g.ops[j]
    g.ops.insert(i, second)
    return True


def fuse_conv_add(g: Graph) -> Graph:
    changed = True
    while changed:
        changed = False
        pos = {id(op): i for i, op in enumerate(g.ops)}
        for add in g.ops:
            if add.kind != "ADD" or len(add.inputs) != 2 or len(add.outputs) != 1 or add.regions:
                continue
            if any(t is None for t in add.inputs):
                continue
            a, b, y = g.t(add.inputs[0]), g.t(add.inputs[1]), g.t(add.outputs[0])
            if any(t.dtype != "int8" or t.is_const or t.variable or not _per_tensor(t) or
                   tuple(t.shape) != tuple(y.shape) for t in (a, b, y)):
                continue
            if add.inputs[0] == add.inputs[1]:
                continue
            both = [c for c in (_conv_candidate(g, pos, add, k, False) for k in (0, 1)) if c]
            if len(both) == 2 and _hoist(g, pos, *sorted((c[0] for c in both), key=lambda o: pos[id(o)])):
                changed = True   # the later convolution now runs first: fuse into the other
                break
            found = [c for c in (_conv_candidate(g, pos, add, k) for k in (0, 1)) if c is not None]
            if not found:
                continue
            conv, r = max(found, key=lambda c: pos[id(c[0])])
            z = conv.outputs[0]
            attrs = dict(conv.attrs)
            attrs.update(
                conv_output=z,
                # which ADD operand the convolution was (TFLite's input1 / input2 scaling)
                conv_operand=add.inputs.index(z),
                add_activation=add.attrs.get("fused_activation_function", "NONE") or "NONE",
                add_name=add.name)
            attrs.pop("inplace_of_input", None)
            fused = Op("CONV_2D_ADD", [r] + list(conv.inputs), list(add.outputs), attrs,
                       name=conv.name, index=conv.index)
            g.ops[pos[id(conv)]] = fused
            del g.ops[pos[id(add)]]
            changed = True
            break
    return g
