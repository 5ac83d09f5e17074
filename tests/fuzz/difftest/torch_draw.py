"""Drawing random layer specs that fit the current shape (torch_specs.build checks each).

draw_program(rng, flavour) -> (input domain, input shape, specs). Each kind has a drawer that
returns a spec for (dom, shape); the draw is retried until the spec builds. Weights per domain
say how often each kind comes up; containers (residual, branches, split, cond) draw their bodies
from shape-preserving kinds, recursively up to depth 2.
"""
from __future__ import annotations

import random

from .torch_layers import ACTS, Unfit
from .torch_specs import MAX_CH, build, build_one


def _seed(rng):
    return rng.randrange(1, 2**31 - 1)


def d_conv(rng, dom, shape, keep=False):
    c = shape[1]
    k = rng.choice([1, 3, 3, 5] if dom == "img" else [1, 3, 5, 7])
    d = 1 if keep and k == 1 else rng.choice([1, 1, 1, 2, 3])
    s = 1 if keep else rng.choice([1, 1, 2, 2, 3])
    pad = d * (k - 1) // 2 if keep or rng.random() < 0.6 else rng.randrange(0, k)
    g = rng.choice([x for x in range(1, c + 1) if c % x == 0])
    if rng.random() < 0.6:
        g = 1
    out = c if keep else g * rng.randrange(1, max(2, MAX_CH // g // 2) + 1)
    return {"kind": "conv", "out": out, "k": k, "stride": s, "dil": d, "groups": g, "pad": pad,
            "mode": rng.choice(["zeros"] * 4 + ["reflect", "replicate"]) if pad else "zeros",
            "bias": rng.random() < 0.7}


def d_dwconv(rng, dom, shape, keep=False):
    spec = d_conv(rng, dom, shape, keep)
    del spec["out"], spec["groups"]
    spec.update(kind="dwconv", mult=1 if keep else rng.choice([1, 1, 2]))
    return spec


def d_norm(rng, dom, shape, keep=False):
    kinds = {"img": ["bn", "bn", "gn", "ln"], "seq": ["bn", "gn", "ln"], "tok": ["ln"],
             "vec": ["bn", "ln"]}[dom]
    n = rng.choice(kinds)
    spec = {"kind": "norm", "norm": n}
    if n == "gn":
        spec["groups"] = rng.choice([x for x in range(1, shape[1] + 1) if shape[1] % x == 0])
    if n == "ln":
        spec["dims"] = 1 if dom in ("tok", "vec") else rng.randrange(1, len(shape))
    return spec


def d_act(rng, dom, shape, keep=False):
    names = list(ACTS) + ([] if keep or dom == "tok" else ["glu"])
    return {"kind": "act", "act": rng.choice(names)}


def d_pool(rng, dom, shape, keep=False):
    k = rng.choice([2, 2, 3])
    op = rng.choice(["max", "avg"])
    spec = {"kind": "pool", "op": op, "k": k, "stride": rng.choice([1, 2, k]),
            "pad": rng.choice([0, 0, k // 2]), "ceil": rng.random() < 0.3}
    if op == "avg":
        spec["count_pad"] = rng.random() < 0.5
    return spec


def d_adapool(rng, dom, shape, keep=False):
    return {"kind": "adapool", "size": rng.choice([1, 1, 2, 3])}


def d_interp(rng, dom, shape, keep=False):
    mode = rng.choice(["nearest", "nearest-exact", "bilinear"])
    spec = {"kind": "interp", "mode": mode, "factor": rng.choice([2, 2, 3, 0.5])}
    if mode == "bilinear":
        spec["align"] = rng.random() < 0.5
    return spec


def d_pixel_shuffle(rng, dom, shape, keep=False):
    return {"kind": "pixel_shuffle", "r": 2}


def d_se(rng, dom, shape, keep=False):
    return {"kind": "se", "r": rng.choice([2, 4]), "act": rng.choice(["relu", "silu"])}


def d_residual(rng, dom, shape, keep=False, depth=0):
    return {"kind": "residual", "body": draw_layers(rng, dom, shape, rng.randint(1, 3), True, depth + 1)}


def d_branches(rng, dom, shape, keep=False, depth=0):
    join = "add" if keep else rng.choice(["cat", "cat", "add", "mul"])
    n = rng.choice([2, 2, 3])
    return {"kind": "branches", "join": join,
            "branches": [draw_layers(rng, dom, shape, rng.randint(0 if i else 1, 2), True, depth + 1)
                         for i in range(n)]}


def d_split(rng, dom, shape, keep=False, depth=0):
    c = shape[1]
    if c < 2:
        raise Unfit("one channel cannot split")
    a = c // 2 if rng.random() < 0.6 else rng.randrange(1, c)
    sizes = [a, c - a]
    return {"kind": "split", "sizes": sizes,
            "branches": [draw_layers(rng, dom, (1, n, *shape[2:]), rng.randint(0, 2), True, depth + 1)
                         for n in sizes]}


def d_cond(rng, dom, shape, keep=False, depth=0):
    return {"kind": "cond", "then": draw_layers(rng, dom, shape, rng.randint(1, 2), True, depth + 1),
            "else": draw_layers(rng, dom, shape, rng.randint(1, 2), True, depth + 1)}


def d_reshape(rng, dom, shape, keep=False):
    ops = {"img": ["tokens", "flatten", "mean", "swap_hw", "fold_h", "chunk_add"],
           "seq": ["tokens", "flatten", "mean", "chunk_add"],
           "tok": ["transpose", "mean", "flatten"], "vec": []}[dom]
    return {"kind": "reshape", "op": rng.choice(ops)}


def d_linear(rng, dom, shape, keep=False):
    return {"kind": "linear", "out": shape[-1] if keep else rng.randrange(2, 33),
            "bias": rng.random() < 0.8}


def d_softmax(rng, dom, shape, keep=False):
    return {"kind": "softmax"}


def d_attention(rng, dom, shape, keep=False):
    return {"kind": "attention", "heads": rng.choice([h for h in (1, 2, 4) if shape[2] % h == 0]),
            "sdpa": rng.random() < 0.5, "causal": rng.random() < 0.3}


def d_rnn(rng, dom, shape, keep=False):
    return {"kind": "rnn", "cell": rng.choice(["gru", "lstm"]), "hidden": rng.randrange(2, 17),
            "layers": rng.choice([1, 1, 1, 2]), "bidirectional": rng.random() < 0.3}


def d_cls_token(rng, dom, shape, keep=False):
    return {"kind": "cls_token"}


def d_mbconv(rng, dom, shape, keep=False):
    same = keep or rng.random() < 0.6
    return {"kind": "mbconv", "expand": rng.choice([1, 4, 6]), "k": rng.choice([3, 5]),
            "stride": 1 if same else rng.choice([1, 2]),
            "out": shape[1] if same else rng.randrange(4, 25)}


DRAWERS = {k[2:]: v for k, v in globals().items() if k.startswith("d_")}
CONTAINERS = {"residual", "branches", "split", "cond"}

# kind -> weight, per domain; PRESERVE: what a container body may hold (shape-preserving draws)
WEIGHTS = {
    "img": {"conv": 6, "dwconv": 3, "norm": 3, "act": 4, "pool": 2, "adapool": 1, "interp": 1,
            "pixel_shuffle": 1, "se": 1, "residual": 2, "branches": 1, "split": 1, "cond": 1,
            "reshape": 2, "mbconv": 1},
    "seq": {"conv": 6, "dwconv": 2, "norm": 2, "act": 4, "pool": 2, "se": 1, "residual": 2,
            "branches": 1, "split": 1, "cond": 1, "reshape": 2},
    "tok": {"linear": 3, "norm": 2, "act": 2, "attention": 2, "rnn": 2, "residual": 2, "cond": 1,
            "reshape": 2, "softmax": 1, "cls_token": 1},
    "vec": {"linear": 5, "norm": 2, "act": 4, "softmax": 1, "residual": 1, "branches": 1, "cond": 1},
}
PRESERVE = {
    "img": {"conv": 4, "dwconv": 3, "norm": 2, "act": 3, "se": 1, "residual": 1, "cond": 1, "mbconv": 1},
    "seq": {"conv": 4, "dwconv": 2, "norm": 2, "act": 3, "se": 1, "residual": 1},
    "tok": {"linear": 3, "norm": 2, "act": 2, "attention": 3, "residual": 1},
    "vec": {"linear": 4, "norm": 2, "act": 3},
}


def draw_one(rng, dom, shape, keep=False, depth=0, tries=30):
    """A spec that builds on (dom, shape); with keep, one that preserves the shape."""
    table = PRESERVE[dom] if keep else WEIGHTS[dom]
    for _ in range(tries):
        kind = rng.choices(list(table), list(table.values()))[0]
        if kind in CONTAINERS and depth >= 2:
            continue
        try:
            spec = DRAWERS[kind](rng, dom, shape, keep, depth) if kind in CONTAINERS \
                else DRAWERS[kind](rng, dom, shape, keep)
            spec["seed"] = _seed(rng)
            _, d2, s2 = build_one(spec, dom, shape)
        except Unfit:
            continue
        if keep and (d2, s2) != (dom, shape):
            continue
        return spec, d2, s2
    raise Unfit(f"nothing fits {dom} {shape}")


def draw_layers(rng, dom, shape, n, keep=False, depth=0):
    specs = []
    for _ in range(n):
        try:
            spec, dom, shape = draw_one(rng, dom, shape, keep, depth)
        except Unfit:
            break
        specs.append(spec)
    return specs


def draw_input(rng):
    dom = rng.choices(["img", "seq", "tok", "vec"], [5, 3, 2, 1])[0]
    if dom == "img":
        return dom, (1, rng.randrange(1, 9), rng.randrange(3, 17), rng.randrange(3, 17))
    if dom == "seq":
        return dom, (1, rng.randrange(1, 13), rng.randrange(4, 33))
    if dom == "tok":
        return dom, (1, rng.randrange(2, 13), rng.choice([4, 6, 8, 12, 16]))
    return dom, (1, rng.randrange(2, 65))


def draw_program(rng: random.Random):
    dom, shape = draw_input(rng)
    specs = draw_layers(rng, dom, shape, rng.randint(1, 6))
    if not specs:
        specs = [{"kind": "act", "act": "relu", "seed": _seed(rng)}]
    build(specs, dom, shape)    # the whole list builds
    return dom, shape, specs
