"""Window geometry of the layers without weights that a patch stage takes (patch/stage.py).

A patch stage slides each layer's window over the previous layer's output; besides the
convolutions (patch.py layer_of) these ops fit that geometry too:

  * MAX_POOL_2D / AVERAGE_POOL_2D: a kh x kw window with strides and SAME / VALID padding, and
    no MACs. A window at the image's edge pools only its in-image taps (an average divides by
    their count, as TFLM does), so a row band's kernel must know where the image's edge is:
    patch/band_kernels.py gives it the band's top padding (`tile_window`), as it does a conv;
  * PAD / PADV2 over height and width only: a 1x1 window with stride 1 whose top / left
    padding is the pad amounts; its output is larger than its input, and an output row in the
    padding reads no input row at all (a band of such rows only writes the pad value);
  * int8 unary element-wise ops (RELU, RELU6, LEAKY_RELU, HARD_SWISH, LOGISTIC, TANH, a
    requantizing QUANTIZE, the tables of passes/channel_tables.py, ...) and ADD / SUB / MUL with a constant operand that does not vary
    over height or width, or with an earlier layer of the stage as the other operand (its
    skip input, as a fused ADD's): a 1x1 window, stride 1, no padding, input and output of one
    shape.

These run in row bands only (each band by the layer's own kernel, patch/band_kernels.py):
patch/kernel.py's per-tile C has convolutions only, so patch/stage.py make_plan refuses a
grid with columns for a stage holding one. patch/proof.py re-derives the same geometry
from the ops independently of this module.
"""
from __future__ import annotations

import numpy as np

POOLS = ("MAX_POOL_2D", "AVERAGE_POOL_2D")
PADS = ("PAD", "PADV2")
# int8 -> int8 element-wise ops with a kernel that is a function of the element alone
UNARY = ("RELU", "RELU6", "RELU_N1_TO_1", "LEAKY_RELU", "HARD_SWISH", "LOGISTIC", "TANH",
         "QUANTIZE", "ABS", "ELU", "RSQRT", "TABLE_LOOKUP", "CHANNEL_TABLE")
# int8 ADD / SUB / MUL with a constant operand broadcast over height and width (a per-channel
# or scalar constant): per element like a unary op
BINARY = ("ADD", "SUB", "MUL")
KINDS = POOLS + PADS + UNARY + BINARY


def two_activations(op, g) -> bool:
    """A binary op over two different int8 activations of its output's shape (no broadcast):
    in a stage one is the previous layer's output, the other an earlier layer's, read from its
    patch buffer like a fused ADD's skip input (patch/stage.py skips_of)."""
    if len(op.inputs) != 2 or any(t is None for t in op.inputs) or op.inputs[0] == op.inputs[1]:
        return False
    ts = [g.t(t) for t in op.inputs]
    y = g.t(op.outputs[0])
    return all(not t.is_const and t.dtype == "int8" and tuple(t.shape) == tuple(y.shape) for t in ts)


def main_operand(op, g) -> str | None:
    """The activation a binary op with one constant operand slides over (None: not such an
    op: both operands activations, both constant, or a constant that varies over height or
    width, which a row band would have to slice)."""
    if len(op.inputs) != 2 or any(t is None for t in op.inputs):
        return None
    const = [g.t(t).is_const for t in op.inputs]
    if const.count(True) != 1:
        return None
    c = g.t(op.inputs[const.index(True)])
    dims = [1] * (4 - len(c.shape)) + list(c.shape)
    if len(dims) != 4 or dims[0] != 1 or dims[1] != 1 or dims[2] != 1:
        return None
    return op.inputs[const.index(False)]


def _image(g, tid):
    t = g.t(tid)
    return t if t.dtype == "int8" and len(t.shape) == 4 and t.shape[0] == 1 else None


def main_input(op, g=None, prev=None) -> str | None:
    """The tensor op's window slides over (a CONV_2D_ADD's input 0 is its skip input; a binary
    op's is its operand that is not constant, or over two activations the previous layer's
    output prev)."""
    if op.kind in BINARY:
        if two_activations(op, g):
            return prev if prev in op.inputs else None
        return main_operand(op, g)
    return op.inputs[1] if op.kind == "CONV_2D_ADD" else op.inputs[0]


def skip_input(op, prev) -> str | None:
    """The skip input of a layer whose main input is prev: a fused ADD's input 0, a binary
    op's other operand (a constant there is no skip: it is in no patch buffer)."""
    if op.kind == "CONV_2D_ADD":
        return op.inputs[0]
    if op.kind in BINARY and prev in op.inputs:
        return next((t for t in op.inputs if t != prev), None)
    return None


def layer_args(op, g, out_size, pad_before) -> tuple | None:
    """(kind, in_h, in_w, in_c, out_h, out_w, out_c, kh, kw, sh, sw, dh, dw, pad_t, pad_l) of
    a pool, PAD or unary op over an int8 batch-1 NHWC tensor, or None if it cannot be in a
    stage. out_size / pad_before: TFLite's rules (kernels/conv.py), passed in by patch.py."""
    if op.kind not in KINDS or not op.inputs or op.inputs[0] is None:
        return None
    xid = op.inputs[0]
    if op.kind in BINARY:   # a constant operand, or two activations of the output's shape
        xid = main_operand(op, g) or (op.inputs[0] if two_activations(op, g) else None)
    if xid is None:
        return None
    x, y = _image(g, xid), _image(g, op.outputs[0])
    if x is None or y is None:
        return None
    _, in_h, in_w, in_c = x.shape
    _, out_h, out_w, out_c = y.shape
    if op.kind in POOLS:
        a = op.attrs
        kh, kw = int(a.get("filter_height", 1)), int(a.get("filter_width", 1))
        sh, sw = int(a.get("stride_h", 1)), int(a.get("stride_w", 1))
        padding = a.get("padding", "VALID")
        if padding not in ("SAME", "VALID") or min(kh, kw, sh, sw) < 1 or in_c != out_c \
                or (out_size(padding, in_h, kh, sh, 1), out_size(padding, in_w, kw, sw, 1)) != (out_h, out_w):
            return None
        return (op.kind, in_h, in_w, in_c, out_h, out_w, out_c, kh, kw, sh, sw, 1, 1,
                pad_before(in_h, out_h, kh, sh, 1), pad_before(in_w, out_w, kw, sw, 1))
    if op.kind in PADS:
        pads = pad_amounts(op, g)
        if pads is None or (out_h, out_w, out_c) != (in_h + sum(pads[0]), in_w + sum(pads[1]), in_c):
            return None
        return (op.kind, in_h, in_w, in_c, out_h, out_w, out_c, 1, 1, 1, 1, 1, 1, pads[0][0], pads[1][0])
    if tuple(x.shape) != tuple(y.shape):
        return None
    return (op.kind, in_h, in_w, in_c, out_h, out_w, out_c, 1, 1, 1, 1, 1, 1, 0, 0)


def pad_amounts(op, g) -> tuple | None:
    """((top, bottom), (left, right)) of a PAD / PADV2 over height and width only, or None
    (batch or channel padding, a paddings tensor that is not constant)."""
    if len(op.inputs) < 2 or op.inputs[1] is None:
        return None
    pt = g.t(op.inputs[1])
    if not pt.is_const:
        return None
    pads = np.asarray(pt.data).reshape(-1)
    if pads.size != 8:
        return None
    pads = [int(v) for v in pads]
    if any(v < 0 for v in pads) or pads[0] or pads[1] or pads[6] or pads[7]:
        return None
    return (pads[2], pads[3]), (pads[4], pads[5])
