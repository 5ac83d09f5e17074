"""TFLM signal ops that track and remove noise: SignalFilterBankSpectralSubtraction and
SignalPCAN (per-channel automatic gain control).

- SpectralSubtraction keeps a per-channel noise estimate from one invocation to the next
  (TFLM: a persistent buffer, zeroed at start and by the interpreter's Reset). Here it is a
  uint32 state tensor that the kernel adds to the graph (_signal.state_tensor: the model file
  has no tensor for it). Per channel, with the
  alternate smoothing on odd channels: estimate = (x << smoothing_bits) * smoothing + estimate
  * (1 - smoothing), >> spectral_subtraction_bits (uint64); the output is the signal minus the
  estimate (clamped to the signal, and the estimate too when `clamping`), never below
  x * min_signal_remaining >> spectral_subtraction_bits. Output 1 is a copy of the estimate.
- PCAN: gain = TFLM's piecewise-quadratic "wide dynamic function" of the noise estimate, read
  from the int16 gain table (4 coefficients per power of two); snr = x * gain >> snr_shift;
  then the shrink curve (quadratic below 2 << 12, linear above).
"""
from __future__ import annotations

from ..templating import render
from . import Lowered, kernel
from ._signal import check_io, const_input, fail, int_attr, operand, state_tensor

U32 = (-2 ** 31, 2 ** 32 - 1)   # TFLM reads these options as int32 into uint32 fields


def _u32(op, name: str) -> int:
    return int_attr(op, name, *U32) & 0xFFFFFFFF


@kernel("CUSTOM:SignalFilterBankSpectralSubtraction", dtypes=("uint32",))
def lower_spectral_subtraction(op, g, ctx):
    check_io(op, g, [("uint32", 1)], [("uint32", 1), ("uint32", 1)])
    x, y, est = g.t(op.inputs[0]), g.t(op.outputs[0]), g.t(op.outputs[1])
    n = int_attr(op, "num_channels", 1, x.size)
    if y.size < n or est.size != n:
        # TFLM copies the estimate output's size out of its num_channels-long buffer
        fail(op, f"outputs {list(y.shape)} and {list(est.shape)}: the first must hold and the "
                 f"second must be num_channels = {n} values")
    state = state_tensor(op, g, "noise_estimate", (n,), "uint32")
    clamping = op.attrs.get("clamping")
    if not isinstance(clamping, (bool, int)):
        fail(op, "option 'clamping' is missing")
    p = dict(n=n, smoothing=_u32(op, "smoothing"), one_minus=_u32(op, "one_minus_smoothing"),
             alt_smoothing=_u32(op, "alternate_smoothing"),
             alt_one_minus=_u32(op, "alternate_one_minus_smoothing"),
             min_remaining=_u32(op, "min_signal_remaining"), clamping=bool(clamping),
             bits=int_attr(op, "smoothing_bits", 0, 31),
             sub_bits=int_attr(op, "spectral_subtraction_bits", 0, 63))
    body = render("kernels/signal_noise.c.j2", which="subtract", **p)
    return Lowered(body=body, inputs=[x.id], outputs=[y.id, est.id], updates=[state],
                   comment=f"SignalFilterBankSpectralSubtraction {n} channels")


# The gain table is read at 4 * msb(x) - 6 + {0, 1, 2}: up to entry 124 for msb 32.
PCAN_LUT_MIN = 4 * 32 - 6 + 3


@kernel("CUSTOM:SignalPCAN", dtypes=("uint32",))
def lower_pcan(op, g, ctx):
    check_io(op, g, [("uint32", 1), ("uint32", 1), ("int16", 1)], [("uint32", 1)])
    x, noise, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
    if noise.size < x.size or y.size != x.size:
        # TFLM copies the output's size from the input, then updates the input's channels
        fail(op, f"input {list(x.shape)}, noise estimate {list(noise.shape)} and output "
                 f"{list(y.shape)}: the output must be the input's size, the estimate at least")
    lut_name, lut = const_input(op, g, ctx, 2, "gain_lut")
    if lut.size < PCAN_LUT_MIN:
        fail(op, f"the gain table has {lut.size} entries, {PCAN_LUT_MIN} are read")
    shift = int_attr(op, "snr_shift", 0, 63)
    ins = [x.id]
    noise_name = operand(op, g, ctx, 1, "noise", ins)
    body = render("kernels/signal_noise.c.j2", which="pcan", n=x.size, lut=lut_name,
                  noise=noise_name, shift=shift)
    return Lowered(body=body, inputs=ins, outputs=[y.id], helpers={"signal_math"},
                   inplace=True, comment=f"SignalPCAN {x.size} channels, >> {shift}")
