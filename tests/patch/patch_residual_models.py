"""Chains of int8 CONV_2D / DEPTHWISE_CONV_2D with residual ADDs, built in the tests for patch
stages whose fused ADD (CONV_2D_ADD, passes/fuse_conv_add.py) reads an earlier layer's output."""
import numpy as np

from patch_models import conv_layer, out_size, pool_tail
from tflite_builder import ACT, ModelBuilder


def residual_chain(in_shape, layers, adds, seed=0, tail=None):
    """layers as patch_models.chain_model's; adds: {m: j}: layer m's output (a "conv" with
    per-tensor output quantization, which the fusion needs) is added to layer j's output
    (j < m, of the same shape), and that sum is what layer m + 1 reads (and what a later ADD
    names as layer m's output). tail: "pool" adds an AVERAGE_POOL_2D after the chain."""
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    n, h, w, c = in_shape
    scale = 0.05
    x = mb.input(list(in_shape), "int8", scale=scale, zero_point=-7)
    zp = -7
    outs = []   # per layer: (tensor, shape, scale) the next layer and later ADDs read
    for m, (kind, out_c, (kh, kw), (sh, sw), padding, (dh, dw), act, per_channel) in enumerate(layers):
        y, oh, ow, oc, out_scale = conv_layer(mb, rng, x, (n, h, w, c), scale,
                                              (kind, out_c, (kh, kw), (sh, sw), padding, (dh, dw), act, per_channel))
        if m in adds:
            skip, sshape, sscale = outs[adds[m]]
            assert kind == "conv" and sshape == (oh, ow, oc), (m, adds[m], sshape, (oh, ow, oc))
            out_scale = max(out_scale, sscale) * 1.2
            s = mb.tensor([n, oh, ow, oc], "int8", scale=out_scale, zero_point=-2)
            mb.op("ADD", [skip, y], [s], "AddOptions", fusedActivationFunction=ACT["RELU"])
            y, zp = s, -2
        else:
            zp = 3
        outs.append((y, (oh, ow, oc), out_scale))
        x, h, w, c, scale = y, oh, ow, oc, out_scale
    if tail == "pool":
        x = pool_tail(mb, x, (n, h, w, c), scale, zp)
    mb.output(x)
    return mb.build()


# a stride-2 stem, then a block whose ADD reads the stem's output three layers later (the skip
# buffer keeps more rows than the next layer's window needs), a 1x1 layer (a buffer that keeps
# no row for its window), odd kernels, per-tensor weights
DEEP_SKIP = [("conv", 8, (3, 3), (2, 2), "SAME", (1, 1), "RELU", True),
             ("conv", 8, (3, 3), (1, 1), "SAME", (1, 1), "RELU", True),
             ("dw", None, (5, 3), (1, 1), "SAME", (1, 1), "RELU6", True),
             ("conv", 8, (1, 1), (1, 1), "SAME", (1, 1), "NONE", False),
             ("conv", 8, (3, 3), (1, 1), "SAME", (1, 1), "NONE", True)]
DEEP_SKIP_ADDS = {4: 0}
# VALID before the block, y = x + conv(x) (the ADD's skip is its own window's input), then a
# second block reading the first ADD's output, ending in a stride-2 depthwise
TWO_ADDS = [("conv", 6, (3, 3), (1, 1), "VALID", (1, 1), "RELU", True),
            ("conv", 6, (3, 3), (1, 1), "SAME", (1, 1), "NONE", True),
            ("dw", None, (3, 3), (1, 1), "SAME", (1, 1), "RELU", True),
            ("conv", 6, (1, 3), (1, 1), "SAME", (1, 1), "NONE", False),
            ("dw", None, (3, 3), (2, 2), "SAME", (1, 1), "RELU", True)]
TWO_ADDS_ADDS = {1: 0, 3: 1}


def random_chain(seed):
    """A random chain for cached stages: (input shape, layers, adds, steps). Kernels 1-5 rows,
    stride 1 or 2, dilation 1-3, SAME or VALID, and residual ADDs wherever a conv's output has
    an earlier layer's shape (often: a conv keeps its input's channels)."""
    import random
    rng = random.Random(seed)
    h, w, c = rng.randint(9, 31), rng.randint(5, 19), rng.randint(1, 5)
    layers, shapes, adds = [], [(h, w, c)], {}
    target = rng.randint(2, 6)
    while len(layers) < target:
        kind = rng.choice(["conv", "conv", "dw"])
        kh, kw = rng.choice([1, 3, 5]), rng.choice([1, 3])
        sh, pad = rng.choice([1, 1, 1, 1, 2]), rng.choice(["SAME", "SAME", "SAME", "VALID"])
        dh = rng.choice([1, 1, 2, 3]) if kh > 1 else 1
        H, W, C = shapes[-1]
        oc = (C if rng.random() < 0.7 else rng.randint(2, 8)) if kind == "conv" else None
        oh, ow = out_size(pad, H, kh, sh, dh), out_size(pad, W, kw, 1, 1)
        if oh < 2 or ow < 1:
            continue
        layers.append((kind, oc, (kh, kw), (sh, 1), pad, (dh, 1), rng.choice(["RELU", "NONE"]), rng.random() < 0.7))
        shapes.append((oh, ow, oc or C))
        same = [j for j in range(len(layers) - 1) if shapes[j + 1] == shapes[-1]]
        if kind == "conv" and same and rng.random() < 0.9:
            adds[len(layers) - 1] = rng.choice(same)
    return (1, h, w, c), layers, adds, rng.randint(2, shapes[1][0])
