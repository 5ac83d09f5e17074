"""Shared checks of the TFLM signal-library custom ops (kernels/signal_*.py).

TFLM's signal ops are CUSTOM operators named "Signal<Op>" whose options are a flexbuffer map
(the frontend reads it into op.attrs). Their Prepare functions check arity, ranks and dtypes;
eerie-c checks the same at compile time, plus every option that the C would use as a shift
count or an index (out of range there would be undefined behaviour or an out-of-bounds read,
where TFLM simply runs off the end).
"""
from __future__ import annotations

import numpy as np

from ..errors import EerieError
from ..ir import DTYPE_C, Tensor


def fail(op, why: str):
    raise EerieError(f"{op.kind} (op {op.index}): {why}")


def check_io(op, g, ins: list[tuple[str, int | None]], outs: list[tuple[str, int | None]]):
    """Arity, then each operand's (dtype, rank) (rank None: any), as TFLM's Prepare checks."""
    if len(op.inputs) < len(ins) or len(op.outputs) != len(outs) \
            or any(op.inputs[k] is None for k in range(len(ins))):
        fail(op, f"{len(op.inputs)} inputs and {len(op.outputs)} outputs, TFLM wants "
                 f"{len(ins)} and {len(outs)}")
    for what, tids, want in (("input", op.inputs, ins), ("output", op.outputs, outs)):
        for k, (dtype, rank) in enumerate(want):
            t = g.t(tids[k])
            if t.dtype != dtype:
                fail(op, f"{what} {k} is {t.dtype}, TFLM wants {dtype}")
            if rank is not None and len(t.shape) != rank:
                fail(op, f"{what} {k} has shape {list(t.shape)}, TFLM wants rank {rank}")


def int_attr(op, name: str, lo: int, hi: int) -> int:
    """An integer option within [lo, hi] (TFLM reads it as int32)."""
    v = op.attrs.get(name)
    if isinstance(v, bool) or not isinstance(v, int):
        fail(op, f"option {name!r} is missing or not an integer")
    if not lo <= v <= hi:
        fail(op, f"option {name} = {v} is outside {lo}..{hi}")
    return int(v)


def operand(op, g, ctx, k: int, hint: str, ins: list[str]) -> str:
    """The C name of input k: a flash constant, or the next in<N> parameter (appended to
    `ins`) when the graph computes it."""
    t = g.t(op.inputs[k])
    if t.is_const:
        return ctx.tensor_const(t, hint)
    ins.append(t.id)
    return f"in{len(ins) - 1}"


def const_input(op, g, ctx, k: int, hint: str):
    """Input k, which eerie-c needs as a constant (its values shape the code or are checked
    for safe indexing): (C name, values)."""
    t = g.t(op.inputs[k])
    if not t.is_const:
        fail(op, f"input {k} must be a constant (eerie-c checks its values at compile time)")
    return ctx.const(t.data.reshape(-1), DTYPE_C[t.dtype], hint), t.data.reshape(-1).astype(int)


def state_tensor(op, g, what: str, shape: tuple, dtype: str, init: np.ndarray | None = None) -> str:
    """A state tensor of this op (TFLM keeps it in a persistent buffer the model file has no
    tensor for): created on first lowering and listed as one more input of the op, so the
    planner gives it static storage outside the arena; NAME_reset_state() restores `init`
    (None: zeros), as TFLM's Reset does. The kernel lists it in Lowered.updates."""
    sid = f"{op.outputs[0]}_{what}"
    if sid not in g.tensors:
        g.tensors[sid] = Tensor(id=sid, shape=tuple(shape), dtype=dtype, variable=True, init=init,
                                label=f"{g.t(op.outputs[0]).label} {what.replace('_', ' ')}")
    if sid not in op.inputs:
        op.inputs.append(sid)
    return sid
