"""Float32 CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED: the register-blocked kernels'
constants (conv.py, depthwise.py and fully_connected.py call these for float inputs).

The kernels keep blocks of outputs in registers (several output pixels x 4 output channels for
a conv, 8 units for a fully connected layer, 2 output pixels x 4 channels for a depthwise
conv) and accumulate with EERIE_FMAF (templates/helpers/fma_f32.c.j2: one VFMA on an FPv4 /
FPv5 core). The weights are re-laid out here so that the inner loop reads them in order: a
conv's as [out_c / 4][kh][kw][in_c][4], a fully connected layer's as [units / 8][depth][8];
the output channels are zero-padded to the block (the padding's outputs are never stored).
Every output is still the sum over (ky, kx, ic) in TFLM's order, then the bias."""
from __future__ import annotations

import numpy as np

from . import c_comment

CONV_OC = 4      # output channels per conv block
CONV_PX = 4      # output pixels per conv block (the interior path)
FC_UNITS = 8     # units per fully connected block
DW_CH = 4        # channels per depthwise block
DW_PX = 2        # output pixels per depthwise block (the interior path)


def _pad_rows(a: np.ndarray, n: int) -> np.ndarray:
    """`a` with its first axis zero-padded to a multiple of n."""
    extra = -a.shape[0] % n
    return np.concatenate([a, np.zeros((extra, *a.shape[1:]), a.dtype)]) if extra else a


def conv_vars(ctx, w, b, out_c: int) -> dict:
    """Weights [out_c][kh][kw][in_c] as [ocp / 4][kh][kw][in_c][4], the bias padded to ocp."""
    k = int(np.prod(w.shape[1:]))
    wp = _pad_rows(w.data.reshape(out_c, k).astype(np.float32), CONV_OC)
    ocp = wp.shape[0]
    blocked = wp.reshape(ocp // CONV_OC, CONV_OC, k).transpose(0, 2, 1)
    v = dict(ocp=ocp, ob=CONV_OC, px=CONV_PX)
    v["weights"] = ctx.const(blocked, "float", "weights", c_comment(w.label) + (
        f" ({ocp // CONV_OC} blocks of {CONV_OC} output channels, interleaved per tap)"))
    v["bias"] = None if b is None else ctx.const(
        _pad_rows(b.data.reshape(-1).astype(np.float32), CONV_OC), "float", "bias", c_comment(b.label))
    return v


def fc_vars(ctx, w, b, units: int, depth: int) -> dict:
    """Weights [units][depth] as [up / 8][depth][8], the bias padded to up."""
    ub = FC_UNITS if units > FC_UNITS // 2 else FC_UNITS // 2
    wp = _pad_rows(w.data.reshape(units, depth).astype(np.float32), ub)
    up = wp.shape[0]
    v = dict(up=up, ub=ub)
    v["weights"] = ctx.const(wp.reshape(up // ub, ub, depth).transpose(0, 2, 1), "float", "weights",
                             c_comment(w.label) + f" ({up // ub} blocks of {ub} units, interleaved per input)")
    v["bias"] = None if b is None else ctx.const(
        _pad_rows(b.data.reshape(-1).astype(np.float32), ub), "float", "bias", c_comment(b.label))
    return v
