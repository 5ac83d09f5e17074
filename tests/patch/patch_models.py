"""Chains of int8 CONV_2D / DEPTHWISE_CONV_2D (and pools, PAD, unary element-wise ops) built in
the tests, for patch stages."""
import numpy as np

from tflite_builder import ACT, PAD, ModelBuilder


def out_size(padding, size, k, stride, dil):
    eff = (k - 1) * dil + 1
    return (size + stride - 1) // stride if padding == "SAME" else (size + stride - eff) // stride


def conv_layer(mb, rng, x, in_shape, scale, spec):
    """One CONV_2D / DEPTHWISE_CONV_2D (spec: chain_model's layer tuple) with random weights
    and bias reading x (in_shape n, h, w, c at `scale`): (y, oh, ow, out_c, y's scale)."""
    kind, out_c, (kh, kw), (sh, sw), padding, (dh, dw), act, per_channel = spec
    n, h, w, c = in_shape
    oc = out_c if kind == "conv" else c
    taps = kh * kw * (c if kind == "conv" else 1)
    wshape = (oc, kh, kw, c) if kind == "conv" else (1, kh, kw, oc)
    wscale = rng.uniform(0.005, 0.015, oc) if per_channel else [0.01]
    wt = mb.const(rng.integers(-127, 128, wshape), "int8", scale=wscale,
                  zero_point=[0] * len(wscale), axis=0 if kind == "conv" else 3)
    bscale = scale * np.asarray(wscale, np.float32)
    b = mb.const(rng.integers(-3000, 3000, oc), "int32", scale=bscale,
                 zero_point=[0] * len(bscale), axis=0)
    oh, ow = out_size(padding, h, kh, sh, dh), out_size(padding, w, kw, sw, dw)
    out_scale = scale * 0.75 * np.sqrt(taps)
    y = mb.tensor([n, oh, ow, oc], "int8", scale=out_scale, zero_point=3)
    opts = dict(padding=PAD[padding], strideH=sh, strideW=sw, dilationHFactor=dh,
                dilationWFactor=dw, fusedActivationFunction=ACT[act])
    if kind == "conv":
        mb.op("CONV_2D", [x, wt, b], [y], "Conv2DOptions", **opts)
    else:
        mb.op("DEPTHWISE_CONV_2D", [x, wt, b], [y], "DepthwiseConv2DOptions", depthMultiplier=1, **opts)
    return y, oh, ow, oc, out_scale


def pool_tail(mb, x, shape, scale, zero_point):
    """An AVERAGE_POOL_2D over the whole image after a chain (not patchable): the chain's last
    output is then an intermediate, as in a real network."""
    n, h, w, c = shape
    y = mb.tensor([n, 1, 1, c], "int8", scale=scale, zero_point=zero_point)
    mb.op("AVERAGE_POOL_2D", [x], [y], "Pool2DOptions", padding=PAD["VALID"], strideH=1,
          strideW=1, filterHeight=h, filterWidth=w, fusedActivationFunction=0)
    return y


def chain_model(in_shape, layers, seed=0, tail=None):
    """layers: (kind "conv" / "dw", out_c (conv), (kh, kw), (sh, sw), padding, (dh, dw), act,
    per_channel), or a kind of OTHER (other_layer: out_c is then the PAD's ((top, bottom),
    (left, right)), the unary op's kind, a constant operand's (kind, shape, first?) or a skip
    operand's (kind, index of an earlier layer's output, 1-based, first?)). Output scales
    follow the accumulator's spread so outputs stay mostly unsaturated. tail: "pool" adds an AVERAGE_POOL_2D after the chain (not patchable)."""
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    n, h, w, c = in_shape
    scale = 0.05
    x = mb.input(list(in_shape), "int8", scale=scale, zero_point=-7)
    outs = [x]   # the input, then each layer's output (a "skip" layer's other operand)
    for kind, out_c, (kh, kw), (sh, sw), padding, (dh, dw), act, per_channel in layers:
        if kind in OTHER:   # pools, PAD, unary element-wise ops (other_layer)
            if kind == "skip":   # out_c: (ADD / SUB / MUL, index in outs, it first?)
                out_c = (out_c[0], outs[out_c[1]], out_c[2])
            x, h, w, c, scale = other_layer(mb, rng, kind, x, (n, h, w, c), scale, out_c, (kh, kw),
                                            (sh, sw), padding, act)
            outs.append(x)
            continue
        y, oh, ow, oc, out_scale = conv_layer(mb, rng, x, (n, h, w, c), scale,
                                              (kind, out_c, (kh, kw), (sh, sw), padding, (dh, dw), act, per_channel))
        x, h, w, c, scale = y, oh, ow, oc, out_scale
        outs.append(x)
    if tail == "pool":
        x = pool_tail(mb, x, (n, h, w, c), scale, 3)
    mb.output(x)
    return mb.build()


# the first layers of vww_96_int8 (MobileNet v1 0.25), at odd sizes
MOBILENET = [("conv", 8, (3, 3), (2, 2), "SAME", (1, 1), "RELU", True),
             ("dw", None, (3, 3), (1, 1), "SAME", (1, 1), "RELU", True),
             ("conv", 12, (1, 1), (1, 1), "SAME", (1, 1), "RELU", True),
             ("dw", None, (3, 3), (2, 2), "SAME", (1, 1), "RELU", True)]
# VALID padding, dilation, uneven strides and kernels, per-tensor weights, RELU6, no activation
ODD = [("dw", None, (3, 3), (1, 1), "VALID", (2, 2), "NONE", True),
       ("conv", 6, (2, 3), (1, 2), "SAME", (1, 1), "RELU6", False),
       ("dw", None, (5, 5), (2, 2), "SAME", (1, 1), "RELU", True),
       ("conv", 5, (3, 1), (2, 1), "VALID", (1, 1), "NONE", True)]


def _mobilenet_v1_025():
    """MobileNet v1 with width 0.25 (TFLM's person detection example's architecture)."""
    layers = [("conv", 8, (3, 3), (2, 2), "SAME", (1, 1), "RELU6", True)]
    for stride, ch in [(1, 16), (2, 32), (1, 32), (2, 64), (1, 64), (2, 128)] + [(1, 128)] * 5 \
            + [(2, 256), (1, 256)]:
        layers.append(("dw", None, (3, 3), (stride, stride), "SAME", (1, 1), "RELU6", True))
        layers.append(("conv", ch, (1, 1), (1, 1), "SAME", (1, 1), "RELU6", True))
    return layers


# the person detector: 96x96 grey in, average pool at the end (RAM does not depend on the weights)
MOBILENET_V1_025 = _mobilenet_v1_025()
PERSON_DETECT_INPUT = (1, 96, 96, 1)


OTHER = ("maxpool", "avgpool", "pad", "padv2", "unary", "const", "skip")


def other_layer(mb, rng, kind, x, shape, scale, arg, k, s, padding, act):
    """A pool (k, s, padding, fused act; same quantization in and out, as TFLM requires), a PAD /
    PADV2 (arg: ((top, bottom), (left, right)); PADV2 pads with a value that is not the zero
    point), or a unary op (arg: its kind; output quantization other than the input's so that
    no pass fuses a RELU into the conv before it), or an ADD / SUB / MUL with a constant
    (arg: (kind, the constant's shape, constant as input 0?)). Returns (y, h, w, c, scale)."""
    n, h, w, c = shape
    if kind in ("maxpool", "avgpool"):
        oh, ow = out_size(padding, h, k[0], s[0], 1), out_size(padding, w, k[1], s[1], 1)
        y = mb.tensor([n, oh, ow, c], "int8", scale=scale, zero_point=3)
        mb.op("MAX_POOL_2D" if kind == "maxpool" else "AVERAGE_POOL_2D", [x], [y], "Pool2DOptions",
              padding=PAD[padding], strideH=s[0], strideW=s[1], filterHeight=k[0], filterWidth=k[1],
              fusedActivationFunction=ACT[act])
        return y, oh, ow, c, scale
    if kind in ("pad", "padv2"):
        (t, b), (left, right) = arg
        oh, ow = h + t + b, w + left + right
        y = mb.tensor([n, oh, ow, c], "int8", scale=scale, zero_point=3)
        pads = mb.const(np.array([[0, 0], [t, b], [left, right], [0, 0]], np.int32), "int32")
        if kind == "pad":
            mb.op("PAD", [x, pads], [y], "PadOptions")
        else:
            v = mb.const(np.array(-77, np.int8).reshape(()), "int8", scale=scale, zero_point=3)
            mb.op("PADV2", [x, pads, v], [y], "PadV2Options")
        return y, oh, ow, c, scale
    if kind == "skip":   # arg: (ADD / SUB / MUL, the earlier tensor, it first?)
        op, other, first = arg
        oscale = scale * 1.5 if op != "MUL" else scale * 2.0
        y = mb.tensor([n, h, w, c], "int8", scale=oscale, zero_point=1)
        mb.op(op, [other, x] if first else [x, other], [y], {"ADD": "AddOptions", "SUB": "SubOptions",
                                                            "MUL": "MulOptions"}[op], fusedActivationFunction=ACT[act or "NONE"])
        return y, h, w, c, oscale
    if kind == "const":   # arg: (ADD / SUB / MUL, the constant's shape, constant first?)
        op, cshape, first = arg
        cq = float(scale * rng.uniform(0.5, 1.5))
        cst = mb.const(rng.integers(-100, 100, cshape), "int8", scale=cq, zero_point=2)
        oscale = scale * cq * 40 if op == "MUL" else scale * 1.3
        y = mb.tensor([n, h, w, c], "int8", scale=oscale, zero_point=-3)
        mb.op(op, [cst, x] if first else [x, cst], [y], {"ADD": "AddOptions", "SUB": "SubOptions",
                                                        "MUL": "MulOptions"}[op], fusedActivationFunction=ACT[act or "NONE"])
        return y, h, w, c, oscale
    op = arg
    if op == "LOGISTIC":
        oscale, ozp = 1.0 / 256, -128
    elif op == "RELU6":   # TFLM's RELU6 clamps in the input's quantization, whatever the output's
        oscale, ozp = scale, 5
    else:
        oscale, ozp = scale * float(rng.uniform(0.6, 0.9)), -4
    y = mb.tensor([n, h, w, c], "int8", scale=oscale, zero_point=ozp)
    if op == "LEAKY_RELU":
        mb.op(op, [x], [y], "LeakyReluOptions", alpha=0.2)
    else:
        mb.op(op, [x], [y])
    return y, h, w, c, oscale
