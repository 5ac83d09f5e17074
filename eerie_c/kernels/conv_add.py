"""CONV_2D_ADD: an int8 CONV_2D whose output feeds a residual ADD, fused by
passes/fuse_conv_add.py. Inputs: the residual r (op input 0, C in0), then the convolution's
input, weights and bias (C in1 is the convolution's input). Output: the ADD's.

The convolution is the CONV_2D kernel itself (conv2d_s8.c.j2, with its DSP variant on DSP
targets): same weights layout, folded bias and requantization, so its int8 output z is what
CONV_2D would produce. Only the stores change: a pixel's z (two pixels on DSP targets) goes
to a few scratch bytes, then TFLM's int8 ADD arithmetic (residual_add_s8.j2) combines it with
the residual at the same elements and writes the result. Each residual element is read just
before the output element at the same index is written, and nothing else reads the residual,
so the output may start at the residual's first byte: Lowered.inplace (the planner's rule in
plan/lifetimes.py, checked by plan/proof.py, decides whether it does).
"""
from __future__ import annotations

import numpy as np

from ..templating import render
from ..errors import EerieError
from ..ir import Op
from . import Lowered, c_comment, kernel
from ._conv_pack import rq_preamble
from ._dsp import dsp_conv_helpers, dsp_conv_scratch
from .conv import conv_choice, conv_operands, int8_conv_vars, lower_conv2d_rv
from .window import op_what, window
from .elementwise import ADD_LEFT_SHIFT
from ._dsp import fast_requant_values, tflite_requantize
from ._mve import has_mve, lower_conv2d_mve
from ._mve_add import add_multipliers, mve_add_params, params_array
from ._quant import activation_range_int, quantize_multiplier
from ._rv import has_rv


def _signed(v: int) -> str:
    return "" if v == 0 else (f" + {v}" if v > 0 else f" - {-v}")


def add_constants(r, z, y, act: str, conv_operand: int) -> dict:
    """The ADD's requantization constants, derived as the ADD kernel does (elementwise.py):
    each input scaled by its scale / (2 * max scale) after a 20-bit left shift, the sum by
    2 * max scale / (2^20 * output scale). TFLite's input1 / input2 roles are kept."""
    s_r, s_z, s_o = (float(np.float32(t.scale)) for t in (r, z, y))
    s1, s2 = (s_z, s_r) if conv_operand == 0 else (s_r, s_z)
    twice_max = 2.0 * max(s1, s2)
    m_r, sh_r = quantize_multiplier(s_r / twice_max)
    m_z, sh_z = quantize_multiplier(s_z / twice_max)
    m_o, sh_o = quantize_multiplier(twice_max / ((1 << ADD_LEFT_SHIFT) * s_o))
    act_min, act_max = activation_range_int(act, y)
    return dict(mult_r=m_r, shift_r=sh_r, mult_z=m_z, shift_z=sh_z, mult_o=m_o, shift_o=sh_o,
                left=1 << ADD_LEFT_SHIFT, off_r=_signed(-r.zero_point), off_z=_signed(-z.zero_point),
                out_off=_signed(y.zero_point), act_min=act_min, act_max=act_max)


def fast_add_constants(r, z, y, ra: dict) -> dict | None:
    """Operands of the DSP targets' fused ADD (residual_add_s8.j2 with ra.fast), or None when
    it would not be exact. Each of its three requantizations (the residual's, the
    convolution output's and the sum's) becomes eerie_requant_fast when that is proved
    exact for every possible operand (an operand whose multiplier is exactly 1/2 becomes a
    multiply-add, checked on all 256 values): the inputs' (x - zp) * 2^20 range over all 256 int8
    values, and the sum's bound is the largest |requantized residual| plus the largest
    |requantized convolution output|, each found by evaluating TFLite's formula on all 256."""
    left = ra["left"]
    out = {}
    tmax = 0
    for key, t in (("r", r), ("z", z)):
        m, sh = ra["mult_" + key], ra["shift_" + key]
        xs = [(v - t.zero_point) * left for v in range(-128, 128)]
        ts = [tflite_requantize(a, m, sh) for a in xs]
        tmax += max(abs(a) for a in ts)
        if ts == [a // 2 for a in xs]:
            # the operand with the larger scale has multiplier 1/2 exactly (2^30, shift 0):
            # (x - zp) * 2^20 / 2 is exact, checked above on all 256 values
            out[key] = None
            out["k_" + key] = -t.zero_point * (left // 2)   # (x - zp) * 2^19 = x * 2^19 + k
            continue
        vals = fast_requant_values(m, sh, 0, max(abs(a) for a in xs))
        if vals is None:
            return None
        out[key] = (int(vals[0][0]), int(vals[1][0]), int(vals[2][0]))
        out["k_" + key] = -t.zero_point * 2 * left      # (x - zp) * 2^21 = x * 2^21 + k
    vals = fast_requant_values(ra["mult_o"], ra["shift_o"], y.zero_point, tmax)
    if vals is None:
        return None
    out["o"] = (int(vals[0][0]), int(vals[1][0]), int(vals[2][0]))
    out["zp_after"] = int(vals[3])
    return out


def _lower_mve(op, g, ctx, x, w, b, z, r, y, win, act, what):
    """The MVE convolution of _mve.py with the ADD as its epilogue: eerie_vadd_s8 when its
    vector arithmetic is proven bit-exact for this layer's constants (_mve_add.py), else the
    scalar ADD of residual_add_s8.j2. None when the MVE convolution does not apply."""
    add_act = op.attrs.get("add_activation", "NONE")
    lo, hi = activation_range_int(add_act, y)
    m_r, sh_r, m_z, sh_z, m_o, sh_o = add_multipliers(r.scale, z.scale, y.scale)
    p = mve_add_params(m_r, sh_r, r.zero_point, m_z, sh_z, z.zero_point, m_o, sh_o,
                       y.zero_point, lo, hi)
    res = dict(rid=r.id, out=y.id)
    if p is not None:
        res["vec_data"] = np.asarray(params_array(p), np.int32)
    else:
        res["ra"] = add_constants(r, z, y, add_act, int(op.attrs.get("conv_operand", 0)))
    low = lower_conv2d_mve(op, g, ctx, x, w, b, z, win, act, what, residual=res)
    if low is not None:
        low.comment = (f"CONV_2D + ADD {c_comment(op.name)} (Helium; the residual ADD fused into "
                       f"the convolution's stores{'' if p is not None else ', scalar'})")
    return low


@kernel("CONV_2D_ADD", dtypes=("int8",))
def lower_conv_add(op, g, ctx):
    what = op_what(op)
    if len(op.inputs) < 3 or "conv_output" not in op.attrs:
        raise EerieError(f"{what}: malformed fused convolution + ADD")
    rid = op.inputs[0]
    conv = Op("CONV_2D", list(op.inputs[1:]), [op.attrs["conv_output"]], op.attrs, op.name, op.index)
    x, w, b, z = conv_operands(conv, g, what)
    r, y = g.t(rid), g.t(op.outputs[0])
    if x.dtype != "int8" or tuple(r.shape) != tuple(z.shape) or tuple(y.shape) != tuple(z.shape):
        raise EerieError(f"{what}: the fused ADD needs int8 operands of the convolution's shape")
    batches, in_h, in_w, in_c = x.shape
    out_c, kh, kw, w_in_c = w.shape
    if w_in_c != in_c or z.shape[3] != out_c or (b is not None and b.size != out_c):
        raise EerieError(f"{what}: weights {list(w.shape)} do not fit input {list(x.shape)} "
                         f"and output {list(z.shape)}")
    win = window(conv, in_h, in_w, kh, kw, z.shape, what)
    act = op.attrs.get("fused_activation_function", "NONE")
    if has_mve(ctx.target):   # cortex-m55: the Helium convolution + vector ADD (_mve.py)
        low = _lower_mve(op, g, ctx, x, w, b, z, r, y, win, act, what)
        if low is not None:
            return low
    v = dict(batches=batches, in_h=in_h, in_w=in_w, in_c=in_c, out_c=out_c, w=win, xin="in1")
    if has_rv(ctx.target):   # RISC-V: the GEMM of _rv.py, the ADD on each pair of pixels
        ra = add_constants(r, z, y, op.attrs.get("add_activation", "NONE"),
                           int(op.attrs.get("conv_operand", 0)))
        low = lower_conv2d_rv(ctx, x, w, b, z, win, act, what, v, residual=ra)
        low.inputs, low.outputs, low.inplace = [rid, x.id], [y.id], True
        low.comment = (f"CONV_2D + ADD {c_comment(op.name)} (the residual ADD fused into the "
                       f"convolution's stores)")
        return low
    # --optimize size: only the compact requantization (the block loop of packed weights
    # would store a pixel's channels in several passes, before its residual ADD)
    v.update(int8_conv_vars(ctx, x, w, b, z, act, what, out_c, kh * kw * in_c, pack=("rq",)))
    v["direct"] = kh == 1 and kw == 1 and in_c % 4 == 0
    ra = add_constants(r, z, y, op.attrs.get("add_activation", "NONE"),
                       int(op.attrs.get("conv_operand", 0)))
    if v["dsp"]:
        # the conv's own scratch: two columns of kp int16, plus (not 1x1) the im2col bytes of
        # one window, which are dead once the columns are built: the two pixels' outputs fit
        # there when the window has at least 2 * out_c bytes
        scratch = dsp_conv_scratch(v)
        if not v["direct"] and 2 * out_c <= kh * kw * in_c:
            ra["zt"] = "stage"
        else:
            ra["zt"] = f"(int8_t *)(scratch + {scratch})"
            scratch += 2 * out_c
    else:
        scratch = out_c   # one pixel's outputs
    if v["dsp"]:   # the three requantizations of the ADD as eerie_requant_fast when exact
        ra["fast"] = fast_add_constants(g.t(rid), z, y, ra)
    v["residual"] = ra
    helpers = dsp_conv_helpers(v)
    if v.get("size_fmt"):   # its requantization rows after the rest of the scratch
        offset = (scratch + 3) // 4 * 4
        body = rq_preamble(v, offset) + render("kernels/conv2d_s8.c.j2", **{**v, "rq_table": "rqs"})
        scratch, helpers = offset + 16 * v["ocp"], helpers | {"conv_pack"}
    else:
        body = render("kernels/conv2d_s8.c.j2", **v)
    return Lowered(body=body, inputs=[rid, x.id], outputs=[y.id], helpers=helpers,
                   scratch_bytes=scratch, inplace=True, choice=conv_choice(v),
                   macs=batches * win.out_h * win.out_w * out_c * kh * kw * in_c,
                   comment=f"CONV_2D + ADD {c_comment(op.name)} (the residual ADD fused into the "
                           f"convolution's stores)")
