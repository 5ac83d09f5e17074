"""TFLM's Signal library (audio front-end custom ops), the stateless ones:

- SignalWindow: int16 frames times an int16 window, >> shift, saturated to int16 (the window
  repeats along the input);
- SignalEnergy: |re|^2 + |im|^2 of an int16 complex spectrum into uint32, for the bins
  [start_index, end_index) (TFLM leaves the others unwritten; they are 0 here);
- SignalFftAutoScale: the int16 input shifted left as far as its largest magnitude allows,
  and that shift (int32 scalar) as the second output;
- SignalFilterBankSquareRoot: the library's integer square root of uint64 channel energies,
  >> scale_bits (an int32 scalar tensor), into uint32;
- SignalFilterBank: uint32 spectrum bins into uint64 mel channels; each channel adds its band
  times the triangular weights and the previous channel's band times the "unweights" (the
  library's two accumulators, channel 0 being scratch). The band tables are constants, so the
  terms are listed here and the C is one loop over them (uint64 sums wrap like the library's);
- SignalPCAN: per-channel automatic gain control: a gain from the noise estimate through the
  library's piecewise-polynomial "wide dynamic function" table, snr = (input * gain) >>
  snr_shift, then the "shrink" curve (x^2 / 4 below 2, x - 1 above; 12 -> 6 fraction bits);
- SignalFilterBankLog: the library's fixed-point natural log of uint32 channels (<< the input
  correction bits, wrapping), times output_scale / 2^16, saturated to int16 (0 for inputs
  <= 1). Its log2 correction table (log2(1 + f) - f at 129 points, Q16) is computed here.
Options come from the op's flexbuffer map (frontend/tflite.py). The integer arithmetic is the
library's, including its wrap-arounds (the energy of -32768 + -32768i wraps in int32 there,
and its uint32 bits are the same here) and the 32-bit square-root shortcut.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import EerieError
from . import Lowered, kernel


def _need(op, cond, msg):
    if not cond:
        raise EerieError(f"{op.kind} (op {op.index}): {msg}")


@kernel("SignalWindow", dtypes=("int16",))
def lower_window(op, g, ctx):
    x, w, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
    _need(op, x.dtype == w.dtype == y.dtype == "int16" and len(w.shape) == 1
          and x.size == y.size and w.size and x.size % w.size == 0,
          "int16 frames, a 1-D int16 window dividing them, an int16 output")
    shift = int(op.attrs.get("shift", (op.attrs.get("custom_vector") or [0])[0]))
    _need(op, 0 <= shift < 32, f"shift {shift}")
    inputs = [x.id]
    if w.is_const:
        win = ctx.tensor_const(w, "window")
    else:
        inputs.append(w.id)
        win = "in1"
    n, m = x.size, w.size
    body = (f"int i;\n"
            f"for (i = 0; i < {n}; ++i) {{\n"
            f"    int32_t v = ((int32_t)in0[i] * {win}[i % {m}]) >> {shift};\n"
            f"    v = v < -32768 ? -32768 : (v > 32767 ? 32767 : v);\n"
            f"    out0[i] = (int16_t)v;\n"
            f"}}")
    return Lowered(body=body, inputs=inputs, outputs=[y.id])


@kernel("SignalEnergy", dtypes=("int16",))
def lower_energy(op, g, ctx):
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    _need(op, x.dtype == "int16" and y.dtype == "uint32" and len(x.shape) == len(y.shape) == 1,
          "a 1-D int16 complex spectrum in, a 1-D uint32 energy out")
    vec = op.attrs.get("custom_vector") or []
    end = int(op.attrs.get("end_index", vec[0] if vec else y.size))
    start = int(op.attrs.get("start_index", vec[1] if len(vec) > 1 else 0))
    _need(op, 0 <= start <= end <= y.size and 2 * end <= x.size,
          f"bins [{start}, {end}) outside the {y.size} outputs / {x.size // 2} input bins")
    body = (f"int i;\n"
            f"for (i = 0; i < {y.size}; ++i) {{\n"
            f"    out0[i] = 0;\n"
            f"}}\n"
            f"for (i = {start}; i < {end}; ++i) {{\n"
            f"    const int32_t re = in0[2 * i], im = in0[2 * i + 1];\n"
            f"    /* the library sums in int32; the same bits, without signed overflow */\n"
            f"    out0[i] = (uint32_t)(re * re) + (uint32_t)(im * im);\n"
            f"}}")
    return Lowered(body=body, inputs=[x.id], outputs=[y.id])


@kernel("SignalFftAutoScale", dtypes=("int16",))
def lower_fft_auto_scale(op, g, ctx):
    x, y, s = g.t(op.inputs[0]), g.t(op.outputs[0]), g.t(op.outputs[1])
    _need(op, x.dtype == y.dtype == "int16" and s.dtype == "int32" and s.size == 1
          and x.size == y.size, "int16 in and out and an int32 scale")
    n = x.size
    body = (f"int i, bits;\n"
            f"int16_t max = 0;\n"
            f"uint32_t m;\n"
            f"/* the largest magnitude, as the library finds it (-(-32768) wraps to -32768) */\n"
            f"for (i = 0; i < {n}; ++i) {{\n"
            f"    if (in0[i] > max) {{\n"
            f"        max = in0[i];\n"
            f"    }} else if (-in0[i] > max) {{\n"
            f"        max = (int16_t)-in0[i];\n"
            f"    }}\n"
            f"}}\n"
            f"/* 15 minus its bit count: the left shift that keeps it in int16 */\n"
            f"m = (uint32_t)(int32_t)max;\n"
            f"for (bits = 32; bits > 0; --bits) {{\n"
            f"    if ((m >> (bits - 1)) & 1u) {{\n"
            f"        break;\n"
            f"    }}\n"
            f"}}\n"
            f"bits = m == 0 ? -1 : 15 - bits;\n"
            f"bits = bits < 0 ? 0 : bits;\n"
            f"for (i = 0; i < {n}; ++i) {{\n"
            f"    out0[i] = (int16_t)(in0[i] * (1 << bits));\n"
            f"}}\n"
            f"out1[0] = bits;")
    return Lowered(body=body, inputs=[x.id], outputs=[y.id, s.id])


@kernel("SignalFilterBankSquareRoot", dtypes=("uint64",))
def lower_filter_bank_sqrt(op, g, ctx):
    x, sb, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
    _need(op, x.dtype == "uint64" and sb.dtype == "int32" and sb.size == 1
          and y.dtype == "uint32" and x.size == y.size, "uint64 energies, an int32 scale, uint32 out")
    inputs = [x.id]
    if sb.is_const:
        shift = str(int(sb.data.reshape(-1)[0]))
    else:
        inputs.append(sb.id)
        shift = "in1[0]"
    body = (f"int i;\n"
            f"const int32_t s = {shift};\n"
            f"for (i = 0; i < {x.size}; ++i) {{\n"
            f"    const uint32_t r = eerie_sqrt64(in0[i]);\n"
            f"    out0[i] = s >= 0 && s < 32 ? r >> s : 0;\n"
            f"}}")
    return Lowered(body=body, inputs=inputs, outputs=[y.id], helpers={"signal_sqrt"})


def log2_correction_table() -> np.ndarray:
    """log2(1 + i/128) - i/128 in Q16, rounded, for i = 0..128, and a padding 0."""
    v = [int(math.floor(65536 * (math.log2(1 + i / 128) - i / 128) + 0.5)) for i in range(129)]
    return np.array(v + [0], np.uint16)


@kernel("SignalFilterBankLog", dtypes=("uint32",))
def lower_filter_bank_log(op, g, ctx):
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    _need(op, x.dtype == "uint32" and y.dtype == "int16" and len(x.shape) == len(y.shape) == 1
          and x.size == y.size, "1-D uint32 channels in, int16 out")
    vec = op.attrs.get("custom_vector") or []
    corr = int(op.attrs.get("input_correction_bits", vec[0] if vec else 0))
    scale = int(op.attrs.get("output_scale", vec[1] if len(vec) > 1 else 1))
    _need(op, 0 <= corr < 32, f"input_correction_bits {corr}")
    lut = ctx.const(log2_correction_table(), "uint16_t", "log2_lut",
                    "log2(1 + i/128) - i/128, Q16")
    body = (f"int i, msb;\n"
            f"for (i = 0; i < {x.size}; ++i) {{\n"
            f"    const uint32_t v = in0[i] << {corr};\n"
            f"    uint32_t ln;\n"
            f"    int32_t frac, c0, c1;\n"
            f"    uint32_t seg;\n"
            f"    if (v <= 1) {{\n"
            f"        out0[i] = 0;\n"
            f"        continue;\n"
            f"    }}\n"
            f"    for (msb = 32; msb > 0; --msb) {{\n"
            f"        if ((v >> (msb - 1)) & 1u) {{\n"
            f"            break;\n"
            f"        }}\n"
            f"    }}\n"
            f"    /* log2 = (msb - 1) + fraction: the mantissa in Q16 plus the table's correction */\n"
            f"    frac = (int32_t)(v - ((uint32_t)1 << (msb - 1)));\n"
            f"    frac = msb - 1 < 16 ? frac * (1 << (16 - (msb - 1))) : frac >> ((msb - 1) - 16);\n"
            f"    seg = (uint32_t)frac >> 9;\n"
            f"    c0 = {lut}[seg];\n"
            f"    c1 = {lut}[seg + 1];\n"
            f"    ln = ((uint32_t)(msb - 1) << 16) + (uint32_t)(frac + c0 + (((c1 - c0) * (frac - (int32_t)(512 * seg))) >> 16));\n"
            f"    /* to a natural log (x 45426 / 2^16 = ln 2), then to the output scale */\n"
            f"    ln = (uint32_t)((UINT64_C(45426) * ln + 32768u) >> 16);\n"
            f"    ln = ({scale}u * ln + 32768u) >> 16;\n"
            f"    out0[i] = (int16_t)(ln < 32767u ? ln : 32767u);\n"
            f"}}")
    return Lowered(body=body, inputs=[x.id], outputs=[y.id])


@kernel("SignalFilterBank", dtypes=("uint32",))
def lower_filter_bank(op, g, ctx):
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    tables = [g.t(t) for t in op.inputs[1:6]]
    _need(op, len(tables) == 5 and all(t.is_const and t.dtype == "int16" for t in tables),
          "weights, unweights and the channel start / weight start / width tables must be "
          "constant int16 tensors")
    _need(op, x.dtype == "uint32" and y.dtype == "uint64" and len(x.shape) == len(y.shape) == 1,
          "1-D uint32 spectrum in, uint64 channels out")
    w, uw, fs, ws, wd = (np.asarray(t.data).reshape(-1).astype(np.int64) for t in tables)
    n = int(op.attrs.get("num_channels", (op.attrs.get("custom_vector") or [y.size])[0]))
    _need(op, n == y.size and len(fs) >= n + 1 and len(ws) >= n + 1 and len(wd) >= n + 1,
          f"{n} channels for an output of {y.size} and tables of {len(fs)}")
    t_out, t_in, t_w = [], [], []
    for ch in range(n + 1):
        for j in range(int(wd[ch])):
            f, k = int(fs[ch] + j), int(ws[ch] + j)
            _need(op, 0 <= f < x.size and 0 <= k < min(len(w), len(uw)),
                  f"channel {ch} reads bin {f} / weight {k} out of range")
            if ch >= 1:                         # weighted into this channel
                t_out.append(ch - 1), t_in.append(f), t_w.append(int(w[k]))
            if ch < n:                          # unweighted into the next one
                t_out.append(ch), t_in.append(f), t_w.append(int(uw[k]))
    if not t_out:
        return Lowered(body=f"memset(out0, 0, {y.size} * sizeof(uint64_t));", inputs=[x.id],
                       outputs=[y.id])
    c_out = ctx.const(np.array(t_out, np.int16), "int16_t", "term_channel", "output channel per term")
    c_in = ctx.const(np.array(t_in, np.int16), "int16_t", "term_bin", "spectrum bin per term")
    c_w = ctx.const(np.array(t_w, np.int16), "int16_t", "term_weight", "weight or unweight per term")
    body = (f"int i;\n"
            f"memset(out0, 0, {y.size} * sizeof(uint64_t));\n"
            f"/* every (channel, bin, weight) term of the triangular filters */\n"
            f"for (i = 0; i < {len(t_out)}; ++i) {{\n"
            f"    out0[{c_out}[i]] += (uint64_t)(int64_t){c_w}[i] * (uint64_t)in0[{c_in}[i]];\n"
            f"}}")
    return Lowered(body=body, inputs=[x.id], outputs=[y.id])


PCAN_LUT_MIN = 4 * 32 - 6 + 3     # the table entries a 32-bit noise estimate can reach


@kernel("SignalPCAN", dtypes=("uint32",))
def lower_pcan(op, g, ctx):
    x, noise, lut, y = (g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.inputs[2]),
                        g.t(op.outputs[0]))
    _need(op, x.dtype == noise.dtype == y.dtype == "uint32" and lut.dtype == "int16"
          and x.size == noise.size == y.size, "uint32 channels and noise, an int16 gain table")
    _need(op, lut.size >= PCAN_LUT_MIN, f"gain table of {lut.size} entries; a 32-bit noise "
          f"estimate reads up to {PCAN_LUT_MIN}")
    shift = int(op.attrs.get("snr_shift", (op.attrs.get("custom_vector") or [0])[0]))
    _need(op, 0 <= shift < 64, f"snr_shift {shift}")
    inputs = [x.id, noise.id]
    if lut.is_const:
        t = ctx.tensor_const(lut, "gain_lut")
    else:
        inputs.append(lut.id)
        t = "in2"
    body = (f"int i, msb;\n"
            f"for (i = 0; i < {x.size}; ++i) {{\n"
            f"    const uint32_t e = in1[i];\n"
            f"    int32_t gain;\n"
            f"    uint32_t snr;\n"
            f"    if (e <= 2) {{\n"
            f"        gain = {t}[e];\n"
            f"    }} else {{\n"
            f"        /* the polynomial of e's octave, at its 10-bit fraction */\n"
            f"        const int16_t *c;\n"
            f"        int32_t frac, r;\n"
            f"        for (msb = 32; msb > 0; --msb) {{\n"
            f"            if ((e >> (msb - 1)) & 1u) {{\n"
            f"                break;\n"
            f"            }}\n"
            f"        }}\n"
            f"        c = {t} + 4 * msb - 6;\n"
            f"        frac = (int32_t)((msb < 11 ? e << (11 - msb) : e >> (msb - 11)) & 0x3FFu);\n"
            f"        r = ((int32_t)c[2] * frac) >> 5;\n"
            f"        r = (int32_t)((uint32_t)r + ((uint32_t)(int32_t)c[1] << 5));\n"
            f"        r = (int32_t)((uint32_t)r * (uint32_t)frac);\n"
            f"        r = (int32_t)((uint32_t)r + 16384u) >> 15;\n"
            f"        gain = (int16_t)(r + c[0]);\n"
            f"    }}\n"
            f"    snr = (uint32_t)(((uint64_t)in0[i] * (uint32_t)gain) >> {shift});\n"
            f"    /* shrink: x^2 / 4 below 2, x - 1 above (12 -> 6 fraction bits) */\n"
            f"    out0[i] = snr < 8192u ? (snr * snr) >> 20 : (snr >> 6) - 64u;\n"
            f"}}")
    return Lowered(body=body, inputs=inputs, outputs=[y.id])
