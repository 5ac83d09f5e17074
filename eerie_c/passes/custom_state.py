"""Stateful custom ops (the Signal library's SignalDelay, SignalOverlapAdd) keep history across
invocations inside TFLM's kernel; here that history is a variable tensor (static state
storage, reset to its initial contents by NAME_reset_state) appended as the op's last input, so the memory
plan and its proof see it like any other state."""
from ..ir import Graph, Tensor
from ..kernels.signal_stateful import STATE, STATE_INIT


def add_custom_state(g: Graph) -> Graph:
    for op in g.ops:
        if op.kind in STATE and not any(t is not None and g.t(t).variable for t in op.inputs):
            shape, dtype = STATE[op.kind](op, g)
            tid = f"{op.outputs[0]}_state"
            init = STATE_INIT[op.kind](op, g) if op.kind in STATE_INIT else None
            g.tensors[tid] = Tensor(id=tid, shape=tuple(int(n) for n in shape), dtype=dtype,
                                    label=f"{op.kind} state", variable=True, init=init)
            op.inputs = list(op.inputs) + [tid]
    return g
