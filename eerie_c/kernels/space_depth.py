"""SPACE_TO_DEPTH, DEPTH_TO_SPACE, BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND (NHWC).

All four only rearrange elements, so each is an index map built in numpy at compile time and
handed to _copyplan (merged loops, memcpy of the contiguous channel runs). int8 values are
copied as they are: TFLM does not requantize (it requires equal quantization for the
space/depth pair, and ignores it for the *_ND pair).

SPACE_TO_DEPTH / DEPTH_TO_SPACE use TFLite's depth order (block row, block column, channel):
  s2d: out[b, h, w, (dh * bs + dw) * C + c] = in[b, h * bs + dh, w * bs + dw, c]
BATCH_TO_SPACE_ND / SPACE_TO_BATCH_ND (3-D NHC or 4-D NHWC, as TFLM) pair the batch-side
tensor T and the space-side tensor S by
  T[(sh * bw + sw) * B + b, i, j, c] = S[b, i * bh + sh - top, j * bw + sw - left, c]
where (top, left) is the crop (B2S) or the padding (S2B). Each of the bh * bw blocks is a box
copy. Positions of a padded S2B output that fall in the padding hold real 0: 0.0f for
float32 and the output zero point for int8, as TensorFlow Lite defines it. (TFLM's kernel
pads with SpaceToBatchParams.output_offset, which it never initialises -- the padding it
writes is whatever its persistent arena held, e.g. 0 or 32 -- so the tests compare padding
positions with the zero point and every other position with TFLM.)

The dtypes are those TFLM accepts: float32 and int8.
"""
from __future__ import annotations

import numpy as np

from ..errors import EerieError
from . import Lowered, kernel
from ._copyplan import copy_body, copy_nd, flat_index

TYPES = ("float32", "int8")


def _check_io(what, x, y):
    if x.dtype != y.dtype:
        raise EerieError(f"{what}: input {x.dtype} but output {y.dtype}")


def _block_size(op, what):
    bs = int(op.attrs.get("block_size", 0))
    if bs < 1:
        raise EerieError(f"{what}: block_size {bs} must be at least 1")
    return bs


@kernel("SPACE_TO_DEPTH", dtypes=TYPES)
def lower_space_to_depth(op, g, ctx):
    what = f"SPACE_TO_DEPTH (op {op.index})"
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    _check_io(what, x, y)
    bs = _block_size(op, what)
    if len(x.shape) != 4 or x.shape[1] % bs or x.shape[2] % bs:
        raise EerieError(f"{what}: needs a 4-D input with H and W divisible by {bs}, got {list(x.shape)}")
    b, h, w, c = x.shape
    expect = [b, h // bs, w // bs, c * bs * bs]
    if list(y.shape) != expect:
        raise EerieError(f"{what}: output {list(y.shape)}, expected {expect}")
    idx = flat_index(x.shape).reshape(b, h // bs, bs, w // bs, bs, c).transpose(0, 1, 3, 2, 4, 5)
    return Lowered(body=copy_body(idx, ctx), inputs=[x.id], outputs=[y.id],
                   comment=f"SPACE_TO_DEPTH {op.name} block {bs}".replace("*/", ""))


@kernel("DEPTH_TO_SPACE", dtypes=TYPES)
def lower_depth_to_space(op, g, ctx):
    what = f"DEPTH_TO_SPACE (op {op.index})"
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    _check_io(what, x, y)
    bs = _block_size(op, what)
    if len(x.shape) != 4 or x.shape[3] % (bs * bs):
        raise EerieError(f"{what}: needs a 4-D input with depth divisible by {bs * bs}, got {list(x.shape)}")
    b, h, w, c = x.shape
    co = c // (bs * bs)
    expect = [b, h * bs, w * bs, co]
    if list(y.shape) != expect:
        raise EerieError(f"{what}: output {list(y.shape)}, expected {expect}")
    idx = flat_index(x.shape).reshape(b, h, w, bs, bs, co).transpose(0, 1, 3, 2, 4, 5)
    return Lowered(body=copy_body(idx, ctx), inputs=[x.id], outputs=[y.id],
                   comment=f"DEPTH_TO_SPACE {op.name} block {bs}".replace("*/", ""))


def _const_ints(op, g, k, what, name):
    if len(op.inputs) <= k or op.inputs[k] is None or not g.t(op.inputs[k]).is_const:
        raise EerieError(f"{what}: {name} must be a constant tensor")
    return [int(v) for v in np.asarray(g.t(op.inputs[k]).data).reshape(-1)]


def _nd_params(op, g, what, x):
    """(block [bh, bw], edges [[top, bottom], [left, right]]) with 3-D input as W = 1."""
    rank = len(x.shape)
    if rank not in (3, 4):
        raise EerieError(f"{what}: TFLM supports 3-D and 4-D inputs, got {list(x.shape)}")
    block = _const_ints(op, g, 1, what, "block_shape")
    edges = _const_ints(op, g, 2, what, "crops/paddings")
    spatial = rank - 2
    if len(block) != spatial or len(edges) != 2 * spatial:
        raise EerieError(f"{what}: block_shape {block} / crops-paddings {edges} do not fit a "
                         f"{rank}-D input")
    if min(block) < 1 or min(edges) < 0:
        raise EerieError(f"{what}: block_shape {block} must be >= 1 and crops/paddings {edges} >= 0")
    if spatial == 1:
        block, edges = block + [1], edges + [0, 0]
    return block, [edges[0:2], edges[2:4]]


def _as4(shape):
    return list(shape) + [1] if len(shape) == 3 else list(shape)


def _blocks(S_shape, T_shape, block, top, left, ctx, src_is_T):
    """Box copies between the space-side S and batch-side T (4-D shapes, NHWC)."""
    B, SH, SW, C = S_shape
    _, TH, TW, _ = T_shape
    bh, bw = block
    S_idx, T_idx = flat_index(S_shape), flat_index(T_shape)
    bodies, covered = [], 0
    for sh in range(bh):
        rows = [i for i in range(TH) if 0 <= i * bh + sh - top < SH]
        for sw in range(bw):
            cols = [j for j in range(TW) if 0 <= j * bw + sw - left < SW]
            if not rows or not cols:
                continue
            ti = T_idx[(sh * bw + sw) * B:(sh * bw + sw + 1) * B][:, rows][:, :, cols]
            si = S_idx[:, [i * bh + sh - top for i in rows]][:, :, [j * bw + sw - left for j in cols]]
            src, dst = (ti, si) if src_is_T else (si, ti)
            bodies.append(copy_nd(src, dst, ctx, hint=f"blk{sh}_{sw}"))
            covered += ti.size
    return bodies, covered


@kernel("BATCH_TO_SPACE_ND", dtypes=TYPES)
def lower_batch_to_space(op, g, ctx):
    what = f"BATCH_TO_SPACE_ND (op {op.index})"
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    _check_io(what, x, y)
    block, (ch, cw) = _nd_params(op, g, what, x)
    T = _as4(x.shape)
    if T[0] % (block[0] * block[1]):
        raise EerieError(f"{what}: batch {T[0]} is not divisible by the block {block}")
    S = [T[0] // (block[0] * block[1]), T[1] * block[0] - sum(ch), T[2] * block[1] - sum(cw), T[3]]
    if _as4(y.shape) != S or len(y.shape) != len(x.shape) or min(S) < 1:
        raise EerieError(f"{what}: output {list(y.shape)}, expected {S[:len(x.shape)]}")
    bodies, covered = _blocks(S, T, block, ch[0], cw[0], ctx, src_is_T=True)
    assert covered == y.size
    return Lowered(body="".join(bodies), inputs=[x.id], outputs=[y.id],
                   comment=f"BATCH_TO_SPACE_ND {op.name} block {block}".replace("*/", ""))


@kernel("SPACE_TO_BATCH_ND", dtypes=TYPES)
def lower_space_to_batch(op, g, ctx):
    what = f"SPACE_TO_BATCH_ND (op {op.index})"
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    _check_io(what, x, y)
    block, (ph, pw) = _nd_params(op, g, what, x)
    S = _as4(x.shape)
    hp, wp = S[1] + sum(ph), S[2] + sum(pw)
    if hp % block[0] or wp % block[1]:
        raise EerieError(f"{what}: padded size {[hp, wp]} is not divisible by the block {block}")
    T = [S[0] * block[0] * block[1], hp // block[0], wp // block[1], S[3]]
    if _as4(y.shape) != T or len(y.shape) != len(x.shape):
        raise EerieError(f"{what}: output {list(y.shape)}, expected {T[:len(x.shape)]}")
    bodies, covered = _blocks(S, T, block, ph[0], pw[0], ctx, src_is_T=False)
    fill = ""
    zp = y.zero_point if y.dtype == "int8" and y.quant is not None else 0
    if covered < y.size and zp == 0:
        fill = f"memset(out0, 0, {y.size} * sizeof(*out0));\n"   # padding: real 0
    elif covered < y.size:
        fill = (f"memset(out0, {zp}, {y.size});   /* padding: real 0 is the zero point */\n")
    if not bodies:
        fill += "(void)in0;\n"
    return Lowered(body=fill + "".join(bodies), inputs=[x.id], outputs=[y.id],
                   comment=f"SPACE_TO_BATCH_ND {op.name} block {block}".replace("*/", ""))
