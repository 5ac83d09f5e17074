"""Resource variables that only ever hold a constant, and the MULs they feed, folded at compile
time (frontend/tflite_control.py has turned variables into state tensors and CALL_ONCE into an
IF marked `call_once`).

Keras pruning (tfmot) exports a layer's weights and pruning mask as resource variables that a
CALL_ONCE init subgraph assigns from constants; the main graph reads both and multiplies them
into the FULLY_CONNECTED weights. Such a variable is a constant when its one ASSIGN_VARIABLE
sits directly in the init of a top-level CALL_ONCE, assigns a constant, and every
READ_VARIABLE of it comes after that CALL_ONCE (at the top level or inside a later op's
regions): the init runs before anything reads it, on every first invocation (NAME_reset_state()
runs it again, with the same value), and nothing else writes it. Each such read becomes the
constant (except a read that is a graph output: it stays a copy); a variable nobody reads any
more loses its assignment and its state, and a CALL_ONCE left with nothing to do loses its flag.
Then (passes/fold_constants.py, the first pass) each MUL whose inputs are all constants is evaluated as TFLM's kernel computes it
(float32: the float product clamped to the activation range; int8: (a - zp_a) * (b - zp_b) requantized by
scale_a * scale_b / scale_out, TFLM's MultiplyByQuantizedMultiplier, clamped), so the weights
are constants for the kernels (packed, folded into the bias). A variable written anywhere else
stays a run-time value: FULLY_CONNECTED then reads its weights at run time
(kernels/_fc_runtime.py).
"""
from __future__ import annotations

import numpy as np

from ..ir import Graph


def _walk(ops, top: int | None = None, region=None):
    """(op, index of its top-level op, the region list holding it) for every op, nested too."""
    for k, op in enumerate(ops):
        t = k if top is None else top
        yield op, t, (ops if region is None else region)
        for r in op.regions:
            yield from _walk(r.ops, t, r.ops)


def _constant_variables(g: Graph) -> dict[str, tuple[str, object, list]]:
    """Variable id -> (constant value id, its ASSIGN_VARIABLE, the list holding it)."""
    assigns: dict[str, list] = {}
    for op, top, holder in _walk(g.ops):
        if op.kind == "ASSIGN_VARIABLE" and op.outputs:
            assigns.setdefault(op.outputs[0], []).append((op, top, holder))
    found = {}
    for var, where in assigns.items():
        if len(where) != 1:
            continue
        op, top, holder = where[0]
        owner = g.ops[top]
        value = g.t(op.inputs[0]) if op.inputs and op.inputs[0] is not None else None
        if not (owner.kind == "IF" and owner.attrs.get("call_once") and len(owner.regions) == 2
                and holder is owner.regions[1].ops and value is not None and value.is_const):
            continue
        reads = [(r, t) for r, t, _ in _walk(g.ops) if r.kind == "READ_VARIABLE" and var in r.inputs]
        if all(t > top for _, t in reads):
            found[var] = (value.id, op, holder)
    return found


def _drop(ops: list, op) -> None:
    del ops[next(k for k, o in enumerate(ops) if o is op)]   # by identity, not equality


def _fold_reads(g: Graph) -> None:
    for var, (value, assign, holder) in _constant_variables(g).items():
        data = g.t(value).data
        for op, _, ops in list(_walk(g.ops)):
            if op.kind == "READ_VARIABLE" and var in op.inputs:
                y = g.t(op.outputs[0])
                if y.dtype != g.t(value).dtype or y.size != data.size or y.id in g.outputs:
                    continue   # left to the kernels' checks; a graph output is never a constant
                y.data = np.asarray(data).reshape(y.shape).copy()
                _drop(ops, op)
        if not any(var in op.inputs for op, _, _ in _walk(g.ops)):
            _drop(holder, assign)
            del g.tensors[var]


def _drop_empty_call_once(g: Graph) -> None:
    """A CALL_ONCE whose init has nothing left but setting its own flag: gone, flag and all."""
    keep = []
    for op in g.ops:
        init = op.regions[1].ops if op.kind == "IF" and op.attrs.get("call_once") else None
        if init is not None and len(init) == 1 and init[0].kind == "ASSIGN_VARIABLE" \
                and init[0].outputs == op.inputs \
                and not any(op.inputs[0] in o.inputs for o, _, _ in _walk(g.ops) if o is not op):
            del g.tensors[op.inputs[0]]
            continue
        keep.append(op)
    g.ops = keep


def fold_constant_variables(g: Graph) -> Graph:
    """Module docstring: constant variables' reads become constants (the MULs of constants they
    feed are folded by passes/fold_constants.fold_constant_muls)."""
    _fold_reads(g)
    _drop_empty_call_once(g)
    return g
