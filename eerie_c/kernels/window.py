"""The sliding window of CONV_2D, DEPTHWISE_CONV_2D and the ops built like them: TFLite's
output size and padding (only the floor half of an odd total before the image), or the explicit
padding of a folded PAD (passes/fold_pad.py), checked against the model's output shape, the
window's interior (outputs that see no out-of-image tap) as a C condition, and the checks of a
conv's operands against it. A row band of a patch stage (patch/band_kernels.py, op
attribute `tile_window`) brings its own top and left padding: the image's only at the image's
edges. patch/stage.py computes stage geometry with the same out_size / pad_before.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import EerieError
from ..ir.window_size import out_size  # noqa: F401 (patch/stage.py imports it from here too)


@dataclass
class Window:
    """Compile-time geometry of one sliding-window op, per spatial axis."""
    kh: int
    kw: int
    sh: int
    sw: int
    dh: int
    dw: int
    pad_t: int
    pad_l: int
    out_h: int
    out_w: int
    has_interior: bool        # some output positions see only in-bounds taps
    has_border: bool          # some output positions see an out-of-bounds tap
    interior_cond: str        # C condition on (oy, ox) for "interior"; "" if all or none
    interior: tuple = (0, 0, 0, 0)   # the interior as [ylo, yhi) x [xlo, xhi) of output indices

    def keeps_pixels(self, in_h: int, in_w: int) -> bool:
        """Stride 1 and as many output rows and columns as input ones: output pixel p is
        computed from input pixel p onwards (what the in-place kernels rely on)."""
        return (self.sh, self.sw, self.out_h, self.out_w) == (1, 1, in_h, in_w)


def pad_before(size: int, out: int, k: int, stride: int, dilation: int) -> int:
    eff = (k - 1) * dilation + 1
    return max((out - 1) * stride + eff - size, 0) // 2


def _interior_range(size: int, out: int, k: int, stride: int, dilation: int, pad: int):
    """[lo, hi) of output indices whose whole (dilated) window lies inside [0, size)."""
    ok = [o * stride - pad >= 0 and o * stride - pad + (k - 1) * dilation <= size - 1
          for o in range(out)]
    idx = [o for o, v in enumerate(ok) if v]
    if not idx:
        return 0, 0
    return idx[0], idx[-1] + 1   # contiguous: the window start grows monotonically


def window(op, in_h: int, in_w: int, kh: int, kw: int, out_shape, what: str) -> Window:
    """TFLite's padding computation, checked against the model's output shape."""
    a = op.attrs
    sh, sw = int(a.get("stride_h", 1)), int(a.get("stride_w", 1))
    dh, dw = int(a.get("dilation_h_factor", 1) or 1), int(a.get("dilation_w_factor", 1) or 1)
    padding = a.get("padding", "VALID")
    if padding not in ("SAME", "VALID", "EXPLICIT"):
        raise EerieError(f"{what}: unsupported padding {padding!r}")
    if min(sh, sw, dh, dw) < 1:
        raise EerieError(f"{what}: stride and dilation must be >= 1 (got stride {sh}x{sw}, "
                         f"dilation {dh}x{dw})")
    explicit = a.get("explicit_padding") if padding == "EXPLICIT" else None
    if explicit is not None:   # a folded PAD (passes/fold_pad.py): VALID over the padded size
        t, b, left, r = explicit
        out_h = out_size("VALID", in_h + t + b, kh, sh, dh)
        out_w = out_size("VALID", in_w + left + r, kw, sw, dw)
    else:
        out_h = out_size(padding, in_h, kh, sh, dh)
        out_w = out_size(padding, in_w, kw, sw, dw)
    band = a.get("tile_window")   # patch/band_kernels.py: one row band of a patch stage,
    if band is not None:          # whose padding is the image's only at the image's edges
        out_h, out_w = out_shape[1], out_shape[2]
    if (out_h, out_w) != (out_shape[1], out_shape[2]) or out_h < 1 or out_w < 1:
        raise EerieError(f"{what}: output is {out_shape[1]}x{out_shape[2]} but {padding} padding "
                         f"with a {kh}x{kw} kernel, stride {sh}x{sw}, dilation {dh}x{dw} on a "
                         f"{in_h}x{in_w} input gives {out_h}x{out_w}")
    if band is not None:
        pad_t, pad_l = band["pad_t"], band["pad_l"]
    elif explicit is not None:
        pad_t, pad_l = explicit[0], explicit[2]
    else:
        pad_t, pad_l = pad_before(in_h, out_h, kh, sh, dh), pad_before(in_w, out_w, kw, sw, dw)
    ylo, yhi = _interior_range(in_h, out_h, kh, sh, dh, pad_t)
    xlo, xhi = _interior_range(in_w, out_w, kw, sw, dw, pad_l)
    has_interior = yhi > ylo and xhi > xlo
    all_interior = (ylo, yhi, xlo, xhi) == (0, out_h, 0, out_w)
    terms = []
    if has_interior and not all_interior:
        if ylo > 0:
            terms.append(f"oy >= {ylo}")
        if yhi < out_h:
            terms.append(f"oy < {yhi}")
        if xlo > 0:
            terms.append(f"ox >= {xlo}")
        if xhi < out_w:
            terms.append(f"ox < {xhi}")
    return Window(kh, kw, sh, sw, dh, dw, pad_t, pad_l, out_h, out_w,
                  has_interior, not all_interior, " && ".join(terms), (ylo, yhi, xlo, xhi))


def conv_window(op, x, w, b, y, what: str) -> Window:
    """CONV_2D (any dtype): the weights [out_c, kh, kw, in_c] checked against the input,
    output and bias; the sliding window."""
    in_c = x.shape[3]
    out_c, kh, kw, w_in_c = w.shape
    if w_in_c != in_c:
        # (grouped convolutions were split into one conv per group by
        # passes/split_grouped_conv.py: what reaches here fits no grouping)
        raise EerieError(f"{what}: weights expect {w_in_c} input channels but the input has "
                         f"{in_c}, which is no grouped convolution either (groups = input "
                         f"channels / weight channels must divide the {out_c} filters)")
    return _checked_window(op, x, b, y, out_c, kh, kw, what, "filters")


def depthwise_window(op, x, w, b, y, what: str) -> Window:
    """DEPTHWISE_CONV_2D (any dtype): the weights [1, kh, kw, out_c], out_c a multiple of
    in_c that agrees with depth_multiplier, checked against the input, output and bias; the
    sliding window."""
    in_c = x.shape[3]
    one, kh, kw, out_c = w.shape
    if one != 1:
        raise EerieError(f"{what}: weights must have shape [1, kh, kw, channels], got {list(w.shape)}")
    if in_c == 0 or out_c % in_c != 0:
        raise EerieError(f"{what}: {out_c} weight channels is not a multiple of the {in_c} "
                         f"input channels")
    attr_mult = int(op.attrs.get("depth_multiplier", 0) or 0)
    if attr_mult not in (0, out_c // in_c):
        raise EerieError(f"{what}: depth_multiplier {attr_mult} disagrees with {in_c} input and "
                         f"{out_c} weight channels")
    return _checked_window(op, x, b, y, out_c, kh, kw, what, "weight channels")


def _checked_window(op, x, b, y, out_c, kh, kw, what, channels_are):
    batches, in_h, in_w = x.shape[:3]
    if y.shape[0] != batches or y.shape[3] != out_c:
        raise EerieError(f"{what}: output {list(y.shape)} does not match {batches} batches and "
                         f"{out_c} {channels_are}")
    if b is not None and b.size != out_c:
        raise EerieError(f"{what}: bias has {b.size} values for {out_c} output channels")
    return window(op, in_h, in_w, kh, kw, y.shape, what)


def op_what(op) -> str:
    return f"{op.kind} (op {op.index}{', ' + op.name.split(';')[0] if op.name else ''})"
