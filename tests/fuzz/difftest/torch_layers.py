"""The layer catalogue of the PyTorch differential tester: each layer kind draws a spec (a plain
dict: "kind" plus its parameters) that fits the current shape, and builds an nn.Module from a
spec and an input shape. A program is a list of specs, so the shrinker edits specs and the module
is rebuilt; a spec that no longer fits its input (a kernel wider than the shrunk image) raises
Unfit, and that candidate is skipped.

Shapes carry batch 1 and live in one of four domains: "img" (1, C, H, W), "seq" (1, C, L),
"tok" (1, L, E: attention and recurrent layers), "vec" (1, F).

Each spec carries its own "seed": its weights are drawn from it, so dropping another layer keeps
this one's weights. Layer kinds that hit a gap another branch is closing are tagged (gap()), so a
campaign can tell those findings apart or leave them out.
"""
from __future__ import annotations


import torch
import torch.nn as nn
import torch.nn.functional as F


class Unfit(Exception):
    """The spec does not fit its input shape (after a shrink edited it or its input)."""


# Activations eerie-c lowers (docs/pytorch.md, checked with eerie_c.check): module factories.
ACTS = {
    "relu": nn.ReLU, "relu6": nn.ReLU6, "sigmoid": nn.Sigmoid, "tanh": nn.Tanh,
    "gelu": nn.GELU, "gelu_tanh": lambda: nn.GELU("tanh"), "hardswish": nn.Hardswish,
    "hardsigmoid": nn.Hardsigmoid, "elu": nn.ELU, "selu": nn.SELU, "silu": nn.SiLU,
    "leaky_relu": lambda: nn.LeakyReLU(0.1), "hardtanh": lambda: nn.Hardtanh(-1.5, 0.75),
    "softsign": nn.Softsign, "tanhshrink": nn.Tanhshrink, "hardshrink": lambda: nn.Hardshrink(0.3),
    "prelu": lambda: nn.PReLU(init=0.2),
}

# Known gaps: a program holding one is tagged with it (and the CI slice leaves it out) until
# the gap is closed. Closed in stop 25 and untagged since: aten.flip (bidirectional or
# multi-layer GRU / LSTM), a float class token concatenated in PT2E int8, and the MBConv +
# squeeze-excite block of the EfficientNet miscompile.
GAPS: dict[str, str] = {}


def gap(spec: dict) -> str | None:
    return None


def children(spec: dict) -> list[list[dict]]:
    """The nested layer lists of a container spec (residual body, branches, cond arms)."""
    return [spec[k] for k in ("body", "then", "else") if k in spec] + list(spec.get("branches", []))


# ---------------------------------------------------------------- modules the specs build

class Seq(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(self, x):
        for m in self.layers:
            x = m(x)
        return x


class Residual(nn.Module):
    def __init__(self, body):
        super().__init__()
        self.body = body

    def forward(self, x):
        return x + self.body(x)


class Branches(nn.Module):
    """Parallel branches joined by cat on channels (dim 1) or by add / mul."""
    def __init__(self, branches, join):
        super().__init__()
        self.branches, self.join = nn.ModuleList(branches), join

    def forward(self, x):
        ys = [b(x) for b in self.branches]
        if self.join == "cat":
            return torch.cat(ys, 1)
        out = ys[0]
        for y in ys[1:]:
            out = out + y if self.join == "add" else out * y
        return out


class Split(nn.Module):
    """x split on channels (chunk or uneven split), one branch per part, cat back."""
    def __init__(self, branches, sizes):
        super().__init__()
        self.branches, self.sizes = nn.ModuleList(branches), sizes

    def forward(self, x):
        parts = torch.split(x, self.sizes, 1)
        return torch.cat([b(p) for b, p in zip(self.branches, parts)], 1)


class Cond(nn.Module):
    def __init__(self, then, other):
        super().__init__()
        self.then, self.other = then, other

    def forward(self, x):
        return torch.cond(x.mean() > 0, lambda t: self.then(t), lambda t: self.other(t), (x,))


class SqueezeExcite(nn.Module):
    """x * sigmoid(fc2(act(fc1(mean(x))))) over the spatial dims."""
    def __init__(self, c, r, act):
        super().__init__()
        self.fc1, self.fc2, self.act = nn.Linear(c, max(1, c // r)), nn.Linear(max(1, c // r), c), ACTS[act]()

    def forward(self, x):
        dims = tuple(range(2, x.dim()))
        s = self.fc2(self.act(self.fc1(x.mean(dims))))
        return x * torch.sigmoid(s).reshape(*s.shape, *([1] * len(dims)))


class Fn(nn.Module):
    """A parameter-free function of x (reshapes, permutes, interpolate, softmax, ...)."""
    def __init__(self, fn, what):
        super().__init__()
        self.fn, self.what = fn, what

    def forward(self, x):
        return self.fn(x)

    def extra_repr(self):
        return self.what


class Tokens(nn.Module):
    """img (1,C,H,W) -> tok (1,H*W,C) or seq (1,C,L) -> tok (1,L,C)."""
    def forward(self, x):
        return x.flatten(2).transpose(1, 2)


class Attention(nn.Module):
    def __init__(self, e, heads, sdpa, causal):
        super().__init__()
        self.sdpa, self.heads, self.causal = sdpa, heads, causal
        if sdpa:
            self.qkv, self.out = nn.Linear(e, 3 * e), nn.Linear(e, e)
        else:
            self.mha = nn.MultiheadAttention(e, heads, batch_first=True)

    def forward(self, x):
        if not self.sdpa:
            return self.mha(x, x, x, need_weights=False)[0]
        b, n, e = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, e // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.out(y.transpose(1, 2).reshape(b, n, e))


class Recurrent(nn.Module):
    def __init__(self, cell, e, h, layers, bidirectional):
        super().__init__()
        self.rnn = (nn.GRU if cell == "gru" else nn.LSTM)(e, h, layers, batch_first=True,
                                                          bidirectional=bidirectional)

    def forward(self, x):
        return self.rnn(x)[0]


class ClsToken(nn.Module):
    def __init__(self, e):
        super().__init__()
        self.cls = nn.Parameter(torch.randn(1, 1, e) * 0.5)

    def forward(self, x):
        return torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1)


def randomize_bn(bn):
    """Non-trivial running statistics and affine parameters (folding must use them)."""
    with torch.no_grad():
        bn.running_mean.normal_(0, 0.5)
        bn.running_var.uniform_(0.3, 2.0)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.normal_(0, 0.3)
    return bn


def out_size(n, k, s, p, d, ceil=False):
    span = n + 2 * p - d * (k - 1) - 1
    if span < 0:
        raise Unfit(f"kernel {k} dilation {d} wider than {n}+2*{p}")
    o = (-(-span // s) if ceil else span // s) + 1
    if ceil and (o - 1) * s >= n + p:   # torch drops a last window starting in the padding
        o -= 1
    return o
