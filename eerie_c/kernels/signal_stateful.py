"""TFLM's Signal library ops that keep samples from one invocation to the next: SignalDelay,
SignalOverlapAdd, SignalFramer, SignalStacker and SignalFilterBankSpectralSubtraction. Their history lives in a variable tensor that passes/custom_state.py
adds as the op's last input (STATE below gives its shape); it starts, and is reset, to zeros,
as the library's Reset does.

- SignalDelay (int16): each row of the input (its last dimension is one frame) comes out
  delay_length samples later; the first delay_length samples are zeros.
- SignalOverlapAdd (int16, float32): input frames [.., n_frames, frame_size] are added into a
  frame_size buffer (int16 saturates), frame_step samples leave it per frame as output
  [.., n_frames * frame_step] and the rest moves up, zero-filled.
- SignalFramer (int16): each row's input [.., n_frames * frame_step] is appended frame_step at a
  time to a FIFO (prefilled with frame_size - frame_step zeros when `prefill`); whenever it
  holds frame_size samples they are the next output frame [.., n_frames, frame_size] and
  frame_step of them leave. output_valid (bool) is false when a frame was not complete
  (its output slot is then 0 here; TFLM leaves it).
- SignalStacker (int16): the input frame of num_channels is appended (the very first one
  left_context + 1 times); once the FIFO holds left + right + 1 frames they are the output,
  stacker_step frames leave and output_valid is true.
- SignalFilterBankSpectralSubtraction (uint32): a per-channel noise estimate (the state)
  smoothed towards the input (alternate coefficients on odd channels), subtracted from it
  with a floor of min_signal_remaining; the estimate is the second output.
The library's circular buffers are plain FIFOs here (oldest sample first, moved down on
removal); the state tensor holds the samples, then their count (and for the stacker a
first-frame flag).
"""
from __future__ import annotations

import numpy as np

from ..errors import EerieError
from . import Lowered, kernel


def _opt(op, name, index, default=None):
    vec = op.attrs.get("custom_vector") or []
    v = op.attrs.get(name, vec[index] if len(vec) > index else default)
    if v is None:
        raise EerieError(f"{op.kind} (op {op.index}): option {name!r} missing")
    return int(v)


def _delay_state(op, g):
    x = g.t(op.inputs[0])
    frame = int(x.shape[-1]) if x.shape else 1
    return [x.size // max(frame, 1), _opt(op, "delay_length", 0)], "int16"


def _overlap_add_state(op, g):
    x = g.t(op.inputs[0])
    if len(x.shape) < 2:
        raise EerieError(f"SignalOverlapAdd (op {op.index}): input needs [.., frames, frame_size]")
    frame = int(x.shape[-1])
    return [x.size // (frame * int(x.shape[-2])), frame], x.dtype


def _framer_geometry(op, g):
    x = g.t(op.inputs[0])
    size, step = _opt(op, "frame_size", 0), _opt(op, "frame_step", 1)
    if step <= 0 or size <= 0 or not x.shape or x.shape[-1] % step:
        raise EerieError(f"SignalFramer (op {op.index}): frames of {size} every {step} samples "
                         f"do not fit rows of {x.shape[-1] if x.shape else 0}")
    capacity = (size + step - 1) // step * step
    return int(x.size // x.shape[-1]), size, step, capacity


def _framer_state(op, g):
    rows, size, step, capacity = _framer_geometry(op, g)
    return [rows, capacity + 1], "int16"


def _framer_init(op, g):
    rows, size, step, capacity = _framer_geometry(op, g)
    init = np.zeros((rows, capacity + 1), np.int16)
    if op.attrs.get("prefill", (op.attrs.get("custom_vector") or [0, 0, False])[2]):
        init[:, capacity] = size - step       # that many zeros already queued
    return init


def _stacker_geometry(op):
    c, left = _opt(op, "num_channels", 0), _opt(op, "stacker_left_context", 1)
    right, step = _opt(op, "stacker_right_context", 2), _opt(op, "stacker_step", 3)
    if c <= 0 or left < 0 or right < 0 or not 0 < step <= left + right + 1:
        raise EerieError(f"SignalStacker (op {op.index}): {c} channels, context {left} + "
                         f"{right}, step {step}")
    return c, left, right, step


def _stacker_state(op, g):
    c, left, right, step = _stacker_geometry(op)
    return [c * (left + right + 1) + 2], "int16"


SPECTRAL_KEYS = ("alternate_one_minus_smoothing", "alternate_smoothing", "clamping",
                 "min_signal_remaining", "num_channels", "one_minus_smoothing", "smoothing",
                 "smoothing_bits", "spectral_subtraction_bits")


def _spectral_state(op, g):
    return [g.t(op.inputs[0]).size], "uint32"


# op kind -> (op, graph) -> (shape, dtype) of the state tensor the op needs
STATE = {"SignalDelay": _delay_state, "SignalOverlapAdd": _overlap_add_state,
         "SignalFramer": _framer_state, "SignalStacker": _stacker_state,
         "SignalFilterBankSpectralSubtraction": _spectral_state}
# op kind -> (op, graph) -> initial state contents, where not all zeros
STATE_INIT = {"SignalFramer": _framer_init}


@kernel("SignalDelay", dtypes=("int16",))
def lower_delay(op, g, ctx):
    x, st, y = g.t(op.inputs[0]), g.t(op.inputs[-1]), g.t(op.outputs[0])
    if not (x.dtype == y.dtype == "int16" and x.size == y.size and st.variable):
        raise EerieError(f"SignalDelay (op {op.index}): int16 in and out of one size")
    rows, d = st.shape
    f = x.size // rows
    if d == 0:
        return Lowered(body=f"memcpy(out0, in0, {x.size} * sizeof(int16_t));", inputs=[x.id],
                       outputs=[y.id])
    body = (f"int r, i;\n"
            f"for (r = 0; r < {rows}; ++r) {{\n"
            f"    int16_t *h = state0 + r * {d};          /* the last {d} samples of this row */\n"
            f"    const int16_t *x = in0 + r * {f};\n"
            f"    int16_t *y = out0 + r * {f};\n"
            f"    /* the output is (history, input) from its start; the history its last {d} */\n"
            f"    for (i = 0; i < {f}; ++i) {{\n"
            f"        y[i] = i < {d} ? h[i] : x[i - {d}];\n"
            f"    }}\n"
            f"    for (i = 0; i < {d}; ++i) {{\n"
            f"        h[i] = i + {f} < {d} ? h[i + {f}] : x[i + {f} - {d}];\n"
            f"    }}\n"
            f"}}")
    return Lowered(body=body, inputs=[x.id], outputs=[y.id], updates=[st.id])


@kernel("SignalOverlapAdd", dtypes=("int16", "float32"))
def lower_overlap_add(op, g, ctx):
    x, st, y = g.t(op.inputs[0]), g.t(op.inputs[-1]), g.t(op.outputs[0])
    step = _opt(op, "frame_step", 1)
    tensor_type = op.attrs.get("T", {"int16": 7, "float32": 0}.get(x.dtype))
    if tensor_type != {"int16": 7, "float32": 0}.get(x.dtype):
        raise EerieError(f"SignalOverlapAdd (op {op.index}): option T = {tensor_type} does not "
                         f"name the input's {x.dtype} (TFLM picks its kernel by T)")
    rows, size = st.shape
    frames = int(x.shape[-2])
    if not (x.dtype == y.dtype == st.dtype and 0 < step <= size
            and y.size == rows * frames * step):
        raise EerieError(f"SignalOverlapAdd (op {op.index}): {list(x.shape)} frames with step "
                         f"{step} do not give {list(y.shape)}")
    t = x.ctype
    if x.dtype == "int16":
        add = ("const int32_t v = (int32_t)b[i] + x[i];\n"
               "            b[i] = (int16_t)(v < -32768 ? -32768 : (v > 32767 ? 32767 : v));")
    else:
        add = "b[i] += x[i];"
    zero = "0" if x.dtype == "int16" else "0.0f"
    body = (f"int r, k, i;\n"
            f"for (r = 0; r < {rows}; ++r) {{\n"
            f"    {t} *b = state0 + r * {size};\n"
            f"    for (k = 0; k < {frames}; ++k) {{\n"
            f"        const {t} *x = in0 + (r * {frames} + k) * {size};\n"
            f"        for (i = 0; i < {size}; ++i) {{\n"
            f"            {add}\n"
            f"        }}\n"
            f"        memcpy(out0 + (r * {frames} + k) * {step}, b, {step} * sizeof({t}));\n"
            f"        memmove(b, b + {step}, {size - step} * sizeof({t}));\n"
            f"        for (i = {size - step}; i < {size}; ++i) {{\n"
            f"            b[i] = {zero};\n"
            f"        }}\n"
            f"    }}\n"
            f"}}")
    return Lowered(body=body, inputs=[x.id], outputs=[y.id], updates=[st.id])



@kernel("SignalFramer", dtypes=("int16",))
def lower_framer(op, g, ctx):
    x, st = g.t(op.inputs[0]), g.t(op.inputs[-1])
    y, valid = g.t(op.outputs[0]), g.t(op.outputs[1])
    rows, size, step, cap = _framer_geometry(op, g)
    frames = int(x.shape[-1]) // step
    if not (x.dtype == y.dtype == "int16" and valid.dtype == "bool"
            and y.size == rows * frames * size):
        raise EerieError(f"SignalFramer (op {op.index}): output {list(y.shape)} does not hold "
                         f"{rows} x {frames} frames of {size}")
    body = (f"int r, k;\n"
            f"out1[0] = 1;\n"
            f"for (r = 0; r < {rows}; ++r) {{\n"
            f"    int16_t *q = state0 + r * {cap + 1};     /* queued samples, oldest first */\n"
            f"    int16_t *count = q + {cap};\n"
            f"    for (k = 0; k < {frames}; ++k) {{\n"
            f"        memcpy(q + *count, in0 + (r * {frames} + k) * {step}, {step} * sizeof(int16_t));\n"
            f"        *count += {step};\n"
            f"        if (*count >= {size}) {{\n"
            f"            memcpy(out0 + (r * {frames} + k) * {size}, q, {size} * sizeof(int16_t));\n"
            f"            memmove(q, q + {step}, (size_t)(*count - {step}) * sizeof(int16_t));\n"
            f"            *count -= {step};\n"
            f"        }} else {{\n"
            f"            memset(out0 + (r * {frames} + k) * {size}, 0, {size} * sizeof(int16_t));\n"
            f"            out1[0] = 0;\n"
            f"        }}\n"
            f"    }}\n"
            f"}}")
    return Lowered(body=body, inputs=[x.id], outputs=[y.id, valid.id], updates=[st.id])


@kernel("SignalStacker", dtypes=("int16",))
def lower_stacker(op, g, ctx):
    x, st = g.t(op.inputs[0]), g.t(op.inputs[-1])
    y, valid = g.t(op.outputs[0]), g.t(op.outputs[1])
    c, left, right, step = _stacker_geometry(op)
    size = c * (left + right + 1)
    if not (x.dtype == y.dtype == "int16" and valid.dtype == "bool" and x.size == c
            and y.size == size):
        raise EerieError(f"SignalStacker (op {op.index}): {x.size} channels in, {y.size} out; "
                         f"expected {c} and {size}")
    body = (f"int k;\n"
            f"int16_t *count = state0 + {size};\n"
            f"int16_t *started = state0 + {size + 1};\n"
            f"/* the first frame goes in {left + 1} times (its left context), later ones once */\n"
            f"for (k = 0; k < {left + 1}; ++k) {{\n"
            f"    if (k == 0 || !*started) {{\n"
            f"        memcpy(state0 + *count, in0, {c} * sizeof(int16_t));\n"
            f"        *count += {c};\n"
            f"    }}\n"
            f"}}\n"
            f"*started = 1;\n"
            f"if (*count >= {size}) {{\n"
            f"    memcpy(out0, state0, {size} * sizeof(int16_t));\n"
            f"    memmove(state0, state0 + {step * c}, (size_t)(*count - {step * c}) * sizeof(int16_t));\n"
            f"    *count -= {step * c};\n"
            f"    out1[0] = 1;\n"
            f"}} else {{\n"
            f"    memset(out0, 0, {size} * sizeof(int16_t));\n"
            f"    out1[0] = 0;\n"
            f"}}")
    return Lowered(body=body, inputs=[x.id], outputs=[y.id, valid.id], updates=[st.id])


@kernel("SignalFilterBankSpectralSubtraction", dtypes=("uint32",))
def lower_spectral_subtraction(op, g, ctx):
    x, st = g.t(op.inputs[0]), g.t(op.inputs[-1])
    y, noise = g.t(op.outputs[0]), g.t(op.outputs[1])
    o = {k: _opt(op, k, i, 0) for i, k in enumerate(SPECTRAL_KEYS)}
    n = x.size
    if not (x.dtype == y.dtype == noise.dtype == "uint32" and y.size == noise.size == n
            and o["num_channels"] == n):
        raise EerieError(f"{op.kind} (op {op.index}): {n} uint32 channels in, "
                         f"{o['num_channels']} configured")
    if not (0 <= o["smoothing_bits"] < 32 and 0 <= o["spectral_subtraction_bits"] < 64):
        raise EerieError(f"{op.kind} (op {op.index}): shifts out of range")
    sb, ssb = o["smoothing_bits"], o["spectral_subtraction_bits"]

    def u32(v):
        return f"{v & 0xFFFFFFFF}u"
    clamp = ("            e[i] = est;   /* clamping */\n" if o["clamping"] else "")
    body = (f"int i;\n"
            f"uint32_t *const e = state0;     /* the noise estimate per channel */\n"
            f"for (i = 0; i < {n}; ++i) {{\n"
            f"    /* odd channels use the alternate smoothing */\n"
            f"    const uint32_t sm = (i & 1) ? {u32(o['alternate_smoothing'])} : {u32(o['smoothing'])};\n"
            f"    const uint32_t om = (i & 1) ? {u32(o['alternate_one_minus_smoothing'])} : "
            f"{u32(o['one_minus_smoothing'])};\n"
            f"    const uint32_t up = in0[i] << {sb};\n"
            f"    uint32_t est, floor_, sub;\n"
            f"    e[i] = (uint32_t)(((uint64_t)up * sm + (uint64_t)e[i] * om) >> {ssb});\n"
            f"    est = e[i];\n"
            f"    if (est > up) {{\n"
            f"        est = up;\n"
            f"{clamp}"
            f"    }}\n"
            f"    floor_ = (uint32_t)(((uint64_t)in0[i] * {u32(o['min_signal_remaining'])}) >> {ssb});\n"
            f"    sub = (up - est) >> {sb};\n"
            f"    out0[i] = sub > floor_ ? sub : floor_;\n"
            f"}}\n"
            f"memcpy(out1, e, {n} * sizeof(uint32_t));")
    return Lowered(body=body, inputs=[x.id], outputs=[y.id, noise.id], updates=[st.id])
