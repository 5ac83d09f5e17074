"""TFLM's Signal library ops that keep samples from one invocation to the next: SignalDelay
and SignalOverlapAdd. Their history lives in a variable tensor that passes/custom_state.py
adds as the op's last input (STATE below gives its shape); it starts, and is reset, to zeros,
as the library's Reset does.

- SignalDelay (int16): each row of the input (its last dimension is one frame) comes out
  delay_length samples later; the first delay_length samples are zeros.
- SignalOverlapAdd (int16, float32): input frames [.., n_frames, frame_size] are added into a
  frame_size buffer (int16 saturates), frame_step samples leave it per frame as output
  [.., n_frames * frame_step] and the rest moves up, zero-filled.
"""
from __future__ import annotations

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


# op kind -> (op, graph) -> (shape, dtype) of the state tensor the op needs
STATE = {"SignalDelay": _delay_state, "SignalOverlapAdd": _overlap_add_state}


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

