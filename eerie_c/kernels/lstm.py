"""UNIDIRECTIONAL_SEQUENCE_LSTM, as TFLM's current LSTM kernel computes it: the standard
(Keras) LSTM without peephole, projection, layer norm or CIFG, which TFLM rejects. The hidden
state (input 18) and the cell state (input 19) are variable tensors updated in place
(Lowered.updates: state0 = hidden, state1 = cell) and carried over to the next invocation.

Per batch row and time step (time_major: input [T, B, I]; else [B, T, I]; batches are
independent, so both layouts run batch-outer, time-inner):
  gate_k = act_k(W_k x + b_k + R_k h)   for k = forget, input, cell, output, all from the
                                          PREVIOUS hidden state (sigmoid; the cell gate uses
                                          the op's activation, tanh or sigmoid)
  c = f * c + i * g (clipped to +-cell_clip when > 0);  h = tanh(c) * o;  output[t] = h.

int8 (TFLM's 8x8->16 scheme, no intermediate tensors needed): each gate's input and
recurrent products are two int8 fully-connected layers requantized separately to int16 Q3.12
(scale 2^-12; multipliers input_scale * weight_scale / 2^-12, recurrent ones with the hidden
state's scale), added with int16 saturation, then passed through TFLite's int16 sigmoid / tanh
(a 256-entry Q0.16 sigmoid table with linear interpolation) into Q0.15. The cell state is
int16 at a power-of-two scale 2^p: f*c is requantized by 2^-15, i*g by 2^-30 / scale_cell,
tanh(c) reads the cell with a shift derived from p, and h = tanh(c) * o is requantized by
2^-30 / scale_hidden plus the hidden zero point into int8. Zero points of the input and hidden
state are folded into per-row constants at compile time.

A SIGMOID cell-gate activation is taken as the tflite-micro oracle computes it: the cell gate
then gets NO nonlinearity at all (float: the raw pre-activation; int8: the raw Q3.12 sum used
as the gate value), verified against the oracle in tests/ops/test_lstm.py.
"""
import math

import numpy as np

from ..templating import render
from ..templating import c_float
from ..errors import EerieError
from . import Lowered, kernel
from ._dsp import has_dsp
from ._fc_formats import encode_s8
from ._quant import quantize_multiplier

GATES = (2, 1, 3, 4)   # TFLite input index of the input weights of forget, input, cell, output
_STATE_H, _STATE_C = 18, 19


def _fail(op, msg):
    raise EerieError(f"UNIDIRECTIONAL_SEQUENCE_LSTM (op {op.index}): {msg}")


def _fc_multiplier(in_scale: float, w_scale: float, out_scale: float) -> tuple[int, int]:
    # TFLM's fully-connected multiplier: float32 scales, product and quotient in double
    return quantize_multiplier(float(np.float32(in_scale)) * float(np.float32(w_scale))
                               / float(np.float32(out_scale)))


@kernel("UNIDIRECTIONAL_SEQUENCE_LSTM", dtypes=("int8", "int16", "float32"))
def lower_lstm(op, g, ctx):
    ins = list(op.inputs) + [None] * (24 - len(op.inputs))
    if len(op.inputs) != 24:
        _fail(op, f"expected 24 inputs, got {len(op.inputs)}")
    if any(ins[k] is not None for k in (9, 10, 11, 16, 17, 20, 21, 22, 23)):
        _fail(op, "peephole, projection and layer-norm LSTMs are not supported (nor by TFLM)")
    if any(ins[k] is None for k in (0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 14, 15, 18, 19)):
        _fail(op, "CIFG (no input gate) and missing weights, biases or states are not supported")
    x, y = g.t(ins[0]), g.t(op.outputs[0])
    h, c = g.t(ins[_STATE_H]), g.t(ins[_STATE_C])
    if not (h.variable and c.variable):
        _fail(op, "the hidden and cell states (inputs 18 and 19) must be variable tensors")
    w_in = [g.t(ins[k]) for k in GATES]
    w_rec = [g.t(ins[k + 4]) for k in GATES]
    bias = [g.t(ins[k + 11]) for k in GATES]
    if not all(t.is_const for t in w_in + w_rec + bias):
        _fail(op, "weights and biases must be constant")
    time_major = bool(op.attrs.get("time_major", False))
    if len(x.shape) != 3 or len(y.shape) != 3:
        _fail(op, "input and output must be 3-D")
    steps, batches = (x.shape[0], x.shape[1]) if time_major else (x.shape[1], x.shape[0])
    depth, units = x.shape[2], w_in[0].shape[0]
    if any(t.shape != (units, depth) for t in w_in) or any(t.shape != (units, units) for t in w_rec) \
            or any(t.size != units for t in bias) or h.size != batches * units \
            or c.size != batches * units or tuple(y.shape[:2]) != tuple(x.shape[:2]) or y.shape[2] != units:
        _fail(op, "weight, bias, state or output shapes do not fit the input")
    act = op.attrs.get("fused_activation_function", "TANH")
    if act not in ("TANH", "SIGMOID"):
        _fail(op, f"cell gate activation {act} (TFLM allows TANH or SIGMOID)")
    clip = float(op.attrs.get("cell_clip", 0.0) or 0.0)
    if clip < 0:
        _fail(op, "negative cell_clip")
    v = dict(batches=batches, steps=steps, depth=depth, units=units, time_major=time_major,
             float=x.dtype == "float32", act_ctype=x.ctype, w_ctype=w_in[0].ctype,
             cell_identity=act == "SIGMOID", dsp=False)
    w_in_data = np.concatenate([t.data.reshape(-1) for t in w_in])
    w_rec_data = np.concatenate([t.data.reshape(-1) for t in w_rec])
    if x.dtype == "float32":
        if any(t.dtype != "float32" for t in w_in + w_rec + bias + [h, c, y]):
            _fail(op, "a float32 LSTM needs float32 weights, biases, states and output")
        v.update(w_in=ctx.const(w_in_data, "float", "input_weights", "forget, input, cell, output"),
                 w_rec=ctx.const(w_rec_data, "float", "recurrent_weights", "forget, input, cell, output"),
                 bias=ctx.const(np.concatenate([t.data for t in bias]), "float", "bias",
                                "forget, input, cell, output"),
                 cell_clip=c_float(clip) if clip > 0 else None)
        scratch, helpers = 4 * units * 4, set()
    else:
        scratch, helpers = 4 * units * 2, {"requant", "lstm_act16"}
        if x.dtype == "int16":
            helpers.add("requant64")
        elif has_dsp(ctx.target) and w_in[0].dtype == "int8" and w_rec[0].dtype == "int8":
            scratch += _dsp_gates(v, ctx, w_in_data, w_rec_data, depth, units)
            helpers |= {"dsp", "lstm_dsp"}
        _int8_params(op, v, ctx, x, y, h, c, w_in, w_rec, bias, w_in_data, w_rec_data, clip)
    body = render("kernels/lstm.c.j2", **v)
    return Lowered(body=body, inputs=[x.id], outputs=[y.id], updates=[h.id, c.id],
                   helpers=helpers, scratch_bytes=scratch,
                   macs=batches * steps * 4 * units * (depth + units))


def _dsp_gates(v: dict, ctx, w_in_data, w_rec_data, depth: int, units: int) -> int:
    """The DSP cores' gate products (helpers/lstm_dsp.c.j2): both weight matrices (all four
    gates' rows, 4 * units of them) in FULLY_CONNECTED's word layout (_fc_formats.encode_s8),
    in place of the row-major int8 arrays. The input and hidden rows are read a word at a
    time, so a row whose length is not a multiple of 4 is first copied into zero-padded
    scratch; returns those scratch bytes."""
    enc_in = encode_s8(w_in_data.reshape(4 * units, depth))
    enc_rec = encode_s8(w_rec_data.reshape(4 * units, units))
    dp, up = enc_in["dp"], enc_rec["dp"]
    v.update(dsp=True, dp=dp, up=up, pad_x=dp != depth, pad_h=up != units,
             w_in4=ctx.const(enc_in["weights"], "int32_t", "input_weights",
                             "forget, input, cell, output; 4 rows x 4 inputs per group of words"),
             w_rec4=ctx.const(enc_rec["weights"], "int32_t", "recurrent_weights",
                              "forget, input, cell, output; 4 rows x 4 inputs per group of words"))
    return (dp if dp != depth else 0) + (up if up != units else 0)


def _fast_gate_params(mults, shifts, w_rows: np.ndarray, fold: np.ndarray, units: int):
    """helpers/lstm_dsp.c.j2's eerie_lstm_rq parameters per gate ([4][5] int32), or None when
    a gate's sums may leave its exact range: |sum| * 2^left < 2^30 for every row, the bound
    being |folded bias| + 128 * sum |weights| (int8 inputs), and a non-negative multiplier."""
    bound = np.abs(fold.astype(np.int64)) + 128 * np.abs(w_rows.astype(np.int64)).sum(axis=1)
    q = []
    for k, (m, s) in enumerate(zip(mults, shifts)):
        left, right = max(int(s), 0), max(-int(s), 0)
        if m < 0 or right > 31 or left > 29 or int(bound[k * units:(k + 1) * units].max()) << left >= 1 << 30:
            return None
        q.append([int(m), 1 << (left + 1), (1 << (right - 1)) if right else 0, -1 if right else 0, right])
    return np.array(q, np.int32)


def _q15(m: int, s: int) -> tuple[int, int]:
    """A Q31 multiplier and shift in the form of TFLM's 64-bit MultiplyByQuantizedMultiplier:
    the multiplier rounded to Q15 and the total right shift (helpers/requant64.c.j2)."""
    reduced = (m + (1 << 15)) >> 16 if m < 0x7FFF0000 else 0x7FFF
    return reduced, 15 - s


def _int8_params(op, v, ctx, x, y, h, c, w_in, w_rec, bias, w_in_data, w_rec_data, clip):
    wide = x.dtype == "int16"     # TFLM's 16x8 LSTM: int16 activations, int64 biases
    act, bias_t = ("int16", "int64") if wide else ("int8", "int32")
    if any(t.dtype != "int8" for t in w_in + w_rec) or any(t.dtype != act for t in (h, y)) \
            or c.dtype != "int16" or any(t.dtype != bias_t for t in bias):
        _fail(op, f"an {act} LSTM needs int8 weights, {act} hidden state and output, an int16 "
                  f"cell state and {bias_t} biases")
    for t in w_in + w_rec + [x, y, h, c]:
        if t.quant is None or t.quant.per_channel:
            _fail(op, f"tensor {t.label!r} needs per-tensor quantization")
        if any(t is w for w in w_in + w_rec) and t.zero_point != 0:
            _fail(op, f"weights {t.label!r} need zero point 0")
    if c.zero_point != 0:
        _fail(op, "the cell state needs zero point 0")
    gate_scale = 2.0 ** -12            # Q3.12 into the gate nonlinearities
    m_in, s_in, m_rec, s_rec = [], [], [], []
    for wi, wr in zip(w_in, w_rec):
        m, s = _fc_multiplier(x.scale, wi.scale, gate_scale)
        m_in.append(m)
        s_in.append(s)
        m, s = _fc_multiplier(h.scale, wr.scale, gate_scale)
        m_rec.append(m)
        s_rec.append(s)
    rows_in = w_in_data.astype(np.int64).reshape(4 * len(bias[0].data), -1).sum(axis=1)
    rows_rec = w_rec_data.astype(np.int64).reshape(4 * len(bias[0].data), -1).sum(axis=1)
    folded = np.concatenate([t.data.astype(np.int64) for t in bias]) - x.zero_point * rows_in
    rec_fold = -h.zero_point * rows_rec
    # cell scale 2^p: TFLM rounds log2 of the float32 scale (it does not insist on a power of 2)
    cell_scale = float(np.float32(c.scale))
    power = int(round(float(np.float32(math.log(cell_scale)) * np.float32(1.0 / math.log(2.0)))))
    left = 15 + power - 3
    t_mult, t_shift = (0, left) if left >= 0 else (3, -left)
    if t_mult == 0:
        t_mult, t_shift = 3 << t_shift, 0
    q15 = 2.0 ** -15
    m_fc, s_fc = quantize_multiplier(q15 * cell_scale / cell_scale)
    m_ig, s_ig = quantize_multiplier(q15 * q15 / cell_scale)
    m_h, s_h = quantize_multiplier(q15 * q15 / float(np.float32(h.scale)))
    qclip = 0
    if clip > 0:
        qclip = int(min(max(float(np.float32(clip)) / cell_scale, -32768.0), 32767.0))
    if wide:
        if x.zero_point or h.zero_point:
            _fail(op, "int16 input and hidden state need zero point 0 (TFLM's 16x8 scheme)")
        q_in = [_q15(m, s) for m, s in zip(m_in, s_in)]
        q_rec = [_q15(m, s) for m, s in zip(m_rec, s_rec)]
        if min(t for _, t in q_in + q_rec) < 1:
            _fail(op, "a gate's requantization scale is too large for TFLM's 64-bit path")
        m_in, s_in = [m for m, _ in q_in], [t for _, t in q_in]
        m_rec, s_rec = [m for m, _ in q_rec], [t for _, t in q_rec]
    v.update(wide=wide, h_lo=-32768 if wide else -128, h_hi=32767 if wide else 127, fast_rq=False)
    if v["dsp"]:   # the gate sums' requantization without 64-bit arithmetic, where exact
        units = len(bias[0].data)
        fq_in = _fast_gate_params(m_in, s_in, w_in_data.reshape(4 * units, -1), folded, units)
        fq_rec = _fast_gate_params(m_rec, s_rec, w_rec_data.reshape(4 * units, -1), rec_fold, units)
        v["fast_rq"] = fq_in is not None and fq_rec is not None
        if v["fast_rq"]:
            what = "per gate: multiplier, 2^(left+1), rounding, sign mask, right shift"
            v.update(q_in=ctx.const(fq_in, "int32_t", "input_requant", what),
                     q_rec=ctx.const(fq_rec, "int32_t", "recurrent_requant", what))
    if not v["fast_rq"]:
        v.update(m_in=ctx.const(np.array(m_in, np.int32), "int32_t", "input_multiplier"),
                 s_in=ctx.const(np.array(s_in, np.int32), "int32_t", "input_shift"),
                 m_rec=ctx.const(np.array(m_rec, np.int32), "int32_t", "recurrent_multiplier"),
                 s_rec=ctx.const(np.array(s_rec, np.int32), "int32_t", "recurrent_shift"))
    if not v["dsp"]:   # the DSP kernel reads its own layout of the same weights (_dsp_gates)
        v.update(w_in=ctx.const(w_in_data, "int8_t", "input_weights", "forget, input, cell, output"),
                 w_rec=ctx.const(w_rec_data, "int8_t", "recurrent_weights", "forget, input, cell, output"))
    v.update(bias=ctx.const(folded.astype(np.int64 if wide else np.int32),
                            "int64_t" if wide else "int32_t", "bias",
                            "gate biases with the input zero point folded in"),
             rec_fold=None if wide else ctx.const(rec_fold.astype(np.int32), "int32_t", "hidden_zp_fold",
                                                  "-hidden_zero_point * recurrent row sums"),
             m_fc=m_fc, s_fc=s_fc, m_ig=m_ig, s_ig=s_ig, m_h=m_h, s_h=s_h, h_zp=h.zero_point,
             tanh_mult=t_mult, tanh_shift=t_shift, cell_clip=qclip)
