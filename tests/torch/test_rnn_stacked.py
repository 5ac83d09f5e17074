"""nn.GRU / nn.LSTM bidirectional, two layers deep, and both, batch_first either way: torch
decomposes the reverse direction into aten.flip of the sequence (REVERSE_V2), runs the cell,
and flips its outputs back. Float against eager (1e-5); PT2E int8 with both quantizers against
the converted module (docs/pytorch.md's contract: the recurrences are float islands, as
neither quantizer annotates aten.gru / aten.lstm). Also torch.flip by itself, on any dims."""
import numpy as np
import pytest

# CI installs torch (.ci/setup): without it this module errors at collection, never skips.
import torch  # noqa: E402
nn = torch.nn

import eerie_c  # noqa: E402
from test_torch_models import check  # noqa: E402


class Recurrent(nn.Module):
    """An RNN over an 8-feature sequence, then a linear head on every step's output (so the
    reverse direction's flip back is checked at every step, not only at the last one)."""

    def __init__(self, cell, bidirectional, layers, batch_first, explicit_h0=False):
        super().__init__()
        self.rnn = cell(8, 6, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first)
        self.head = nn.Linear(6 * (2 if bidirectional else 1), 3)
        self.h0 = (layers * (2 if bidirectional else 1), 6) if explicit_h0 else None
        if explicit_h0:   # a GRU's final state read too (XNNPACK's GRU annotator needs both)
            self.state_head = nn.Linear(6, 3)

    def forward(self, x):
        if self.h0 is None:
            y, _ = self.rnn(x)
            return self.head(y)
        n = x.shape[0 if self.rnn.batch_first else 1]
        y, h = self.rnn(x, torch.zeros(self.h0[0], n, self.h0[1]))
        last = self.state_head(h[-1])          # the last layer's reverse direction, [n, 3]
        return self.head(y) + (last.unsqueeze(1) if self.rnn.batch_first else last)


def _example(batch_first):
    return torch.randn(1, 5, 8) if batch_first else torch.randn(5, 1, 8)


# (cell, bidirectional, layers, batch_first): every combination of direction and depth for each
# cell, with batch_first both ways across them.
FLOAT_CASES = [
    (nn.GRU, True, 1, True), (nn.GRU, False, 2, False), (nn.GRU, True, 2, False),
    (nn.LSTM, True, 1, False), (nn.LSTM, False, 2, True), (nn.LSTM, True, 2, True),
]


@pytest.mark.parametrize("cell,bidirectional,layers,batch_first", FLOAT_CASES,
                         ids=[f"{c.__name__}-{'bi' if b else 'uni'}-{n}layer-{'bf' if f else 'sf'}"
                              for c, b, n, f in FLOAT_CASES])
def test_recurrent_float(cell, bidirectional, layers, batch_first):
    torch.manual_seed(3)
    m = Recurrent(cell, bidirectional, layers, batch_first)
    check(m, _example(batch_first), n=3)


class Flips(nn.Module):
    """flip along one dim, several adjacent dims (one REVERSE_V2), dims apart (one each),
    negative dims, a size-1 dim (nothing to do) and all dims."""

    def forward(self, x):                              # x [2, 3, 1, 5]
        return (x.flip(-1), x.flip(1, 3), x.flip(0, 1) * 2, x.flip(2), x.flip(0, 1, 2, 3) + 1,
                torch.flip(x, [3, 0]).sum(1))


def test_flip_any_dims():
    res = eerie_c.compile(Flips(), (torch.randn(2, 3, 1, 5),))
    assert "REVERSE_V2" in [op.kind for op in res.graph.ops]
    check(Flips(), torch.randn(2, 3, 1, 5), n=2)


# ---- PT2E int8 ---------------------------------------------------------------------------------

# XNNPACK's quantizer fails annotating an nn.GRU called without a hidden state or whose final
# state is unused (test_pt2e_zoo.py): its GRU gets an explicit zero h0 and its h_n is read.
INT8_CASES = [(nn.GRU, "xnnpack", False), (nn.GRU, "cortex_m", True),
              (nn.LSTM, "xnnpack", True), (nn.LSTM, "cortex_m", False)]


@pytest.mark.parametrize("cell,qname,batch_first", INT8_CASES,
                         ids=[f"{c.__name__}-{q}-{'bf' if f else 'sf'}" for c, q, f in INT8_CASES])
def test_bidirectional_two_layers_int8(cell, qname, batch_first):
    from pt2e import assert_contract, eager, output_step, quantize, random_inputs
    torch.manual_seed(4)
    m = Recurrent(cell, True, 2, batch_first, explicit_h0=cell is nn.GRU and qname == "xnnpack")
    cm, ex = quantize(m, _example(batch_first), qname)
    res = eerie_c.compile(cm, (ex,))
    g = res.graph
    heads = [op for op in g.ops if op.kind == "FULLY_CONNECTED" and g.t(op.outputs[0]).dtype == "int8"]
    assert heads, "the linear head must run in int8"
    for isl in res.report["quantization"]["float_islands"]:
        assert isl["ops"] and isl["reason"]
    xs = random_inputs(tuple(ex.shape), 3, 17)
    outs, _ = eerie_c.run(cm, [xs], example_args=(ex,))
    step = output_step(g)
    assert step > 0
    assert_contract(outs[0], eager(cm, xs), step)
