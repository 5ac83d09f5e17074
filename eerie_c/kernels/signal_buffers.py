"""TFLM signal ops that buffer audio across invocations: SignalDelay, SignalFramer,
SignalStacker and SignalOverlapAdd (int16, and float32 for OverlapAdd).

TFLM keeps their history in circular buffers (persistent memory, reset by the interpreter's
Reset). Here the history is a state tensor per op (_signal.state_tensor: static, restored by
NAME_reset_state()) kept as a plain queue: the oldest sample first, new samples appended,
consumed samples shifted out. The queue holds the same samples in the same order as TFLM's
circular buffer, so every output is the same; only the bookkeeping differs.

- Delay: each row (the last dimension) delayed by delay_length samples, zeros first.
- Framer: each row cut into frames of frame_size every frame_step samples, carrying the
  remainder to the next call (prefill: frame_size - frame_step zeros to start with); output
  1 is false when some frame is not complete yet (TFLM leaves such a frame's output as it
  was; eerie-c does too).
- Stacker: num_channels values per call into a queue whose first frame is repeated
  stacker_left_context extra times; once it holds (left + right + 1) frames they are output
  (output 1 true) and stacker_step frames are dropped.
- OverlapAdd: each input frame added into the running buffer (int16 saturating), then the
  first frame_step samples are output and shifted out.
"""
from __future__ import annotations

import numpy as np

from ..templating import render
from ..ir import DTYPE_C
from . import Lowered, kernel
from ._signal import check_io, fail, int_attr, state_tensor


def _rows(op, x):
    if not x.shape or x.shape[-1] == 0:
        fail(op, f"input {list(x.shape)} has no samples")
    return x.shape[-1], x.size // x.shape[-1]


@kernel("CUSTOM:SignalDelay", dtypes=("int16",))
def lower_delay(op, g, ctx):
    check_io(op, g, [("int16", None)], [("int16", None)])
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    frame, rows = _rows(op, x)
    if y.size < x.size:
        fail(op, f"output {list(y.shape)} is smaller than input {list(x.shape)}")
    delay = int_attr(op, "delay_length", 0, 1 << 20)
    updates = [state_tensor(op, g, "delay_line", (rows * delay,), "int16")] if delay else []
    body = render("kernels/signal_buffers.c.j2", which="delay", rows=rows, frame=frame, delay=delay)
    return Lowered(body=body, inputs=[x.id], outputs=[y.id], updates=updates,
                   comment=f"SignalDelay {rows} x {frame} by {delay}")


@kernel("CUSTOM:SignalFramer", dtypes=("int16",))
def lower_framer(op, g, ctx):
    check_io(op, g, [("int16", None)], [("int16", None), ("bool", 0)])
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    n, rows = _rows(op, x)
    size = int_attr(op, "frame_size", 1, 1 << 20)
    step = int_attr(op, "frame_step", 1, n)
    if n % step or len(y.shape) != len(x.shape) + 1:
        fail(op, f"input rows of {n} samples in steps of {step}, output {list(y.shape)}: TFLM "
                 f"wants whole steps and one more dimension")
    frames = n // step
    if y.size < rows * frames * size:
        fail(op, f"output {list(y.shape)} has no room for {rows} x {frames} frames of {size}")
    capacity = -(-size // step) * step
    prefill = bool(op.attrs.get("prefill", False))
    buf = state_tensor(op, g, "frame_buffer", (rows * capacity,), "int16")
    fill = state_tensor(op, g, "frame_fill", (1,), "int32",
                        init=np.array([size - step if prefill else 0], np.int32))
    body = render("kernels/signal_buffers.c.j2", which="framer", rows=rows, n=n, frames=frames,
                  size=size, step=step, capacity=capacity)
    return Lowered(body=body, inputs=[x.id], outputs=[y.id, op.outputs[1]], updates=[buf, fill],
                   comment=f"SignalFramer {rows} x {n} -> frames of {size} every {step}")


@kernel("CUSTOM:SignalStacker", dtypes=("int16",))
def lower_stacker(op, g, ctx):
    check_io(op, g, [("int16", 1)], [("int16", 1), ("bool", 0)])
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    channels = int_attr(op, "num_channels", 1, x.size)
    left = int_attr(op, "stacker_left_context", 0, 1 << 10)
    right = int_attr(op, "stacker_right_context", 0, 1 << 10)
    span = left + right + 1
    step = int_attr(op, "stacker_step", 1, span)   # more would drop frames TFLM never had
    if y.size < channels * span:
        fail(op, f"output {list(y.shape)} has no room for {span} frames of {channels}")
    buf = state_tensor(op, g, "stack", (channels * span,), "int16")
    fill = state_tensor(op, g, "stack_fill", (2,), "int32")   # queued values, first frame seen
    body = render("kernels/signal_buffers.c.j2", which="stacker", channels=channels, left=left,
                  span=span, step=step)
    return Lowered(body=body, inputs=[x.id], outputs=[y.id, op.outputs[1]], updates=[buf, fill],
                   comment=f"SignalStacker {channels} channels, context {left} + {right}, step {step}")


@kernel("CUSTOM:SignalOverlapAdd", dtypes=("int16", "float32"))
def lower_overlap_add(op, g, ctx):
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    check_io(op, g, [(x.dtype, None)], [(x.dtype, len(x.shape) - 1)])
    if len(x.shape) < 2:
        fail(op, f"input {list(x.shape)}: TFLM wants [..., frames, frame_size]")
    frames, size = x.shape[-2], x.shape[-1]
    rows = x.size // (frames * size) if frames * size else 0
    step = int_attr(op, "frame_step", 1, size)   # TFLM shifts by frame_size - frame_step
    if y.size < rows * frames * step:
        fail(op, f"output {list(y.shape)} has no room for {rows} x {frames} steps of {step}")
    buf = state_tensor(op, g, "overlap", (rows * size,), x.dtype)
    body = render("kernels/signal_buffers.c.j2", which="overlap_add", rows=rows, frames=frames,
                  size=size, step=step, ctype=DTYPE_C[x.dtype], int16=x.dtype == "int16")
    return Lowered(body=body, inputs=[x.id], outputs=[y.id], updates=[buf],
                   comment=f"SignalOverlapAdd {rows} x {frames} frames of {size}, step {step}")
