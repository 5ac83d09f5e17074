"""PT2E int8: float islands made only of exact data movement run in int8. ShuffleNet's units
split the channels (chunk), run one half through convolutions, concatenate it with the other
half and shuffle the channels (view, transpose, view); its stem max-pools with padding. The
quantizers annotate none of those, and the concatenated halves carry different parameters:
eerie-c concatenates in int8 at parameters covering both (requantizing the other input), and
pads the max pool with the lowest int8 value. No float island is left; the result keeps the
contract against the converted module."""
import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import eerie_c
from eerie_c.ir import Quant
from eerie_c.passes._int8_ops import covering_quant
from pt2e import QUANTIZERS, assert_contract, eager, output_step, quantize, random_inputs


def channel_shuffle(x, groups=2):
    n, c, h, w = x.shape
    return x.view(n, groups, c // groups, h, w).transpose(1, 2).contiguous().view(n, c, h, w)


class Unit(nn.Module):
    """ShuffleNetV2's stride-1 unit: half the channels pass, half go through 1x1 / depthwise
    3x3 / 1x1 convolutions, then concatenate and shuffle."""

    def __init__(self, c):
        super().__init__()
        h = c // 2
        self.branch = nn.Sequential(nn.Conv2d(h, h, 1), nn.BatchNorm2d(h), nn.ReLU(),
                                    nn.Conv2d(h, h, 3, padding=1, groups=h), nn.BatchNorm2d(h),
                                    nn.Conv2d(h, h, 1), nn.BatchNorm2d(h), nn.ReLU())

    def forward(self, x):
        keep, work = x.chunk(2, dim=1)
        return channel_shuffle(torch.cat([keep, self.branch(work)], 1))


class ShuffleBlock(nn.Module):
    def __init__(self, c=8):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, stride=2, padding=1), nn.BatchNorm2d(c), nn.ReLU())
        self.units = nn.Sequential(Unit(c), Unit(c))
        self.head = nn.Conv2d(c, 4, 1)

    def forward(self, x):
        x = F.max_pool2d(self.stem(x), 3, 2, 1)
        return self.head(self.units(x)).mean((2, 3))


@pytest.mark.parametrize("qname", QUANTIZERS)
def test_channel_shuffle_runs_in_int8(qname):
    from zoo import _randomize_norms
    torch.manual_seed(2)
    m = _randomize_norms(ShuffleBlock(), 2).eval()
    cm, ex = quantize(m, torch.randn(1, 3, 16, 16), qname)
    res = eerie_c.compile(cm, (ex,))
    g = res.graph
    assert res.report["quantization"]["float_islands"] == [], res.report["quantization"]["float_islands"]
    kinds = {}
    for op in g.ops:
        kinds.setdefault(op.kind, set()).add(g.t(op.outputs[0]).dtype)
    for kind in ("CONCATENATION", "MAX_POOL_2D", "TRANSPOSE", "STRIDED_SLICE"):
        assert kinds.get(kind) == {"int8"}, (kind, kinds)
    xs = random_inputs(tuple(ex.shape), 4, 41)
    outs, _ = eerie_c.run(cm, [xs], example_args=(ex,))
    assert_contract(outs[0], eager(cm, xs), output_step(g))


def _q(scale, zp):
    return Quant(np.array([scale], np.float32), np.array([zp], np.int64), 0)


def _range(q):
    s, z = float(q.scale[0]), int(q.zero_point[0])
    return (-128 - z) * s, (127 - z) * s


def test_covering_parameters():
    narrow, wide = _q(0.01, -128), _q(0.02, -128)           # [0, 2.55] and [0, 5.1]
    assert covering_quant([narrow, wide]) is wide            # the finest that covers all
    a, b = _q(0.01, -128), _q(0.01, 0)                      # [0, 2.55] and [-1.28, 1.27]
    u = covering_quant([a, b])       # neither covers: the union range over 256 levels (the
    lo, hi = _range(u)               # integer zero point may cost part of a step at one end)
    s = float(u.scale[0])
    assert abs(s - 3.83 / 255) < 1e-7 and lo <= -1.28 + s and hi >= 2.55 - s
