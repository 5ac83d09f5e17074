"""4-bit weights (Tensor.int4): a TFLite INT4 constant, or int8 weights that all lie in [-8, 7]
packed losslessly under --optimize size. The IR holds their values one per int8 (the compiler's
own arithmetic: folded biases, bounds); in flash they stay two per byte and the kernels unpack
them in registers, never into an int8 copy in RAM or flash.

Where the weights go (each kernel marks the tensor in ctx.packed4 when it emits them):
* the portable kernels (every target; DEPTHWISE_CONV_2D and FULLY_CONNECTED everywhere) read
  TFLite's own packing (packed_weights: the tensor in row-major order, element 2i in the low
  nibble of byte i, element 2i + 1 in the high one) through eerie_w4 (helpers/int4.c.j2);
* CONV_2D on the DSP cores: eerie_conv_pair_s4 and its unrolled copies, one word per 4 taps
  of a pair of rows, bytes 16 w0 + w1 + 8 (conv.py int8_conv_vars, helpers/gemm_dsp.c.j2);
* CONV_2D on RISC-V: eerie_gemm_rv_s4, one word per 2 taps of a block of 4 rows (_rv.py).
lower_graph checks (check_packed) that every 4-bit tensor a layer reads was emitted packed by
its kernel, so a kernel that does not know the format cannot quietly store it as int8.

The reference for TFLite INT4 models is LiteRT's reference kernels (TFLM refuses INT4 fully
connected weights); its FULLY_CONNECTED rounds the requantization once (frontend: attrs
rounding = "single"), which the portable kernel follows (eerie_requantize_single).
"""
from __future__ import annotations

import numpy as np

from ..errors import EerieError
from ..templating import c_comment

# the ops whose kernels read 4-bit weights (their input 1)
INT4_OPS = ("FULLY_CONNECTED", "CONV_2D", "DEPTHWISE_CONV_2D")


def pack_int4(values) -> np.ndarray:
    """TFLite's INT4 bytes of `values` (ints in [-8, 7]), row-major, the even element in the
    low nibble; an odd count leaves the last high nibble 0."""
    v = np.asarray(values, np.int64).reshape(-1)
    if v.size and (v.min() < -8 or v.max() > 7):
        raise AssertionError("4-bit weights outside [-8, 7]")
    v = np.concatenate([v, np.zeros(v.size % 2, np.int64)]) & 0xF
    return (v[0::2] | v[1::2] << 4).astype(np.uint8)


def unpack_int4(data: np.ndarray, count: int) -> np.ndarray:
    """The inverse of pack_int4 (what eerie_w4 computes), for the self-check."""
    b = np.asarray(data, np.int64)
    v = np.stack([b & 0xF, b >> 4], axis=-1).reshape(-1)[:count]
    return np.where(v >= 8, v - 16, v)


def packed_weights(ctx, w) -> str:
    """The C name of w's values two per byte (uint8_t), marked as emitted packed."""
    data = pack_int4(w.data)
    if not np.array_equal(unpack_int4(data, w.size), w.data.reshape(-1)):
        raise AssertionError("packed 4-bit weights do not decode to the originals")
    ctx.packed4.add(w.id)
    return ctx.const(data, "uint8_t", "weights_int4",
                     f"{c_comment(w.label)} ({w.size} int4, two per byte, even element in the "
                     f"low nibble)")


def int4_problem(op, g) -> str | None:
    """Why `op` cannot read its 4-bit tensors (None when it can): only the weights (input 1)
    of INT4_OPS with int8 activations."""
    for k, tid in enumerate(op.inputs):
        if tid is None or not g.t(tid).int4:
            continue
        if op.kind not in INT4_OPS or k != 1:
            return f"an int4 tensor as input {k}"
        if g.t(op.inputs[0]).dtype != "int8":
            return f"int4 weights and {g.t(op.inputs[0]).dtype} activations"
    return None


def check_packed(g, lowered, ctx):
    """Every 4-bit tensor a lowered layer reads (a patch stage: its layers) was emitted
    packed (packed_weights)."""
    ops = [low.op for low in lowered if low.op is not None]
    for op in ops:
        inner = op.attrs.get("patch")
        members = list(getattr(inner, "ops", [])) if inner is not None else [op]
        for member in members:
            for tid in member.inputs:
                if tid is not None and tid in g.tensors and g.t(tid).int4 and tid not in ctx.packed4:
                    raise EerieError(f"internal error: {member.kind} (op {member.index}) did not "
                                     f"keep its int4 weights packed")


LOSSLESS = "int4_lossless"   # op attr: the layer's int8 weights were packed by pack_small_int8


def pack_small_int8(g):
    """--optimize size: int8 weights of INT4_OPS layers (int8 activations) whose values all lie
    in [-8, 7] (a model trained for 4 bits, exported as int8) become 4-bit tensors, packed two
    per byte by the kernels; bit-exact, as the values are unchanged (and those layers keep
    TFLM's rounding). The op gets attrs[LOSSLESS] for report.md. A tensor also read by any
    other op stays int8, and so do the layers whose size format a test forces (_conv_pack.FORCE,
    _fc_formats.FORCE: that format is the one under test)."""
    from dataclasses import replace
    from . import _conv_pack, _fc_formats
    forced = ({"CONV_2D"} if _conv_pack.FORCE else set()) | \
        ({"FULLY_CONNECTED"} if _fc_formats.FORCE else set())
    readers: dict[str, list] = {}
    for op in g.ops:
        for k, tid in enumerate(op.inputs):
            if tid is not None:
                readers.setdefault(tid, []).append((op, k))
    for tid, uses in readers.items():
        t = g.tensors.get(tid)
        if t is None or not t.is_const or t.int4 or t.dtype != "int8" or t.data.size == 0:
            continue
        if not all(op.kind in INT4_OPS and op.kind not in forced and k == 1
                   and g.t(op.inputs[0]).dtype == "int8" for op, k in uses):
            continue
        if t.data.min() >= -8 and t.data.max() <= 7:
            g.tensors[tid] = replace(t, int4=True)
            for op, _ in uses:
                op.attrs[LOSSLESS] = True
    return g


def choice(op, kernel: str = "portable kernel") -> str:
    """report.md's line for a layer with 4-bit weights (read by `kernel`)."""
    if op.attrs.get(LOSSLESS):
        return ("weights packed to 4 bits, two per byte (size: its int8 weights all lie in "
                f"[-8, 7], lossless), {kernel}")
    return f"int4 weights kept two per byte, {kernel}"
