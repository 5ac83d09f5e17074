"""PT2E int8: a float parameter concatenated with a quantized tensor -- a ViT's class token,
`torch.cat([cls.expand(B, -1, -1), patches], 1)`. The quantizer leaves the parameter in float
and quantizes the concatenation's result; the converted module concatenates in float and
quantizes that at the result's parameters, so eerie-c quantizes the constant at compile time
with those parameters (rounded as quantize_per_tensor rounds) and concatenates int8 values.
A small ViT (patch embedding conv -> flatten -> class token -> + position embedding -> one
transformer encoder layer -> head) with both quantizers, against the converted module."""
import numpy as np
import pytest
import torch
import torch.nn as nn

import eerie_c
from pt2e import QUANTIZERS, assert_contract, eager, output_step, quantize, random_inputs


class TinyViT(nn.Module):
    def __init__(self, d=16, patch=4, img=8, ch=3, classes=5):
        super().__init__()
        self.embed = nn.Conv2d(ch, d, patch, stride=patch)
        tokens = (img // patch) ** 2 + 1
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.5)
        self.pos = nn.Parameter(torch.randn(1, tokens, d) * 0.1)
        self.enc = nn.TransformerEncoderLayer(d, 2, 2 * d, dropout=0.0, batch_first=True)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        patches = self.embed(x).flatten(2).transpose(1, 2)
        z = torch.cat([self.cls.expand(x.shape[0], -1, -1), patches], 1) + self.pos
        return self.head(self.enc(z)[:, 0])


@pytest.mark.parametrize("qname", QUANTIZERS)
def test_vit_class_token_int8(qname):
    torch.manual_seed(7)
    m = TinyViT().eval()
    cm, ex = quantize(m, torch.randn(1, 3, 8, 8), qname)
    res = eerie_c.compile(cm, (ex,))
    g = res.graph
    cats = [op for op in g.ops if op.kind == "CONCATENATION" and g.t(op.outputs[0]).dtype == "int8"]
    consts = [(g.t(t), g.t(op.outputs[0])) for op in cats for t in op.inputs if g.t(t).is_const]
    assert len(consts) == 1, "the class token must be an int8 constant of an int8 concatenation"
    token, out = consts[0]
    # The converted module quantizes the float concatenation at the result's parameters: the
    # class token's int8 values are torch's own quantize_per_tensor of the parameter.
    ref = torch.quantize_per_tensor(m.cls.detach(), float(out.scale), int(out.zero_point), torch.qint8)
    assert token.dtype == "int8" and same_params(token, out)
    assert np.array_equal(token.data.reshape(-1), ref.int_repr().numpy().reshape(-1))
    xs = random_inputs(tuple(ex.shape), 4, 23)
    outs, _ = eerie_c.run(cm, [xs], example_args=(ex,))
    assert_contract(outs[0], eager(cm, xs), output_step(g))


def same_params(a, b) -> bool:
    return float(a.scale) == float(b.scale) and int(a.zero_point) == int(b.zero_point)
