"""TFLM signal ops that frame and scale audio: SignalWindow, SignalFftAutoScale, SignalEnergy.

- Window: every frame of the int16 input (the window's length) times the int16 window,
  shifted right by `shift` (arithmetic) and saturated to int16.
- FftAutoScale: shifts the int16 frame left by the most bits that keep its largest magnitude
  within int16 (output 0), and returns that shift (output 1, an int32 scalar the later
  SignalFilterBankSquareRoot undoes). TFLM's MaxAbs16 keeps the running maximum in an int16,
  so a -32768 sample wraps it to -32768; that quirk is reproduced (it only makes the shift 0).
- Energy: |X[i]|^2 of the complex int16 spectrum (re, im interleaved) for start_index <= i <
  end_index, as uint32 (the int32 sum TFLM computes wraps for two -32768 parts; computed in
  uint32 here, the same bits without signed overflow). TFLM leaves the other elements
  untouched (whatever the arena held); eerie-c writes 0 there.
"""
from __future__ import annotations

from ..templating import render
from . import Lowered, kernel
from ._signal import check_io, fail, int_attr, operand


@kernel("CUSTOM:SignalWindow", dtypes=("int16",))
def lower_window(op, g, ctx):
    check_io(op, g, [("int16", None), ("int16", 1)], [("int16", None)])
    x, w, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
    if len(x.shape) < 1 or len(x.shape) != len(y.shape) or x.size != y.size:
        fail(op, f"input {list(x.shape)} and output {list(y.shape)} differ")
    n = w.shape[0]
    if n == 0 or x.size % n:
        fail(op, f"{x.size} input values are not whole frames of the window's {n}")
    shift = int_attr(op, "shift", 0, 31)
    ins = [x.id]
    win = operand(op, g, ctx, 1, "window", ins)
    body = render("kernels/signal_window.c.j2", which="window", frames=x.size // n, n=n,
                  shift=shift, win=win)
    return Lowered(body=body, inputs=ins, outputs=[y.id], macs=x.size, inplace=True,
                   comment=f"SignalWindow {x.size // n} x {n}, >> {shift}")


@kernel("CUSTOM:SignalFftAutoScale", dtypes=("int16",))
def lower_fft_auto_scale(op, g, ctx):
    check_io(op, g, [("int16", 1)], [("int16", 1), ("int32", 0)])
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    if y.size > x.size:
        fail(op, f"output {list(y.shape)} is larger than input {list(x.shape)}")
    body = render("kernels/signal_window.c.j2", which="auto_scale", n=y.size)
    return Lowered(body=body, inputs=[x.id], outputs=[y.id, op.outputs[1]], inplace=True,
                   helpers={"signal_math"}, comment=f"SignalFftAutoScale {y.size}")


@kernel("CUSTOM:SignalEnergy", dtypes=("int16",))
def lower_energy(op, g, ctx):
    check_io(op, g, [("int16", 1)], [("uint32", 1)])
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    bins = y.size
    if x.size < 2 * bins:
        fail(op, f"{x.size} spectrum values hold fewer than the output's {bins} complex bins")
    end = int_attr(op, "end_index", 0, bins)
    start = int_attr(op, "start_index", 0, end)
    body = render("kernels/signal_window.c.j2", which="energy", n=bins, start=start, end=end)
    return Lowered(body=body, inputs=[x.id], outputs=[y.id], macs=2 * (end - start),
                   comment=f"SignalEnergy bins {start}..{end - 1} of {bins}")
