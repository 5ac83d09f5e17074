"""Lowerings of PyTorch's 2-D upsampling (F.interpolate): upsample_nearest2d,
_upsample_nearest_exact2d and upsample_bilinear2d (align_corners either way) ->
RESIZE_NEAREST_NEIGHBOR / RESIZE_BILINEAR, NHWC between transposes.

The kernels follow TFLite's coordinate rules. Where torch's rule gives the same source rows /
columns (and, for bilinear, the same weight per source) as one of TFLite's attribute
combinations, the op gets those attributes, so it is the op a TFLite model would have.
Otherwise (a `scale_factor` whose reciprocal is not H_in / H_out, e.g. 1.5 on 5 rows) the
op carries torch's own tables (`src_rows` / `src_cols`, `rows` / `cols`; kernels/resize.py).

Nearest: torch's source indices are taken from torch itself, by running the node's own op
on probe tensors holding each row's (column's) index, so every variant and scale rule is
torch's by construction. Bilinear: torch's CPU rule (aten/src/ATen/native/UpSample.h), in
float32: scale = 1 / scale_factor if given, else H_in / H_out ((H_in - 1) / (H_out - 1) with
align_corners); source = scale * i (align_corners) or max(scale * (i + 0.5) - 0.5, 0);
lo = min(floor(source), H_in - 1), hi = lo + 1 if lo < H_in - 1 else lo, and the weight of
hi = clamp(source - lo, 0, 1); an axis whose size does not change is copied.
"""
from __future__ import annotations

import numpy as np

from ...errors import EerieError
from ...ir.resize_coords import bilinear_taps, nearest_index
from .lower_nn import _nchw_in, _nchw_out
from .registry import lowers


def _scales(node, n_rest):
    """(scale_h, scale_w) as the op received them (None where not given)."""
    name = node.target.__name__
    if name.endswith(".vec"):
        sf = node.args[-1] if len(node.args) == n_rest + 1 else node.kwargs.get("scale_factors")
        return (None, None) if sf is None else (float(sf[0]), float(sf[1]))
    # .default: (input, output_size[, align_corners], scales_h, scales_w)
    rest = list(node.args[n_rest:]) + [None, None]
    return rest[0], rest[1]


def _resize(L, node, x, kind, attrs):
    """x (NCHW) resized to the node's output size by `kind` with `attrs`."""
    what = f"{node.name}"
    oshape = L.meta_shape()
    if len(oshape) != 4:
        raise EerieError(f"{what}: only 2-D upsampling of a 4-D NCHW tensor is supported")
    xn = _nchw_in(L, x, what)
    n, _, _, c = L.t(xn).shape
    size = L.const(np.array(oshape[2:4], np.int32), "int32", "size")
    y = L.op(kind, [xn, size], (n, oshape[2], oshape[3], c), L.t(xn).dtype, attrs)
    return _nchw_out(L, y)


# ---- nearest -------------------------------------------------------------------------------

def _probe_nearest(L, node, h, w):
    """torch's source row of each output row and column: the node's op run on [1, 1, h, w]
    tensors holding the row (column) index of each element (exact in float32)."""
    torch = L.torch
    rows = torch.arange(h, dtype=torch.float32).view(1, 1, h, 1).expand(1, 1, h, w).contiguous()
    cols = torch.arange(w, dtype=torch.float32).view(1, 1, 1, w).expand(1, 1, h, w).contiguous()
    with torch.no_grad():
        r = node.target(rows, *node.args[1:], **node.kwargs)
        k = node.target(cols, *node.args[1:], **node.kwargs)
    return [int(v) for v in r[0, 0, :, 0]], [int(v) for v in k[0, 0, 0, :]]


@lowers("upsample_nearest2d", "_upsample_nearest_exact2d")
def _upsample_nearest(L, node, x, *rest, **kw):
    x = L.ensure_act(x, node.name)
    _, _, h, w = L.t(x).shape
    oh, ow = L.meta_shape()[2:4]
    rows, cols = _probe_nearest(L, node, h, w)
    # TFLite's rules: floor(i * H_in / H_out), or floor((i + 0.5) * H_in / H_out) (half pixel).
    for half in (False, True):
        if nearest_index(h, oh, False, half) == rows and nearest_index(w, ow, False, half) == cols:
            return _resize(L, node, x, "RESIZE_NEAREST_NEIGHBOR",
                           {"align_corners": False, "half_pixel_centers": half})
    return _resize(L, node, x, "RESIZE_NEAREST_NEIGHBOR",
                   {"align_corners": False, "half_pixel_centers": False, "src_rows": rows, "src_cols": cols})


# ---- bilinear ------------------------------------------------------------------------------

def torch_bilinear_table(n_in, n_out, align, scale_factor):
    """[lo, hi, frac] per output index along one axis, by torch's rule (module docstring)."""
    f32 = np.float32
    if n_in == n_out:
        return [[i, i, 0.0] for i in range(n_out)]
    if align:
        scale = f32(n_in - 1) / f32(n_out - 1) if n_out > 1 else f32(0)
    elif scale_factor is not None and scale_factor > 0:
        scale = f32(1.0 / scale_factor)
    else:
        scale = f32(n_in) / f32(n_out)
    table = []
    for i in range(n_out):
        if align:
            src = f32(scale * f32(i))
        else:
            src = f32(f32(scale * f32(f32(i) + f32(0.5))) - f32(0.5))
            src = max(src, f32(0))
        lo = min(int(np.floor(src)), n_in - 1)
        hi = lo + 1 if lo < n_in - 1 else lo
        frac = min(max(f32(src - f32(lo)), f32(0)), f32(1))
        table.append([lo, hi, float(frac)])
    return table


def _weights(table, n_in):
    """The weight of each source index for each output: rows of an n_out x n_in matrix."""
    m = np.zeros((len(table), n_in), np.float64)
    for i, (lo, hi, frac) in enumerate(table):
        m[i, lo] += 1.0 - frac
        m[i, hi] += frac
    return m


def _tflite_bilinear(n_in, n_out, align, half):
    lo, hi, frac = bilinear_taps(n_in, n_out, align, half)
    return [[a, b, float(f)] for a, b, f in zip(lo, hi, frac)]


@lowers("upsample_bilinear2d")
def _upsample_bilinear(L, node, x, output_size=None, align_corners=False, *rest, **kw):
    x = L.ensure_act(x, node.name)
    _, _, h, w = L.t(x).shape
    oh, ow = L.meta_shape()[2:4]
    align = bool(align_corners)
    sh, sw = _scales(node, 3)
    rows, cols = torch_bilinear_table(h, oh, align, sh), torch_bilinear_table(w, ow, align, sw)
    # TFLite's rule with the same weights per source (its half-pixel rule lets the source go
    # below 0 where torch clamps it at 0: the same row twice, weights summing to one).
    half = not align
    same = all(np.allclose(_weights(mine, n), _weights(_tflite_bilinear(n, o, align, half), n),
                           rtol=0, atol=1e-6)
               for mine, n, o in ((rows, h, oh), (cols, w, ow)))
    attrs = {"align_corners": align, "half_pixel_centers": half}
    if not same:
        attrs.update(rows=rows, cols=cols)
    return _resize(L, node, x, "RESIZE_BILINEAR", attrs)
