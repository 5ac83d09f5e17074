"""The TFLite generator's layers: for each op, `draw` (random parameters for a layer on given
source nodes, a plain JSON-able dict) and `emit` (the layer's tensors and operators added to a
ModelBuilder). Weights and constants are drawn at emit time from the layer's own seed and the
shapes it sees, so a shrunk spec (a halved dimension, a dropped layer) still builds.

Quantization follows what TFLM's kernels require of a valid model: pools, PAD, RESHAPE and
TRANSPOSE keep their input's parameters; LOGISTIC / TANH / SOFTMAX outputs have the fixed
scales TFLM checks; CONCATENATION inputs are requantized (QUANTIZE) into the output's
parameters; int16 activations are symmetric (zero point 0) with int64 biases.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tflite_builder import ACT, PAD, ModelBuilder


class Inconsistent(Exception):
    """The spec does not describe a valid graph (a shrink made a shape impossible)."""


@dataclass
class Node:
    tid: int
    shape: list[int]
    q: tuple[float, int] | None      # (scale, zero point) of a quantized activation


@dataclass(frozen=True)
class Flavour:
    name: str
    act: str                         # the activations' dtype
    qmax: int                        # 127, 32767; 0 for float

    @property
    def quantized(self) -> bool:
        return self.qmax > 0

    def qkw(self, q):
        return dict(scale=q[0], zero_point=q[1]) if q else {}

    def bias_dtype(self) -> str:
        return "int64" if self.act == "int16" else "int32"


FLAVOURS = {"int8": Flavour("int8", "int8", 127), "int16x8": Flavour("int16x8", "int16", 32767),
            "float": Flavour("float", "float32", 0)}
# Fixed output parameters TFLM insists on (int8 / int16).
FIXED_Q = {("LOGISTIC", "int8"): (1 / 256, -128), ("TANH", "int8"): (1 / 128, 0),
           ("SOFTMAX", "int8"): (1 / 256, -128), ("LOGISTIC", "int16"): (1 / 32768, 0),
           ("TANH", "int16"): (1 / 32768, 0), ("SOFTMAX", "int16"): (1 / 32768, 0)}
ACTS = ["NONE", "NONE", "RELU", "RELU6", "RELU_N1_TO_1"]


def out_q(fl: Flavour, rng, scale: float):
    """Output parameters near `scale` (x 0.5..2) with a random zero point (int8)."""
    if not fl.quantized:
        return None
    s = float(scale * 2 ** rng.uniform(-1, 1))
    zp = int(rng.integers(-60, 61)) if fl.act == "int8" else 0
    return (s, zp)


def _rng(layer):
    return np.random.default_rng(layer["seed"])


def _tensor(mb: ModelBuilder, fl: Flavour, shape, q) -> Node:
    return Node(mb.tensor(shape, fl.act, **fl.qkw(q)), list(shape), q)


def _weights(mb, fl, rng, shape, k_in: int, axis: int, per_channel: bool, in_q):
    """int8 weights (symmetric) scaled so that a sum of k_in products keeps its input's spread;
    per-channel scales along `axis` or one scale; float weights ~ N(0, 1/k_in). Returns the
    tensor id and the weight scales (None for float)."""
    if not fl.quantized:
        return mb.const(rng.standard_normal(shape) / math.sqrt(k_in), "float32"), None
    n = shape[axis] if per_channel else 1
    base = 1.0 / (73.0 * math.sqrt(k_in))
    scales = base * 2 ** rng.uniform(-1, 1, n)
    w = rng.integers(-127, 128, shape)
    return mb.const(w, "int8", scale=scales, zero_point=[0] * n, axis=axis), scales


def _bias(mb, fl, rng, n, in_q, w_scales):
    if not fl.quantized:
        return mb.const(rng.standard_normal(n) * 0.3, "float32")
    s = in_q[0] * np.broadcast_to(w_scales, (n,))
    # a bias worth up to ~half the output range's spread in real terms
    real = rng.standard_normal(n) * in_q[0] * fl.qmax * 0.2
    lim = 2**31 - 1 if fl.act == "int8" else 2**40
    vals = np.clip(np.round(real / s), -lim, lim).astype(np.int64)
    return mb.const(vals, fl.bias_dtype(), scale=list(s), zero_point=[0] * n, axis=0)


def broadcasts_into(small, big) -> bool:
    """`small` broadcasts to exactly `big` (same rank, each dim equal or 1)."""
    return len(small) == len(big) and all(s in (1, b) for s, b in zip(small, big))


def conv_out(size, k, stride, dil, padding):
    eff = (k - 1) * dil + 1
    if padding == "SAME":
        return -(-size // stride)
    return (size - eff) // stride + 1 if size >= eff else 0


# ---------------------------------------------------------------------------------------------
# draw: random parameters of one layer, given its sources' shapes

def draw(op: str, rng, fl: Flavour, srcs: list[Node]) -> dict:
    x = srcs[0]
    d = {"op": op, "seed": int(rng.integers(2**31))}
    pick = lambda seq: seq[int(rng.integers(len(seq)))]   # noqa: E731
    if op in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        d.update(kh=int(rng.integers(1, 4)), kw=int(rng.integers(1, 4)),
                 stride=int(pick([1, 1, 2])), dil=int(pick([1, 1, 1, 2])),
                 padding=pick(["SAME", "VALID"]), act=pick(ACTS), per_channel=bool(rng.random() < 0.7))
        if op == "CONV_2D":
            d["cout"] = int(pick([1, 2, 3, 4, 5, 6, 7, 8, 12, 16]))
        else:
            d["mult"] = int(pick([1, 1, 1, 2]))
    elif op == "FULLY_CONNECTED":
        d.update(units=int(rng.integers(1, 17)), act=pick(ACTS), per_channel=bool(rng.random() < 0.3),
                 keep=bool(rng.random() < 0.5))
    elif op in ("ADD", "MUL"):
        d["act"] = pick(ACTS)
    elif op in ("MAX_POOL_2D", "AVERAGE_POOL_2D"):
        d.update(fh=int(rng.integers(1, 4)), fw=int(rng.integers(1, 4)), stride=int(pick([1, 2, 2])),
                 padding=pick(["SAME", "VALID"]), act=pick(["NONE", "NONE", "RELU"]))
    elif op == "PAD":
        d["pads"] = [int(v) for v in rng.integers(0, 3, 4)]
    elif op == "TRANSPOSE":
        rest = list(range(1, len(x.shape)))
        rng.shuffle(rest)
        d["perm"] = [0] + [int(v) for v in rest]
    elif op == "CONCATENATION":
        d["axis"] = int(rng.integers(1, len(x.shape))) if rng.random() < 0.4 else len(x.shape) - 1
    elif op == "MEAN":
        d["axes"] = pick([[1, 2], [1, 2], [2], [1], [3]]) if len(x.shape) == 4 else [1]
        d["keep"] = bool(rng.random() < 0.7)
    elif op == "SOFTMAX":
        d["beta"] = float(pick([1.0, 1.0, 0.5, 2.0]))
    elif op == "UNIDIRECTIONAL_SEQUENCE_LSTM":
        d.update(units=int(rng.integers(1, 7)), clip=float(pick([0.0, 0.0, 0.5])),
                 cell_shift=int(pick([-11, -11, -12, -10])) if fl.act == "int8" else -11)
    elif op == "IF":
        d["then"] = pick(["ADD", "RELU", "MUL"])
    elif op == "WHILE":
        d["trips"] = int(rng.integers(1, 4))
    elif op == "LEAKY_RELU":
        d["alpha"] = float(pick([0.1, 0.2, 0.01, 0.5]))
    elif op == "STRIDED_SLICE":   # a begin, end and stride per axis (the batch axis kept)
        d["slices"] = [[0, 1, 1]] + [[int(rng.integers(0, max(1, n // 2 + 1))), int(rng.integers(n // 2 + 1, n + 1)),
                                      int(pick([1, 1, 2]))] for n in x.shape[1:]]
    elif op in ("RESIZE_NEAREST_NEIGHBOR", "RESIZE_BILINEAR"):
        d.update(size=[int(v) for v in rng.integers(1, 13, 2)],
                 mode=pick(["default", "align_corners", "half_pixel"]))
    elif op == "RESHAPE":   # to [1, T, D] (sequence) or [1, N] (flatten)
        d["to"] = "seq" if len(x.shape) == 4 and rng.random() < 0.5 else "flat"
    return d


# ---------------------------------------------------------------------------------------------
# emit: the layer's tensors and operators

def emit(mb: ModelBuilder, fl: Flavour, layer: dict, srcs: list[Node], pred: int | None) -> Node:
    op, rng = layer["op"], _rng(layer)
    x = srcs[0]
    qkw = fl.qkw
    if op in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        if len(x.shape) != 4:
            raise Inconsistent(f"{op} on rank {len(x.shape)}")
        _, h, w, c = x.shape
        kh, kw_, s, dil = layer["kh"], layer["kw"], layer["stride"], layer["dil"]
        oh, ow = (conv_out(h, kh, s, dil, layer["padding"]), conv_out(w, kw_, s, dil, layer["padding"]))
        if oh < 1 or ow < 1:
            raise Inconsistent(f"{op}: empty output")
        if op == "CONV_2D":
            co = layer["cout"]
            wid, ws = _weights(mb, fl, rng, [co, kh, kw_, c], kh * kw_ * c, 0, layer["per_channel"], x.q)
        else:
            co = c * layer["mult"]
            wid, ws = _weights(mb, fl, rng, [1, kh, kw_, co], kh * kw_, 3, layer["per_channel"], x.q)
        b = _bias(mb, fl, rng, co, x.q, ws)
        y = _tensor(mb, fl, [x.shape[0], oh, ow, co], out_q(fl, rng, x.q[0]) if x.q else None)
        common = dict(padding=PAD[layer["padding"]], strideH=s, strideW=s, dilationHFactor=dil,
                      dilationWFactor=dil, fusedActivationFunction=ACT[layer["act"]])
        if op == "CONV_2D":
            mb.op(op, [x.tid, wid, b], [y.tid], "Conv2DOptions", **common)
        else:
            mb.op(op, [x.tid, wid, b], [y.tid], "DepthwiseConv2DOptions", depthMultiplier=layer["mult"], **common)
        return y
    if op == "FULLY_CONNECTED":
        k, u = x.shape[-1], layer["units"]
        wid, ws = _weights(mb, fl, rng, [u, k], k, 0, layer["per_channel"], x.q)
        b = _bias(mb, fl, rng, u, x.q, ws)
        keep = layer.get("keep", False) and len(x.shape) > 2   # TFLM: [rows, units] unless kept
        shape = x.shape[:-1] + [u] if keep else [int(np.prod(x.shape[:-1])), u]
        y = _tensor(mb, fl, shape, out_q(fl, rng, x.q[0]) if x.q else None)
        mb.op(op, [x.tid, wid, b], [y.tid], "FullyConnectedOptions", fusedActivationFunction=ACT[layer["act"]],
              keepNumDims=keep)
        return y
    if op in ("ADD", "MUL") and layer.get("const"):
        return _const_binary(mb, fl, layer, rng, x)
    if op in ("ADD", "MUL"):
        a, b = srcs
        if not broadcasts_into(b.shape, a.shape):
            raise Inconsistent(f"{op}: shapes {a.shape} and {b.shape}")
        q = None
        if fl.quantized:
            scale = max(a.q[0], b.q[0]) if op == "ADD" else a.q[0] * b.q[0] * fl.qmax / 2
            q = out_q(fl, rng, scale)
        y = _tensor(mb, fl, a.shape, q)
        mb.op(op, [a.tid, b.tid], [y.tid], "AddOptions" if op == "ADD" else "MulOptions",
              fusedActivationFunction=ACT[layer["act"]])
        return y
    if op == "CONCATENATION":
        a, b = srcs
        ax = layer.get("axis", len(a.shape) - 1)
        if len(a.shape) != len(b.shape) or ax >= len(a.shape) or \
                any(da != db for k, (da, db) in enumerate(zip(a.shape, b.shape)) if k != ax):
            raise Inconsistent("CONCATENATION: shapes differ off the axis")
        q = a.q
        if fl.quantized and b.q != q:          # requantize the second input into the first's
            b2 = _tensor(mb, fl, b.shape, q)
            mb.op("QUANTIZE", [b.tid], [b2.tid])
            b = b2
        shape = list(a.shape)
        shape[ax] += b.shape[ax]
        y = _tensor(mb, fl, shape, q)
        mb.op(op, [a.tid, b.tid], [y.tid], "ConcatenationOptions", axis=ax)
        return y
    if op in ("MAX_POOL_2D", "AVERAGE_POOL_2D"):
        if len(x.shape) != 4:
            raise Inconsistent(f"{op} on rank {len(x.shape)}")
        n, h, w, c = x.shape
        oh = conv_out(h, layer["fh"], layer["stride"], 1, layer["padding"])
        ow = conv_out(w, layer["fw"], layer["stride"], 1, layer["padding"])
        if oh < 1 or ow < 1:
            raise Inconsistent(f"{op}: empty output")
        y = _tensor(mb, fl, [n, oh, ow, c], x.q)
        mb.op(op, [x.tid], [y.tid], "Pool2DOptions", padding=PAD[layer["padding"]], strideH=layer["stride"],
              strideW=layer["stride"], filterHeight=layer["fh"], filterWidth=layer["fw"],
              fusedActivationFunction=ACT[layer["act"]])
        return y
    if op == "PAD":
        if len(x.shape) != 4:
            raise Inconsistent("PAD on rank != 4")
        p = layer["pads"]
        pads = np.array([[0, 0], [p[0], p[1]], [p[2], p[3]], [0, 0]], np.int32)
        shape = [x.shape[0], x.shape[1] + p[0] + p[1], x.shape[2] + p[2] + p[3], x.shape[3]]
        y = _tensor(mb, fl, shape, x.q)
        mb.op(op, [x.tid, mb.const(pads, "int32")], [y.tid], "PadOptions")
        return y
    if op == "RESHAPE":
        if layer["to"] == "seq":
            if len(x.shape) != 4:
                raise Inconsistent("RESHAPE to a sequence from rank != 4")
            shape = [x.shape[0], x.shape[1] * x.shape[2], x.shape[3]]
        else:
            shape = [x.shape[0], int(np.prod(x.shape[1:]))]
        y = _tensor(mb, fl, shape, x.q)
        mb.op(op, [x.tid, mb.const(np.array(shape, np.int32), "int32")], [y.tid], "ReshapeOptions", newShape=shape)
        return y
    if op == "TRANSPOSE":
        perm = layer["perm"]
        if len(perm) != len(x.shape):
            raise Inconsistent("TRANSPOSE: rank changed")
        y = _tensor(mb, fl, [x.shape[i] for i in perm], x.q)
        mb.op(op, [x.tid, mb.const(np.array(perm, np.int32), "int32")], [y.tid], "TransposeOptions")
        return y
    if op == "MEAN":
        axes = layer["axes"]
        if max(axes) >= len(x.shape):
            raise Inconsistent("MEAN: axis out of range")
        shape = [1 if i in axes else d for i, d in enumerate(x.shape)] if layer["keep"] else \
            [d for i, d in enumerate(x.shape) if i not in axes]
        y = _tensor(mb, fl, shape, out_q(fl, rng, x.q[0] * 0.7) if x.q else None)
        mb.op(op, [x.tid, mb.const(np.array(axes, np.int32), "int32")], [y.tid], "ReducerOptions",
              keepDims=layer["keep"])
        return y
    if op in ("SOFTMAX", "LOGISTIC", "TANH"):
        y = _tensor(mb, fl, x.shape, FIXED_Q.get((op, fl.act)))
        if op == "SOFTMAX":
            mb.op(op, [x.tid], [y.tid], "SoftmaxOptions", beta=layer["beta"])
        else:
            mb.op(op, [x.tid], [y.tid])
        return y
    if op in ("RELU", "RELU6", "LEAKY_RELU", "HARD_SWISH"):   # requantizing activations
        scale = x.q[0] * (0.5 if op != "LEAKY_RELU" else 1.0) if x.q else 0
        y = _tensor(mb, fl, x.shape, out_q(fl, rng, scale) if x.q else None)
        if op == "LEAKY_RELU":
            mb.op(op, [x.tid], [y.tid], "LeakyReluOptions", alpha=layer["alpha"])
        else:
            mb.op(op, [x.tid], [y.tid])
        return y
    if op == "STRIDED_SLICE":
        sl = layer["slices"]
        if len(sl) != len(x.shape):
            raise Inconsistent("STRIDED_SLICE: rank changed")
        sl = [[min(b, n - 1), min(max(e, min(b, n - 1) + 1), n), st] for (b, e, st), n in zip(sl, x.shape)]
        shape = [-(-(e - b) // st) for b, e, st in sl]
        y = _tensor(mb, fl, shape, x.q)
        consts = [mb.const(np.array([v[k] for v in sl], np.int32), "int32") for k in range(3)]
        mb.op(op, [x.tid] + consts, [y.tid], "StridedSliceOptions")
        return y
    if op in ("RESIZE_NEAREST_NEIGHBOR", "RESIZE_BILINEAR"):
        if len(x.shape) != 4:
            raise Inconsistent(f"{op} on rank != 4")
        size = layer["size"]
        y = _tensor(mb, fl, [x.shape[0], size[0], size[1], x.shape[3]], x.q)
        opts = "ResizeBilinearOptions" if op == "RESIZE_BILINEAR" else "ResizeNearestNeighborOptions"
        mb.op(op, [x.tid, mb.const(np.array(size, np.int32), "int32")], [y.tid], opts,
              alignCorners=layer["mode"] == "align_corners", halfPixelCenters=layer["mode"] == "half_pixel")
        return y
    if op == "UNIDIRECTIONAL_SEQUENCE_LSTM":
        return _lstm(mb, fl, layer, rng, x)
    if op == "IF":
        return _if(mb, fl, layer, rng, x, pred)
    if op == "WHILE":
        return _while(mb, fl, layer, rng, x)
    raise ValueError(f"unknown op {op}")


def _lstm(mb, fl, layer, rng, x: Node) -> Node:
    """TFLM's LSTM schemes: float; int8 (8x8->16: int16 cell state at a power-of-two scale,
    int32 biases); int16x8 (16x8->16, int64 biases, symmetric)."""
    if len(x.shape) != 3:
        raise Inconsistent("LSTM on rank != 3")
    b_, t, dep = x.shape
    u = layer["units"]
    h_q = out_q(fl, rng, 1 / 128 if fl.act == "int8" else 1 / 32768 * 4) if fl.quantized else None

    def weights(cols):
        return _weights(mb, fl, rng, [u, cols], cols, 0, False, x.q)

    w_in = [weights(dep) for _ in range(4)]
    w_rec = [weights(u) for _ in range(4)]
    biases = []
    for k in range(4):
        if fl.quantized:
            biases.append(_bias(mb, fl, rng, u, x.q, np.full(u, w_in[k][1][0])))
        else:
            biases.append(mb.const(rng.standard_normal(u) * 0.3 + (1.0 if k == 1 else 0.0), "float32"))
    h = mb.variable([b_, u], fl.act, **fl.qkw(h_q))
    if fl.quantized:
        c = mb.variable([b_, u], "int16", scale=2.0 ** layer["cell_shift"], zero_point=0)
    else:
        c = mb.variable([b_, u], "float32")
    y = _tensor(mb, fl, [b_, t, u], h_q)
    ins = [x.tid] + [w for w, _ in w_in] + [w for w, _ in w_rec] + [-1, -1, -1] + biases + \
        [-1, -1, h, c, -1, -1, -1, -1]
    mb.op("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, [y.tid], "UnidirectionalSequenceLSTMOptions",
          fusedActivationFunction=4, cellClip=layer["clip"], projClip=0.0, timeMajor=False)
    return y


def _const_binary(mb, fl, layer, rng, x: Node) -> Node:
    """ADD / MUL of x and a constant: one value or one per channel (a batch norm exported as
    MUL and ADD, passes/channel_tables.py's tables), on either side."""
    op = layer["op"]
    shape = [x.shape[-1]] if layer["const"] == "channel" else [1]
    if fl.quantized:
        cq = out_q(fl, rng, x.q[0] * (1.0 if op == "ADD" else 4.0 / fl.qmax))
        c = mb.const(rng.integers(-fl.qmax - 1, fl.qmax + 1, shape), fl.act, scale=cq[0], zero_point=cq[1])
        scale = max(x.q[0], cq[0]) if op == "ADD" else x.q[0] * cq[0] * fl.qmax / 2
        q = out_q(fl, rng, scale)
    else:
        c, q = mb.const(rng.standard_normal(shape).astype(np.float32), "float32"), None
    y = _tensor(mb, fl, x.shape, q)
    mb.op(op, [c, x.tid] if layer.get("first") else [x.tid, c], [y.tid],
          "AddOptions" if op == "ADD" else "MulOptions", fusedActivationFunction=ACT[layer["act"]])
    return y


def _const_like(sg, fl, shape, real, q):
    """A constant tensor holding `real` in parameters q (or float)."""
    if not fl.quantized:
        return sg.const(np.full(shape, real, np.float32), "float32")
    v = int(np.clip(round(real / q[0]) + q[1], -fl.qmax - 1, fl.qmax))
    return sg.const(np.full(shape, v), fl.act, scale=q[0], zero_point=q[1])


def _if(mb, fl, layer, rng, x: Node, pred: int) -> Node:
    """y = then-op(x) or the else branch's requantized copy of x (float: x itself)."""
    q = out_q(fl, rng, x.q[0]) if x.q else None
    y = _tensor(mb, fl, x.shape, q)
    th = mb.subgraph("then")
    a = th.input(x.shape, fl.act, **fl.qkw(x.q))
    r = th.tensor(x.shape, fl.act, **fl.qkw(q))
    kind = layer["then"]
    if kind == "RELU":
        th.op("RELU", [a], [r])
    else:
        if kind == "ADD":    # a quarter of x's range added
            real, cq = 0.25 * (x.q[0] * fl.qmax if x.q else 1.0), ((x.q[0], 0) if x.q else None)
        else:                # x halved
            real, cq = 0.5, ((0.5 / 100, 0) if x.q else None)
        c = _const_like(th, fl, x.shape, real, cq)
        th.op(kind, [a, c], [r], "AddOptions" if kind == "ADD" else "MulOptions")
    th.output(r)
    el = mb.subgraph("else")
    a = el.input(x.shape, fl.act, **fl.qkw(x.q))
    if fl.quantized:
        r = el.tensor(x.shape, fl.act, **fl.qkw(q))
        el.op("QUANTIZE", [a], [r])
        el.output(r)
    else:
        el.output(a)
    mb.op("IF", [pred, x.tid], [y.tid], "IfOptions", thenSubgraphIndex=th.index, elseSubgraphIndex=el.index)
    return y


def _while(mb, fl, layer, rng, x: Node) -> Node:
    """for i < trips (a constant: the trip count is proved): x = x + c (int: saturating, the
    loop value keeps x's parameters) or x * 0.5 + c (float)."""
    i0 = mb.const(np.array(0, np.int32), "int32")
    oi, ox = mb.tensor([], "int32"), _tensor(mb, fl, x.shape, x.q)
    cg = mb.subgraph("cond")
    ci = cg.input([], "int32")
    cg.input(x.shape, fl.act, **fl.qkw(x.q))
    cb = cg.tensor([], "bool")
    cg.op("LESS", [ci, cg.const(np.array(layer["trips"], np.int32), "int32")], [cb])
    cg.output(cb)
    bg = mb.subgraph("body")
    bi, bx = bg.input([], "int32"), bg.input(x.shape, fl.act, **fl.qkw(x.q))
    bi2, bx2 = bg.tensor([], "int32"), bg.tensor(x.shape, fl.act, **fl.qkw(x.q))
    bg.op("ADD", [bi, bg.const(np.array(1, np.int32), "int32")], [bi2], "AddOptions")
    step = float(rng.uniform(-1, 1))
    if fl.quantized:
        cq = (x.q[0], 0)
        bg.op("ADD", [bx, _const_like(bg, fl, x.shape, step * 20 * x.q[0], cq)], [bx2], "AddOptions")
    else:
        bm = bg.tensor(x.shape, "float32")
        bg.op("MUL", [bx, _const_like(bg, fl, x.shape, 0.5, None)], [bm], "MulOptions")
        bg.op("ADD", [bm, _const_like(bg, fl, x.shape, step, None)], [bx2], "AddOptions")
    bg.output(bi2)
    bg.output(bx2)
    mb.op("WHILE", [i0, x.tid], [oi, ox.tid], "WhileOptions", condSubgraphIndex=cg.index,
          bodySubgraphIndex=bg.index)
    return ox
