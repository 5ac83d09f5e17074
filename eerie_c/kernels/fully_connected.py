"""FULLY_CONNECTED: out[b, u] = act(sum_d in[b, d] * w[u, d] + bias[u]).

int8 (TFLM scheme): the input zero point is folded into the bias at compile time
(bias'[u] = bias[u] - zp_in * sum_d w[u, d]), so the inner loop is a plain int8 dot product;
the result is requantized per output channel (per tensor when the weights are).
Targets with the DSP extension (see _dsp.py) use shared out-of-line kernels (one per weight
format, helpers/fc_dsp*.c.j2): SMLAD over weights re-encoded at compile time, int8 rows mixed
in pairs or sub-byte fields with correction lists; _fc_formats.py picks the format per layer.
RISC-V targets use the register-blocked GEMM of _rv.py (helpers/gemm_rv.c.j2).
"""
import numpy as np

from ..templating import render
from ..errors import EerieError
from . import Lowered, c_comment, kernel
from ._dsp import (acc_bound, constant_channels, fast_requant_consts, has_dsp, pad_to,
                   zero_channels)
from ._quant import activation_range_float, activation_range_int, per_channel_multipliers
from ._f32 import fc_vars as fc_f32_vars
from ._fc_formats import choose, encode_s8
from ._fc_runtime import lower_fc_runtime
from ._int4 import choice as int4_choice, packed_weights
from ._mve import has_mve, lower_fc_mve
from ._rv import gemm_vars, has_rv

KERNELS = {"s8": "eerie_fc_s8", "mix": "eerie_fc_mix", "p4": "eerie_fc_p4", "p556": "eerie_fc_p556",
           "s16": "eerie_fc_s16"}
HELPERS = {"s8": "fc_dsp", "mix": "fc_dsp_mix", "p4": "fc_dsp_p4", "p556": "fc_dsp_p556",
           "s16": "fc_dsp_s16"}
FORMAT_NOTES = {"s8": "blocks of 4 rows interleaved per 4 inputs, 4 int8 per word",
                "mix": "pairs of rows mixed per halfword, 256 * w_odd + w_even",
                "p4": "blocks of 4 rows, 4-bit fields per halfword",
                "p556": "blocks of 3 rows, 5/5/6-bit fields per halfword",
                "s16": "blocks of 4 rows interleaved per 4 inputs, sign-extended: (w0, w2), (w1, w3)"}


def dsp_fc(ctx, x, w, y, act, wdata, folded, mult, shift, batches, units, depth):
    """Constants of the DSP kernel (helpers/fc_dsp*.c.j2; the weight format is chosen by
    _fc_formats.py), or None when its fast requantization would not be exact (then the
    portable kernel is used). A split encoding (p556 with some rows int8) is two kernel
    calls ("parts"), the second one's outputs scattered to their rows."""
    wabs = np.abs(wdata).sum(axis=1)
    if np.abs(folded).max(initial=0) >= 2 ** 31:
        return None
    dead = zero_channels(mult, shift, acc_bound(folded, wabs))
    wdata, folded = np.where(dead[:, None], 0, wdata), np.where(dead, 0, folded)
    wabs = np.where(dead, 0, wabs)
    consts = constant_channels(wabs, folded, mult, shift, y.zero_point)
    folded = np.where(wabs == 0, 0, folded)
    if ctx.target == "cortex-m55":   # only reached where the Helium kernel does not apply
        enc = encode_s8(wdata)
    else:
        enc = choose(wdata, folded, batches, ctx.optimize)
    parts = [(enc, enc["perm"].astype(np.int64) if "perm" in enc else np.arange(units))]
    if "split" in enc:
        parts.append((enc["split"]["enc"], enc["split"]["rows"].astype(np.int64)))
    if any(e["up"] // e["rows"] > 65536 for e, _ in parts) or enc["dp"] // 4 > 65536:
        return None   # the kernels' loops (and their proof) are bounded at 65536 blocks and groups
    vs = []
    for e, rows in parts:   # per part its rows' constants, in the part's row order
        where = {int(r): i for i, r in enumerate(rows)}
        part = _part(ctx, e, w, y, rows, folded[rows], wabs[rows], mult[rows], shift[rows],
                     {where[c]: v for c, v in consts.items() if c in where})
        if part is None:
            return None
        vs.append(part)
    dp = enc["dp"]
    v = dict(vs[0], batches=batches, units=units, depth=depth, dp=dp, pad_x=dp != depth,
             scratch=(dp if dp != depth else 0) + (len(parts[1][1]) if len(parts) > 1 else 0))
    if len(parts) > 1:
        v["split"] = dict(vs[1], rows=ctx.const(parts[1][1].astype(np.uint16), "uint16_t", "rows",
                                                "output row of each int8 row"))
    v["act_min"], v["act_max"] = activation_range_int(act, y)
    v["choice"] = f"weights {enc['fmt']} ({enc.get('why', 'the only DSP format here')})"
    return v


def _part(ctx, enc, w, y, rows, folded, wabs, mult, shift, consts):
    """Kernel operands of one encoded part whose stored rows are output rows `rows` (their
    bias and requantization in that order; a p556 kernel stores through perm)."""
    up, fmt = enc["up"], enc["fmt"]
    fast = fast_requant_consts(ctx, mult, shift, y.zero_point, acc_bound(folded, wabs),
                               w.quant.per_channel, up, arrays=True, constants=consts)
    if fast is None or fast["rq_zp"] != 0:
        return None
    v = dict(fast, up=up, fmt=fmt, blocks=up // enc["rows"], kernel=KERNELS[fmt], n=len(rows),
             weights=ctx.const(enc["weights"], "int32_t", "weights",
                               f"{c_comment(w.label)} ({FORMAT_NOTES[fmt]})"),
             bias=ctx.const(pad_to(folded.astype(np.int32), (up,)), "int32_t", "bias",
                            "bias with the input zero point folded in"))
    if "fix" in enc:
        v["fix_n"] = ctx.const(enc["fix_n"], "uint32_t", "fix_n",
                               "corrections per row: n+ | n- << 16 (fix entries)")
        if "perm" in enc:
            v["perm"] = ctx.const(enc["perm"], "uint16_t", "perm", "output row of each stored row")
        ctype = "uint8_t" if enc["fix"].dtype == np.uint8 else "uint16_t"
        v["fix_wide"] = int(ctype == "uint16_t")
        v["fix"] = ctx.const(enc["fix"] if enc["fix"].size else np.zeros(1, enc["fix"].dtype), ctype,
                             "fix", "columns of weights = field + 2^bits (n+), - 2^bits (n-) per row")
    return v


@kernel("FULLY_CONNECTED", dtypes=("int8", "float32"))
def lower_fully_connected(op, g, ctx):
    x, w = g.t(op.inputs[0]), g.t(op.inputs[1])
    b = g.t(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] else None
    y = g.t(op.outputs[0])
    if not w.is_const or (b is not None and not b.is_const):   # computed by the graph
        return lower_fc_runtime(op, g, ctx, x, w, b, y)
    units, depth = w.shape
    batches = x.size // depth
    act = op.attrs.get("fused_activation_function", "NONE")
    ctx_vars = dict(batches=batches, units=units, depth=depth)
    if x.dtype == "float32":
        ctx_vars.update(fc_f32_vars(ctx, w, b, units, depth))
        ctx_vars["act_min"], ctx_vars["act_max"] = activation_range_float(act)
        body = render("kernels/fully_connected_f32.c.j2", **ctx_vars)
        helpers = {"fma_f32"}
    else:
        wdata = w.data.astype(np.int64)
        bias = b.data.astype(np.int64) if b is not None else np.zeros(units, np.int64)
        w_zp = w.quant.zero_point.astype(np.int64)
        if np.any(w_zp != 0):
            raise EerieError(f"FULLY_CONNECTED (op {op.index}): int8 weights with a non-zero "
                             f"zero point are not supported")
        folded = bias - x.zero_point * wdata.sum(axis=1)
        mult, shift = per_channel_multipliers(x, w, y, units)
        # 4-bit weights (_int4.py): the portable kernel reading them packed
        fast_ok = not w.int4 and op.attrs.get("rounding") != "single"
        if fast_ok and has_mve(ctx.target):   # cortex-m55: Helium kernel (_mve.py) when it applies
            low = lower_fc_mve(op, g, ctx, x, w, y, act, wdata, folded, mult, shift,
                               batches, units, depth)
            if low is not None:
                return low
        if fast_ok and has_dsp(ctx.target) and batches * units * depth > 0:
            dsp = dsp_fc(ctx, x, w, y, act, wdata, folded, mult, shift, batches, units, depth)
            if dsp is not None:
                body = render("kernels/fully_connected_s8_dsp.c.j2", **dsp, main=dsp)
                fmts = [dsp] + ([dsp["split"]] if "split" in dsp else [])
                return Lowered(body=body, inputs=[x.id], outputs=[y.id],
                               helpers={"requant", "dsp"} | {HELPERS[p["fmt"]] for p in fmts}
                               | ({"dsp_fc"} if any(p["fmt"] not in ("s8", "s16") for p in fmts)
                                  else set())
                               | ({"dsp_fc_fix"} if any("fix" in p for p in fmts) else set()),
                               scratch_bytes=dsp["scratch"],
                               macs=batches * units * depth, choice=dsp["choice"])
        if (fast_ok and has_rv(ctx.target) and batches * units * depth > 0
                and np.abs(folded).max(initial=0) < 2 ** 31):   # RISC-V: GEMM of _rv.py
            rv = gemm_vars(ctx, wdata, folded, mult, shift, y, act, c_comment(w.label))
            body = render("kernels/fully_connected_s8_rv.c.j2", batches=batches, **rv)
            return Lowered(body=body, inputs=[x.id], outputs=[y.id], helpers={"requant", "gemm_rv"},
                           macs=batches * units * depth)
        per_channel = w.quant.per_channel
        ctx_vars.update(
            weights=packed_weights(ctx, w) if w.int4 else ctx.tensor_const(w, "weights"),
            w4=w.int4,
            # LiteRT's single rounding (a TFLite INT4 layer, whose reference is LiteRT's)
            single=op.attrs.get("rounding") == "single",
            bias=ctx.const(folded.astype(np.int32), "int32_t", "bias",
                           "bias with the input zero point folded in"),
            mult=ctx.const(mult, "int32_t", "multiplier") if per_channel else int(mult[0]),
            shift=ctx.const(shift, "int32_t", "shift") if per_channel else int(shift[0]),
            per_channel=per_channel, out_zp=y.zero_point)
        ctx_vars["act_min"], ctx_vars["act_max"] = activation_range_int(act, y)
        body = render("kernels/fully_connected_s8.c.j2", **ctx_vars)
        helpers = {"requant", "int4"} if w.int4 else {"requant"}
    return Lowered(body=body, inputs=[x.id], outputs=[y.id], helpers=helpers,
                   macs=batches * units * depth, choice=int4_choice(op) if w.int4 else "")
