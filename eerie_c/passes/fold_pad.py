"""Fold a constant PAD into the convolution that reads it:

    p = PAD(x, [[0, 0], [t, b], [l, r], [0, 0]])     y = CONV_2D(x, w, bias, padding=EXPLICIT,
    y = CONV_2D(p, w, bias, padding=VALID)    ->                 explicit_padding=[t', b', l', r'])

Keras' MobileNetV2 (and every model built on it, Edge Impulse's FOMO detectors among them)
puts a ZeroPadding2D before each stride-2 depthwise convolution, and PyTorch programs whose
padding is no SAME / VALID come out of the frontend the same way. Run as its own layer, the
PAD writes a padded copy of the whole image (on a 96x96 FOMO model: a third of the
instructions) and holds a second image in the arena. Folded, the convolution reads x and
treats taps outside it as padding, as it already does for SAME: no copy, no extra tensor.

Exact, because the kernels skip an out-of-image tap, which is the same as a tap that holds the
input's zero (int8: the zero point, whose offset-corrected value is 0; float: +0.0). So the
fold requires that value: an int8 PAD / PADV2 whose pad value is the zero point of x, with
the same scale and zero point on x and p (the conv then folds the same input offset), or a
float32 one padding with 0.0 into finite weights (an infinite weight times a padded 0 would be
NaN; a skipped tap adds nothing). The convolution's own SAME padding, computed on p's size,
adds to the PAD's (t' = t + its top padding, and so on: kernels/window.py).

Conditions (anything else is left alone): the PAD pads height and width only, by at most the
dilated kernel extent minus one per side (every window still touches the image, as with
SAME); p is read by that one CONV_2D / DEPTHWISE_CONV_2D only, as its input 0, is no graph
output and no control-flow body reads it; neither op lies in a control-flow body.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..ir import Graph, Op

CONVS = ("CONV_2D", "DEPTHWISE_CONV_2D")


def _pads(g: Graph, pad: Op) -> list[int] | None:
    """[top, bottom, left, right] of a PAD over height and width of an NHWC tensor, or None."""
    if pad.kind not in ("PAD", "PADV2") or len(pad.inputs) < 2 or pad.inputs[1] is None:
        return None
    pt = g.t(pad.inputs[1])
    if not pt.is_const or pt.size != 8:
        return None
    p = [int(v) for v in np.asarray(pt.data).reshape(-1)]
    if p[0] or p[1] or p[6] or p[7] or min(p) < 0:
        return None
    return p[2:6]


def _pad_value_is_zero(g: Graph, pad: Op) -> bool:
    x, p = g.t(pad.inputs[0]), g.t(pad.outputs[0])
    cv = g.t(pad.inputs[2]) if len(pad.inputs) > 2 and pad.inputs[2] is not None else None
    if cv is not None and (not cv.is_const or cv.size != 1):
        return False
    value = None if cv is None else np.asarray(cv.data).reshape(-1)[0]
    if x.dtype == "float32":
        return value is None or float(value) == 0.0
    if x.dtype != "int8" or x.quant is None or p.quant is None \
            or len(x.quant.scale) != 1 or len(p.quant.scale) != 1:
        return False
    same = x.zero_point == p.zero_point and np.float32(x.scale) == np.float32(p.scale)
    return same and (value is None or int(value) == p.zero_point)


def _foldable(g: Graph, pad: Op, conv: Op, readers) -> list[int] | None:
    pads = _pads(g, pad)
    if pads is None or pad.regions or conv.regions or conv.kind not in CONVS:
        return None
    p = pad.outputs[0]
    if len(pad.outputs) != 1 or p in g.outputs or readers.get(p) != [conv] \
            or conv.inputs.count(p) != 1 or conv.inputs[0] != p:
        return None
    x, w, y = g.t(pad.inputs[0]), g.t(conv.inputs[1]), g.t(conv.outputs[0])
    if x.is_const or x.variable or not w.is_const or len(x.shape) != 4 \
            or x.dtype != g.t(p).dtype or y.dtype != x.dtype:
        return None
    if x.dtype == "float32" and not np.isfinite(np.asarray(w.data, np.float64)).all():
        return None
    if not _pad_value_is_zero(g, pad):
        return None
    a = conv.attrs
    if a.get("padding", "VALID") not in ("SAME", "VALID"):
        return None
    _, kh, kw, _ = w.shape
    dh, dw = int(a.get("dilation_h_factor", 1) or 1), int(a.get("dilation_w_factor", 1) or 1)
    sh, sw = int(a.get("stride_h", 1)), int(a.get("stride_w", 1))
    padded = g.t(p).shape
    total = list(pads)
    for axis, (k, s, d) in enumerate(((kh, sh, dh), (kw, sw, dw))):
        size, out = padded[1 + axis], y.shape[1 + axis]
        eff = (k - 1) * d + 1
        if a.get("padding") == "SAME":   # the conv's own padding, on the padded size
            extra = max((out - 1) * s + eff - size, 0)
            total[2 * axis] += extra // 2
            total[2 * axis + 1] += extra - extra // 2
        if max(total[2 * axis], total[2 * axis + 1]) > eff - 1:
            return None
    return total


def fold_pad(g: Graph) -> Graph:
    readers = g.readers(regions=True)
    producers = {t: op for op in g.ops for t in op.outputs}
    folded: set[int] = set()
    new: dict[int, Op] = {}
    for conv in g.ops:
        if conv.kind not in CONVS or not conv.inputs or conv.inputs[0] is None:
            continue
        pad = producers.get(conv.inputs[0])
        total = None if pad is None else _foldable(g, pad, conv, readers)
        if total is None:
            continue
        new[id(conv)] = replace(conv, inputs=[pad.inputs[0]] + list(conv.inputs[1:]), attrs={
            **conv.attrs, "padding": "EXPLICIT", "explicit_padding": total})
        folded.add(id(pad))
    # in place, not a new Graph: a graph carries attributes beyond its fields
    g.ops = [new.get(id(op), op) for op in g.ops if id(op) not in folded]
    return g
