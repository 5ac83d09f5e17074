"""Each op family the PT2E path claims to run in int8 (docs/pytorch.md), in a small program
between quantized layers: the op must come out int8 (not a float island) and the program must
keep the accuracy contract against its own eager run."""
import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import eerie_c
from pt2e import assert_contract, eager, output_step, quantize, random_inputs

pytest.importorskip("torchao", reason="PT2E tests need torchao (pip install torchao==0.18.0)")


class Sandwich(nn.Module):
    """conv -> OP -> conv, so a quantizer puts quantize/dequantize around OP's operands and
    result whether or not it annotates OP itself."""

    def __init__(self, op, c_in=4, c_mid=8, c_out=4):
        super().__init__()
        self.a = nn.Conv2d(c_in, c_mid, 3, padding=1)
        self.op = op
        self.b = nn.Conv2d(c_mid, c_out, 1)

    def forward(self, x):
        return self.b(self.op(self.a(x)))


class Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


class Grouped(nn.Module):
    def __init__(self):
        super().__init__()
        self.g = nn.Conv2d(8, 8, 3, padding=1, groups=2)

    def forward(self, x):
        return self.g(x)


class Transposed(nn.Module):
    def __init__(self):
        super().__init__()
        self.t = nn.ConvTranspose2d(8, 8, 2, stride=2)

    def forward(self, x):
        return self.t(x)


class SelfMatmul(nn.Module):
    def forward(self, x):      # [1, C, H, W] -> per-channel Gram-like product, same shape
        n, c, h, w = x.shape
        a = x.reshape(c, h, w)
        return torch.bmm(a, a.transpose(1, 2)).reshape(n, c, h, h) * 0.1


class CatSelf(nn.Module):
    def forward(self, x):
        return torch.cat([x, F.relu(x)], dim=1)[:, :8]


OPS = {
    "relu6": Fn(F.relu6),
    "hardtanh": Fn(lambda x: F.hardtanh(x, 0.0, 6.0)),
    "hardswish": Fn(F.hardswish),
    "sigmoid": Fn(torch.sigmoid),
    "tanh": Fn(torch.tanh),
    "softmax": Fn(lambda x: torch.softmax(x, dim=1)),
    # two different int8 values per element (x and its mirror): the int8 MUL / ADD kernels, not
    # a table (a function of x alone, such as x * x, is one: see "square")
    "mul": Fn(lambda x: x * x.flip(3)),
    "add": Fn(lambda x: x + torch.relu(x.flip(3))),
    "square": Fn(lambda x: x * x + torch.relu(x)),
    "avg_pool": Fn(lambda x: F.avg_pool2d(x, 2)),
    "max_pool": Fn(lambda x: F.max_pool2d(x, 2)),
    "mean": Fn(lambda x: x - x.mean(dim=(2, 3), keepdim=True)),
    "pad": Fn(lambda x: F.pad(x, (1, 1, 1, 1))[:, :, 1:-1, 1:-1]),
    "permute": Fn(lambda x: x.permute(0, 1, 3, 2)),
    "grouped_conv": Grouped,   # a class: its weights are drawn in the test, after the seed
    "conv_transpose": Fn(lambda x: x),   # replaced below (shape change)
    "bmm": SelfMatmul(),
    "cat": CatSelf(),
    "flip": Fn(lambda x: x.flip(1, 3)),   # two REVERSE_V2 (dims not adjacent)
}
# op family -> IR kinds that must be int8 in the compiled program. An element-wise function of
# one int8 value (hardswish, sigmoid, tanh, x * x + relu(x)) is one TABLE_LOOKUP computed by
# torch (frontend/torch/lut_regions.py).
EXPECT = {
    "relu6": {"CONV_2D"}, "hardtanh": {"CONV_2D"}, "hardswish": {"TABLE_LOOKUP"},
    "sigmoid": {"TABLE_LOOKUP"}, "tanh": {"TABLE_LOOKUP"}, "softmax": {"SOFTMAX"}, "mul": {"MUL"},
    "square": {"TABLE_LOOKUP"},
    "add": {"ADD"}, "avg_pool": {"DEPTHWISE_CONV_2D"},   # rescaling: see _int8_ops.pool_as_depthwise
     "max_pool": {"MAX_POOL_2D"}, "mean": {"MEAN", "SUB"},
    "pad": {"PAD"}, "permute": {"TRANSPOSE"}, "grouped_conv": {"CONV_2D", "CONCATENATION"},
    "conv_transpose": {"TRANSPOSE_CONV"}, "bmm": {"BATCH_MATMUL"}, "cat": {"CONCATENATION"},
    "flip": {"REVERSE_V2"},
}


# XNNPACK's quantizer leaves a transposed conv's weights in float; ExecuTorch's quantizes them.
QUANTIZER = {"conv_transpose": "cortex_m"}


@pytest.mark.parametrize("family", sorted(OPS))
def test_op_runs_in_int8(family):
    torch.manual_seed(5)
    if family == "conv_transpose":
        m = nn.Sequential(nn.Conv2d(4, 8, 3, stride=2, padding=1), Transposed(), nn.Conv2d(8, 4, 1))
    else:
        op = OPS[family]
        m = Sandwich(op() if isinstance(op, type) else op)
    x = torch.randn(1, 4, 8, 8)
    cm, ex = quantize(m, x, QUANTIZER.get(family, "xnnpack"))
    res = eerie_c.compile(cm, (ex,))
    g = res.graph
    dtypes = {}
    for op in g.ops:
        dtypes.setdefault(op.kind, set()).add(g.t(op.outputs[0]).dtype)
    for kind in EXPECT[family]:
        assert dtypes.get(kind) == {"int8"}, (family, kind, dtypes, g.float_islands)
    assert g.float_islands == [], g.float_islands
    xs = random_inputs(x.shape, 4, 31)
    outs, _ = eerie_c.run(cm, [xs], example_args=(ex,))
    assert_contract(outs[0], eager(cm, xs), output_step(g))
