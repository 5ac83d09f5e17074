"""Drawing layer specs that fit a shape, and building modules from them (see torch_layers.py).

build(specs, dom, shape) -> (module, dom, shape) rebuilds a whole layer list; draw_layers(rng,
dom, shape, n) draws one. Every builder checks that its spec fits (Unfit otherwise), so a shrunk
program either rebuilds to a valid module or is skipped.
"""
from __future__ import annotations


import torch
import torch.nn as nn
import torch.nn.functional as F

from .torch_layers import (ACTS, Attention, Branches, ClsToken, Cond, Fn, Recurrent, Residual, Seq,
                          Split, SqueezeExcite, Tokens, Unfit, out_size, randomize_bn)

MAX_ELEMS = 6144      # keeps every activation small: compile + run in a second or two
MAX_CH = 48


def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


# ---------------------------------------------------------------- builders

def _conv(spec, dom, shape):
    c = shape[1]
    g = c if spec["kind"] == "dwconv" else spec["groups"]
    out = c * spec["mult"] if spec["kind"] == "dwconv" else spec["out"]
    if c % g or out % g:
        raise Unfit(f"groups {g} do not divide {c} -> {out}")
    k, s, d, p, mode = spec["k"], spec["stride"], spec["dil"], spec["pad"], spec["mode"]
    spatial = shape[2:]
    if mode in ("reflect", "replicate") and p >= min(spatial):
        raise Unfit("reflect padding wider than the input")
    cls = nn.Conv2d if dom == "img" else nn.Conv1d
    m = cls(c, out, k, s, p, d, g, bias=spec["bias"], padding_mode=mode)
    return m, dom, (1, out, *[out_size(n, k, s, p, d) for n in spatial])


def _norm(spec, dom, shape):
    c = shape[1]
    kind = spec["norm"]
    if kind == "bn":
        bn = {"img": nn.BatchNorm2d, "seq": nn.BatchNorm1d, "vec": nn.BatchNorm1d}[dom](c)
        return randomize_bn(bn), dom, shape
    if kind == "gn":
        if c % spec["groups"]:
            raise Unfit("group norm groups do not divide the channels")
        m = nn.GroupNorm(spec["groups"], c)
    else:   # layer norm over the last dim (tok / vec / seq) or the last n dims
        m = nn.LayerNorm(list(shape[len(shape) - spec["dims"]:]))
    with torch.no_grad():
        m.weight.uniform_(0.5, 1.5)
        m.bias.normal_(0, 0.3)
    return m, dom, shape


def _act(spec, dom, shape):
    if spec["act"] == "glu":
        if shape[1] % 2:
            raise Unfit("glu needs an even channel count")
        return nn.GLU(1), dom, (1, shape[1] // 2, *shape[2:])
    return ACTS[spec["act"]](), dom, shape


def _pool(spec, dom, shape):
    k, s, p, ceil = spec["k"], spec["stride"], spec["pad"], spec["ceil"]
    if p > k // 2:
        raise Unfit("pool padding above half the kernel")
    out = [out_size(n, k, s, p, 1, ceil) for n in shape[2:]]
    two = dom == "img"
    if spec["op"] == "max":
        m = (nn.MaxPool2d if two else nn.MaxPool1d)(k, s, p, ceil_mode=ceil)
    else:
        m = (nn.AvgPool2d if two else nn.AvgPool1d)(k, s, p, ceil_mode=ceil,
                                                   count_include_pad=spec["count_pad"])
    return m, dom, (1, shape[1], *out)


def _adapool(spec, dom, shape):
    o = spec["size"]
    if o > min(shape[2:]):
        raise Unfit("adaptive pool larger than its input")
    return nn.AdaptiveAvgPool2d(o), dom, (1, shape[1], o, o)


def _interp(spec, dom, shape):
    mode, f = spec["mode"], spec["factor"]
    ac = spec.get("align") if mode == "bilinear" else None
    h, w = shape[2], shape[3]
    size = (int(h * f), int(w * f))
    if min(size) < 1:
        raise Unfit("interpolated to nothing")
    fn = lambda x: F.interpolate(x, scale_factor=f, mode=mode, align_corners=ac)
    return Fn(fn, f"interpolate x{f} {mode}"), dom, (1, shape[1], *size)


def _pixel_shuffle(spec, dom, shape):
    r = spec["r"]
    if shape[1] % (r * r):
        raise Unfit("pixel shuffle needs C divisible by r*r")
    return nn.PixelShuffle(r), dom, (1, shape[1] // (r * r), shape[2] * r, shape[3] * r)


def _se(spec, dom, shape):
    return SqueezeExcite(shape[1], spec["r"], spec["act"]), dom, shape


def _residual(spec, dom, shape):
    body, d2, s2 = build(spec["body"], dom, shape)
    if (d2, s2) != (dom, shape):
        raise Unfit("residual body changes the shape")
    return Residual(body), dom, shape


def _branches(spec, dom, shape):
    mods, outs = [], []
    for b in spec["branches"]:
        m, d2, s2 = build(b, dom, shape)
        mods.append(m)
        outs.append((d2, s2))
    if any(d != dom for d, _ in outs):
        raise Unfit("a branch changes the domain")
    if spec["join"] == "cat":
        if any(s[:1] + s[2:] != outs[0][1][:1] + outs[0][1][2:] for _, s in outs):
            raise Unfit("branches differ beyond the channels")
        c = sum(s[1] for _, s in outs)
        return Branches(mods, "cat"), dom, (1, c, *outs[0][1][2:])
    if any(s != outs[0][1] for _, s in outs):
        raise Unfit("branches of different shapes")
    return Branches(mods, spec["join"]), dom, outs[0][1]


def _split(spec, dom, shape):
    sizes = spec["sizes"]
    if sum(sizes) != shape[1]:
        raise Unfit("split sizes do not add up to the channels")
    mods, outs = [], []
    for b, n in zip(spec["branches"], sizes):
        m, d2, s2 = build(b, dom, (1, n, *shape[2:]))
        if d2 != dom or s2[2:] != shape[2:]:
            raise Unfit("a split branch changes more than its channels")
        mods.append(m)
        outs.append(s2[1])
    return Split(mods, list(sizes)), dom, (1, sum(outs), *shape[2:])


def _cond(spec, dom, shape):
    a, da, sa = build(spec["then"], dom, shape)
    b, db, sb = build(spec["else"], dom, shape)
    if (da, sa) != (db, sb):
        raise Unfit("cond arms of different shapes")
    return Cond(a, b), da, sa


def _reshape(spec, dom, shape):
    """Data movement between domains and within one."""
    op = spec["op"]
    if op == "tokens":               # img/seq -> tok
        n = 1
        for s in shape[2:]:
            n *= s
        return Tokens(), "tok", (1, n, shape[1])
    if op == "transpose":            # tok <-> seq
        return Fn(lambda x: x.transpose(1, 2), "transpose(1, 2)"), ("seq" if dom == "tok" else "tok"), \
            (1, shape[2], shape[1])
    if op == "flatten":              # -> vec
        n = 1
        for s in shape[1:]:
            n *= s
        return Fn(lambda x: x.flatten(1), "flatten"), "vec", (1, n)
    if op == "mean":                 # spatial / token mean -> vec
        dims = (1,) if dom == "tok" else tuple(range(2, len(shape)))
        c = shape[2] if dom == "tok" else shape[1]
        return Fn(lambda x: x.mean(dims), f"mean{dims}"), "vec", (1, c)
    if op == "swap_hw":              # img (1,C,H,W) -> (1,C,W,H)
        return Fn(lambda x: x.permute(0, 1, 3, 2), "permute(0, 1, 3, 2)"), dom, \
            (1, shape[1], shape[3], shape[2])
    if op == "fold_h":               # img (1,C,H,W) -> seq (1,C*H,W)
        return Fn(lambda x: x.reshape(1, shape[1] * shape[2], shape[3]), "reshape C*H"), "seq", \
            (1, shape[1] * shape[2], shape[3])
    if op == "chunk_add":            # two halves of the channels added
        if shape[1] % 2:
            raise Unfit("chunk needs even channels")
        return Fn(lambda x: sum(torch.chunk(x, 2, 1)), "chunk(2, 1) added"), dom, \
            (1, shape[1] // 2, *shape[2:])
    raise ValueError(op)


def _linear(spec, dom, shape):
    return nn.Linear(shape[-1], spec["out"], bias=spec["bias"]), dom, (*shape[:-1], spec["out"])


def _softmax(spec, dom, shape):
    return nn.Softmax(-1), dom, shape


def _attention(spec, dom, shape):
    e = shape[2]
    if e % spec["heads"] or shape[1] > 64:
        raise Unfit("heads do not divide the embedding")
    return Attention(e, spec["heads"], spec["sdpa"], spec["causal"]), dom, shape


def _rnn(spec, dom, shape):
    h, dirs = spec["hidden"], 2 if spec["bidirectional"] else 1
    if shape[1] > 32:
        raise Unfit("too many time steps")
    return Recurrent(spec["cell"], shape[2], h, spec["layers"], spec["bidirectional"]), dom, \
        (1, shape[1], h * dirs)


def _cls_token(spec, dom, shape):
    return ClsToken(shape[2]), dom, (1, shape[1] + 1, shape[2])


def _mbconv(spec, dom, shape):
    """EfficientNet's MBConv: expand 1x1 + BN + SiLU, depthwise k x k + BN + SiLU, squeeze-excite,
    project 1x1 + BN, residual when the shape allows."""
    c, e, k, s = shape[1], shape[1] * spec["expand"], spec["k"], spec["stride"]
    seed = spec["seed"]
    sub = [{"kind": "conv", "out": e, "k": 1, "stride": 1, "dil": 1, "groups": 1, "pad": 0,
            "mode": "zeros", "bias": False, "seed": seed + 1},
           {"kind": "norm", "norm": "bn", "seed": seed + 2}, {"kind": "act", "act": "silu", "seed": 0},
           {"kind": "dwconv", "mult": 1, "k": k, "stride": s, "dil": 1, "pad": k // 2, "mode": "zeros",
            "bias": False, "seed": seed + 3},
           {"kind": "norm", "norm": "bn", "seed": seed + 4}, {"kind": "act", "act": "silu", "seed": 0},
           {"kind": "se", "r": 4 * spec["expand"], "act": "silu", "seed": seed + 5},
           {"kind": "conv", "out": spec["out"], "k": 1, "stride": 1, "dil": 1, "groups": 1, "pad": 0,
            "mode": "zeros", "bias": False, "seed": seed + 6},
           {"kind": "norm", "norm": "bn", "seed": seed + 7}]
    m, d2, s2 = build(sub, dom, shape)
    if s2 == shape:
        return Residual(m), dom, shape
    return m, d2, s2


BUILDERS = {
    "conv": _conv, "dwconv": _conv, "norm": _norm, "act": _act, "pool": _pool, "adapool": _adapool,
    "interp": _interp, "pixel_shuffle": _pixel_shuffle, "se": _se, "residual": _residual,
    "branches": _branches, "split": _split, "cond": _cond, "reshape": _reshape, "linear": _linear,
    "softmax": _softmax, "attention": _attention, "rnn": _rnn, "cls_token": _cls_token,
    "mbconv": _mbconv,
}


def build_one(spec, dom, shape):
    torch.manual_seed(spec["seed"])
    m, dom, shape = BUILDERS[spec["kind"]](spec, dom, shape)
    n = 1
    for s in shape:
        n *= s
    if n > MAX_ELEMS or n < 1 or (dom != "tok" and len(shape) > 1 and shape[1] > 4 * MAX_CH):
        raise Unfit(f"activation {shape} out of range")
    return m, dom, tuple(shape)


def build(specs, dom, shape):
    """A Seq of the specs' modules, and the output domain and shape."""
    mods = []
    for spec in specs:
        m, dom, shape = build_one(spec, dom, shape)
        mods.append(m)
    return Seq(mods).eval(), dom, shape
