"""torch.while_loop with an integer loop counter (int32 ADD / LESS in the C) and a per-step
read of the sequence (index_select / x[i] -> GATHER with a run-time index): an RNN cell
iterated over a sequence, compared with eager PyTorch."""
import numpy as np
import pytest

# CI installs torch (.ci/setup): without it this module errors at collection, never skips.
import torch  # noqa: E402
nn = torch.nn

import eerie_c  # noqa: E402


class RNNLoop(nn.Module):
    """h <- tanh(W x_t + U h) for t < T, then a linear head; also returns the step count."""

    def __init__(self, by_index=False):
        super().__init__()
        self.cell = nn.RNNCell(4, 8)
        self.out = nn.Linear(8, 3)
        self.by_index = by_index

    def forward(self, xs):
        def cond(i, h):
            return i < xs.shape[0]

        def body(i, h):
            x = xs[i.reshape(1)] if self.by_index else xs.index_select(0, i.reshape(1))
            return i + 1, self.cell(x, h)
        i, h = torch.while_loop(cond, body, (torch.tensor(0), torch.zeros(1, 8)))
        return self.out(h), i


class CountDown(nn.Module):
    """Integer arithmetic on the carried counter: n <- n * 3 - 7 while n < 1000."""

    def forward(self, x):
        def cond(n, y):
            return n < 1000

        def body(n, y):
            return n * 3 - 7, y * 0.5 + 1
        return torch.while_loop(cond, body, (torch.tensor(5, dtype=torch.int32), x))


@pytest.mark.parametrize("by_index", [False, True], ids=["index_select", "getitem"])
def test_rnn_cell_while_loop(by_index):
    torch.manual_seed(0)
    m = RNNLoop(by_index).eval()
    xs = np.random.default_rng(1).standard_normal((3, 6, 4)).astype(np.float32)
    res = eerie_c.compile(m, (torch.randn(6, 4),))
    kinds = [op.kind for op in res.graph.ops]
    assert "GATHER" in kinds and "CF_LOOP" in kinds
    (hs, steps), _ = eerie_c.run(m, [xs], (torch.randn(6, 4),))
    assert steps.dtype == np.int32 and steps.tolist() == [6, 6, 6]
    with torch.no_grad():
        for k in range(len(xs)):
            ref = m(torch.tensor(xs[k]))[0].numpy()
            assert np.abs(hs[k] - ref).max() <= 1e-5


def test_integer_counter_arithmetic():
    m = CountDown()
    xs = np.random.default_rng(2).standard_normal((2, 3)).astype(np.float32)
    (n, y), _ = eerie_c.run(m, [xs], (torch.randn(3),))
    for k in range(2):
        rn, ry = m(torch.tensor(xs[k]))
        assert n[k] == rn.item() and np.abs(y[k] - ry.numpy()).max() <= 1e-5
