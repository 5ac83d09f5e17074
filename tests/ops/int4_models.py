"""Models with 4-bit (TFLite INT4) weights for the int4 tests: FULLY_CONNECTED, CONV_2D and
DEPTHWISE_CONV_2D with random shapes, scales and activations, per-channel or per-tensor, int8
activations; and LiteRT's reference kernels, the oracle (TFLM refuses int4 fully connected)."""
from __future__ import annotations

import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType

from tflite_builder import ACT, PAD, ModelBuilder


def litert_run(model: bytes, xs: np.ndarray) -> np.ndarray:
    """One inference per leading index of xs on LiteRT's reference kernels (BUILTIN_REF)."""
    it = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    inp, out = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    outs = []
    for x in xs:
        it.set_tensor(inp, x)
        it.invoke()
        outs.append(it.get_tensor(out).copy())
    return np.stack(outs)


def _weights(rng, shape, channels, per_channel, axis, mb, bits4=True, small=False):
    """bits4: an INT4 tensor; else int8, with small: values in [-8, 7] (lossless packing)."""
    lo, hi = (-8, 8) if bits4 or small else (-128, 128)
    w = rng.integers(lo, hi, size=shape)
    n = channels if per_channel else 1
    scale = rng.uniform(0.01, 0.1, n) * (16 if bits4 else 1)
    wt = mb.const(w, "int4" if bits4 else "int8", scale=scale, zero_point=[0] * n, axis=axis)
    return wt, scale


def _bias(rng, mb, channels, in_scale, w_scale):
    s = in_scale * np.asarray(w_scale)   # per tensor with per-tensor weights (LiteRT checks)
    return mb.const(rng.integers(-3000, 3000, channels), "int32", scale=s, zero_point=[0] * len(s))


def add_layer(mb, rng, kind, x, x_shape, x_scale, per_channel=True, bits4=True, small=False):
    """One random layer of `kind` after x: (output id, shape, scale)."""
    act = str(rng.choice(["NONE", "RELU", "RELU6"]))
    y_scale, y_zp = float(rng.uniform(0.05, 0.3)), int(rng.integers(-20, 20))
    if kind == "FULLY_CONNECTED":
        depth = int(np.prod(x_shape[1:]))
        units = int(rng.integers(1, 20))
        w, ws = _weights(rng, (units, depth), units, per_channel, 0, mb, bits4, small)
        b = _bias(rng, mb, units, x_scale, ws)
        shape = [x_shape[0], units]
        y = mb.tensor(shape, "int8", scale=y_scale, zero_point=y_zp)
        mb.op(kind, [x, w, b], [y], "FullyConnectedOptions", fusedActivationFunction=ACT[act])
        return y, shape, y_scale
    n, h, wd, c = x_shape
    kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    sh, sw = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    pad = str(rng.choice(["SAME", "VALID"]))
    if kh > h or kw > wd:   # (a chain's small input: VALID would leave nothing)
        pad = "SAME"
    if kind == "CONV_2D":
        oc = int(rng.integers(1, 12))
        w, ws = _weights(rng, (oc, kh, kw, c), oc, per_channel, 0, mb, bits4, small)
        opts = ("Conv2DOptions", {})
    else:
        mult = int(rng.choice([1, 1, 2]))
        oc = c * mult
        w, ws = _weights(rng, (1, kh, kw, oc), oc, per_channel, 3, mb, bits4, small)
        opts = ("DepthwiseConv2DOptions", {"depthMultiplier": mult})
    b = _bias(rng, mb, oc, x_scale, ws)
    if pad == "SAME":
        oh, ow = -(-h // sh), -(-wd // sw)
    else:
        oh, ow = (h - kh) // sh + 1, (wd - kw) // sw + 1
    shape = [n, oh, ow, oc]
    y = mb.tensor(shape, "int8", scale=y_scale, zero_point=y_zp)
    mb.op(kind, [x, w, b], [y], opts[0], padding=PAD[pad], strideH=sh, strideW=sw,
          fusedActivationFunction=ACT[act], **opts[1])
    return y, shape, y_scale


def layer_model(kinds, seed, per_channel=True, bits4=True, small=False):
    """(model bytes, input shape): the layers `kinds` in a chain on a random input."""
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    shape = [1, int(rng.integers(3, 9)), int(rng.integers(3, 9)), int(rng.integers(1, 9))]
    if kinds[0] == "FULLY_CONNECTED":
        shape = [int(rng.integers(1, 3)), int(rng.integers(1, 40))]
    scale = 0.05
    x = mb.input(shape, "int8", scale=scale, zero_point=int(rng.integers(-10, 10)))
    in_shape = list(shape)
    for kind in kinds:
        x, shape, scale = add_layer(mb, rng, kind, x, shape, scale, per_channel, bits4, small)
    mb.output(x)
    return mb.build(), in_shape
