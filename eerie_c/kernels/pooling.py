"""AVERAGE_POOL_2D, MAX_POOL_2D and L2_POOL_2D on NHWC tensors.

Windows at the borders only cover the in-bounds elements (padding is never read), so an
average divides by the number of elements actually inside the input. int8 and int16 follow
TFLM (the same integer code for both):
input and output must share quantization (TFLM's PoolingPrepare allows a scale difference of
at most 1e-6 and requires equal zero points), the average works on the raw int8 values and
rounds sum / count half away from zero, and the fused activation clamps in the output's
quantized range. int8 MAX_POOL_2D and AVERAGE_POOL_2D have kernels of their own
(_pool_split.py, _pool_avg.py: channel vectors per target, interior windows without bounds).
L2_POOL_2D is float32 only, as in TFLM: sqrtf(sum of squares / count).
"""
import numpy as np

from ..templating import render
from ..errors import EerieError
from . import Lowered, kernel
from ._pool_avg import avg_rescale, avg_split
from ._pool_split import max_split
from ._quant import activation_range_float, activation_range_int


def _out_size(padding: str, size: int, filt: int, stride: int) -> int:
    if padding == "SAME":
        return (size + stride - 1) // stride
    return (size - filt + stride) // stride


def _pad_before(out: int, size: int, filt: int, stride: int) -> int:
    # TFLite's ComputePaddingHeightWidth: any odd padding goes to the end.
    return max(((out - 1) * stride + filt - size) // 2, 0)


def _pool_params(op, g):
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    if len(x.shape) != 4 or len(y.shape) != 4:
        raise EerieError(f"{op.kind} (op {op.index}) needs 4D NHWC tensors, got "
                         f"{list(x.shape)} -> {list(y.shape)}")
    a = op.attrs
    fh, fw = int(a.get("filter_height", 1)), int(a.get("filter_width", 1))
    sh, sw = int(a.get("stride_h", 1)), int(a.get("stride_w", 1))
    padding = a.get("padding", "VALID")
    if padding not in ("SAME", "VALID") or min(fh, fw, sh, sw) < 1:
        raise EerieError(f"{op.kind} (op {op.index}): unsupported padding {padding!r} / "
                         f"filter {fh}x{fw} / stride {sh}x{sw}")
    n, ih, iw, c = x.shape
    oh, ow = _out_size(padding, ih, fh, sh), _out_size(padding, iw, fw, sw)
    band = a.get("tile_window")   # patch/band_kernels.py: one row band of a patch stage,
    if band is not None:          # whose padding is the image's only at the image's edges
        oh, ow = y.shape[1], y.shape[2]
    if tuple(y.shape) != (n, oh, ow, c):
        raise EerieError(f"{op.kind} (op {op.index}): output shape {list(y.shape)} does not match "
                         f"the pooling geometry (expected {[n, oh, ow, c]})")
    ph, pw = _pad_before(oh, ih, fh, sh), _pad_before(ow, iw, fw, sw)
    if band is not None:   # the band's rows clip the windows where the image's do (needs())
        ph, pw = band["pad_t"], band["pad_l"]
    # A window lying wholly in the padding has no element to pool; TFLM fails on it too.
    for o, size, f, s, p in ((oh, ih, fh, sh, ph), (ow, iw, fw, sw, pw)):
        for k in range(o):
            start = k * s - p
            if min(start + f, size) - max(start, 0) <= 0:
                raise EerieError(f"{op.kind} (op {op.index}): a pooling window lies entirely "
                                 f"outside the input")
    return x, y, dict(batches=n, in_h=ih, in_w=iw, channels=c, out_h=oh, out_w=ow,
                      filter_h=fh, filter_w=fw, stride_h=sh, stride_w=sw, pad_h=ph, pad_w=pw)


def _lower_pool(op, g, ctx, mode):
    x, y, geo = _pool_params(op, g)
    act = op.attrs.get("fused_activation_function", "NONE")
    if act not in ("NONE", "RELU", "RELU6", "RELU_N1_TO_1"):
        raise EerieError(f"{op.kind} (op {op.index}): unsupported fused activation {act}")
    if x.dtype != y.dtype:
        raise EerieError(f"{op.kind} (op {op.index}): input {x.dtype} but output {y.dtype}")
    if x.dtype == "float32":
        lo, hi = activation_range_float(act)
        body = render(f"kernels/pool_{'avg' if mode == 'l2' else mode}_f32.c.j2", act_min=lo,
                      act_max=hi, l2=mode == "l2", **geo)
    else:
        if x.quant is None or y.quant is None or x.quant.per_channel or y.quant.per_channel:
            raise EerieError(f"{op.kind} (op {op.index}): {x.dtype} pooling needs per-tensor quantization")
        rescale = mode == "avg" and x.dtype == "int8" and bool(op.attrs.get("rescale"))
        if not rescale and (abs(float(np.float32(x.scale)) - float(np.float32(y.scale))) > 1e-6
                            or x.zero_point != y.zero_point):
            raise EerieError(f"{op.kind} (op {op.index}): {x.dtype} pooling needs the same quantization "
                             f"on input and output (scale {x.scale:g} zp {x.zero_point} vs "
                             f"scale {y.scale:g} zp {y.zero_point}), as TFLM does")
        qmin, qmax = (-128, 127) if x.dtype == "int8" else (-32768, 32767)
        lo, hi = activation_range_int(act, y, qmin, qmax)
        if mode == "avg" and x.dtype == "int8":
            return avg_split(x, y, geo, lo, hi, ctx.target,
                             avg_rescale(x, y, geo) if rescale else None)
        if mode == "max" and x.dtype == "int8":
            return max_split(x, y, geo, lo, hi, ctx.target)
        body = render(f"kernels/pool_{mode}_s8.c.j2", act_min=lo, act_max=hi, ctype=x.ctype,
                      lowest=qmin, **geo)
    return Lowered(body=body, inputs=[x.id], outputs=[y.id])


@kernel("AVERAGE_POOL_2D", dtypes=("int8", "int16", "float32"))
def lower_average_pool(op, g, ctx):
    return _lower_pool(op, g, ctx, "avg")


@kernel("MAX_POOL_2D", dtypes=("int8", "int16", "float32"))
def lower_max_pool(op, g, ctx):
    return _lower_pool(op, g, ctx, "max")


@kernel("L2_POOL_2D", dtypes=("float32",))
def lower_l2_pool(op, g, ctx):
    return _lower_pool(op, g, ctx, "l2")
