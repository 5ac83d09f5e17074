"""SVDF (singular value decomposition filter, e.g. keyword spotting): a rank-R factorisation
of a time-convolution. Per invocation, with state s[b][f][m] (filters f, memory slots m, the
oldest first), a variable tensor updated in place (Lowered.updates):

  1. age the state: the whole buffer moves one element back (the newest slot of every filter
     is then overwritten, so crossing filter boundaries is harmless);
  2. s[b][f][M-1] = sum_d wf[f][d] * x[b][d]                      (feature projection);
  3. out[b][u] = act(bias[u] + sum_{r<R} sum_m wt[u*R+r][m] * s[b][u*R+r][m]).

int8 (TFLM's integer scheme): int8 input and feature weights, int16 (or int8) time weights and
state, int32 bias at scale state*weights_time. Step 2 is requantized with
scale_in*scale_wf/scale_state (float products, as TFLM computes them), clamped to the state
type and THEN offset by the state zero point, wrapping around on overflow (what the
tflite-micro oracle does; newer TFLM sources add the zero point before the clamp); step 3 with scale_state*scale_wt/scale_out plus the output
zero point, clamped to int8. TFLM's integer kernel applies no fused activation, so neither do
we. The input zero point is folded into a per-filter constant at compile time. float32
follows the reference summation order (each filter's time dot product from 0, then the bias
plus the rank partial sums), so results match it to rounding.
"""
import numpy as np

from ..templating import render
from ..errors import EerieError
from . import Lowered, kernel
from ._quant import activation_range_float, quantize_multiplier

_STATE_RANGE = {"int16": (-32768, 32767), "int8": (-128, 127)}


def _fail(op, msg):
    raise EerieError(f"SVDF (op {op.index}): {msg}")


@kernel("SVDF", dtypes=("int8", "float32"))
def lower_svdf(op, g, ctx):
    if len(op.inputs) != 5 or op.inputs[4] is None:
        _fail(op, f"expected 5 inputs (input, weights_feature, weights_time, bias, state), "
                  f"got {len(op.inputs)}")
    x, wf, wt = (g.t(op.inputs[k]) for k in range(3))
    bias = g.t(op.inputs[3]) if op.inputs[3] is not None else None
    state, y = g.t(op.inputs[4]), g.t(op.outputs[0])
    rank = int(op.attrs.get("rank", 1))
    if not state.variable:
        _fail(op, "the activation state (input 4) must be a variable tensor")
    if not wf.is_const or not wt.is_const or (bias is not None and not bias.is_const):
        _fail(op, "weights and bias must be constant")
    if len(x.shape) != 2 or len(wf.shape) != 2 or len(wt.shape) != 2 or len(y.shape) != 2:
        _fail(op, "input, weights and output must be 2-D")
    batches, depth = x.shape
    filters, memory = wt.shape
    if rank < 1 or filters % rank or wf.shape != (filters, depth):
        _fail(op, f"weights_feature {list(wf.shape)} / weights_time {list(wt.shape)} / rank {rank} "
                  f"do not fit input {list(x.shape)}")
    units = filters // rank
    if state.size != batches * filters * memory or tuple(y.shape) != (batches, units) \
            or (bias is not None and bias.size != units) or memory < 1:
        _fail(op, "state, bias or output shape does not fit the weights")
    act = op.attrs.get("fused_activation_function", "NONE")
    v = dict(batches=batches, depth=depth, filters=filters, memory=memory, rank=rank, units=units,
             state_elems=state.size, ctype=x.ctype, state_ctype=state.ctype,
             wf_ctype=wf.ctype, wt_ctype=wt.ctype, float=x.dtype == "float32",
             wf=ctx.tensor_const(wf, "weights_feature"), wt=ctx.tensor_const(wt, "weights_time"),
             bias=ctx.tensor_const(bias, "bias") if bias is not None else None)
    helpers = set()
    if x.dtype == "float32":
        if {wf.dtype, wt.dtype, state.dtype, y.dtype} != {"float32"} or \
                (bias is not None and bias.dtype != "float32"):
            _fail(op, "a float32 SVDF needs float32 weights, bias, state and output")
        lo, hi = activation_range_float(act)
        v.update(act_min=None if lo == "-FLT_MAX" else lo, act_max=None if hi == "FLT_MAX" else hi)
    else:
        if wf.dtype != "int8" or wt.dtype not in _STATE_RANGE or state.dtype not in _STATE_RANGE \
                or y.dtype != "int8" or bias is None or bias.dtype != "int32":
            _fail(op, "an int8 SVDF needs int8 weights_feature, int16/int8 weights_time and state, "
                      "an int32 bias (TFLM requires one) and an int8 output")
        for t in (x, wf, wt, state, y, bias):
            if t.quant is None:
                _fail(op, f"tensor {t.label!r} has no quantization")
        f32 = np.float32
        # TFLM forms both effective scales in float before widening them to double.
        m1, s1 = quantize_multiplier(float(f32(f32(x.scale) * f32(wf.scale)) / f32(state.scale)))
        m2, s2 = quantize_multiplier(float(f32(f32(state.scale) * f32(wt.scale)) / f32(y.scale)))
        fold = -x.zero_point * wf.data.astype(np.int64).sum(axis=1)
        lo, hi = _STATE_RANGE[state.dtype]
        v.update(mult1=m1, shift1=s1, mult2=m2, shift2=s2, state_zp=state.zero_point,
                 state_min=lo, state_max=hi, out_zp=y.zero_point,
                 wf_fold=ctx.const(fold.astype(np.int32), "int32_t", "input_zp_fold",
                                   "-input_zero_point * row sums of weights_feature"))
        helpers = {"requant"}
    body = render("kernels/svdf.c.j2", **v)
    return Lowered(body=body, inputs=[x.id], outputs=[y.id], updates=[state.id], helpers=helpers,
                   macs=batches * filters * (depth + memory))
