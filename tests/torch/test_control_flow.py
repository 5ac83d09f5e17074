"""torch.cond -> C if/else, torch.while_loop -> bounded C loop, nested every way (cond in while,
while in cond, while in while, cond in cond); compared with eager for inputs that take every
branch; a loop that exceeds max_iterations makes NAME_invoke return 1 (its header says so)."""
import subprocess

import numpy as np
import pytest

# CI installs torch (.ci/setup): without it this module errors at collection, never skips.
import torch  # noqa: E402
nn = torch.nn

import eerie_c  # noqa: E402


def compare(m, xs, example, **kw):
    got, report = eerie_c.run(m, xs, example, **kw)
    n = xs[0].shape[0]
    with torch.no_grad():
        refs = [m(*[torch.tensor(x[i]) for x in xs]) for i in range(n)]
    refs = [r if isinstance(r, tuple) else (r,) for r in refs]
    for k, g in enumerate(got):
        r = np.stack([ref[k].numpy() for ref in refs])
        assert g.shape == r.shape
        assert np.abs(g - r).max() <= 1e-5
    return got, report


class CondActivation(nn.Module):
    def forward(self, x):
        return torch.cond(x.mean() > 0, lambda x: torch.relu(x), lambda x: torch.sigmoid(x), (x,))


class Newton(nn.Module):
    def forward(self, x):
        def cond(x, d, n):
            return (d.abs().max() > 1e-6) & (n < 100)

        def body(x, d, n):
            nd = -0.1 * x
            return x + nd, nd, n + 1
        return torch.while_loop(cond, body, (x, torch.ones_like(x), torch.zeros(())))


class EarlyExit(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 4)
        self.b = nn.Linear(8, 16)
        self.c = nn.Linear(16, 4)

    def forward(self, x):
        p = torch.softmax(self.a(x), -1)
        return torch.cond(p.max() > 0.5, lambda x, p: p.clone(),
                          lambda x, p: torch.softmax(self.c(torch.relu(self.b(x))), -1), (x, p))


class CondInWhile(nn.Module):
    def forward(self, x):
        def cond(x, n):
            return n < 6

        def body(x, n):
            y = torch.cond(x.sum() > 0, lambda x: x * 0.5 - 1, lambda x: x + 2, (x,))
            return y, n + 1
        return torch.while_loop(cond, body, (x, torch.zeros(())))


class Nested(nn.Module):
    """Three nestings in one program (one compile): while in cond, while in while (the inner
    trip count set by the outer counter), cond in cond."""
    def forward(self, x):
        def halve_thrice(x):
            return torch.while_loop(lambda x, n: n < 3, lambda x, n: (x * 0.5 + 1, n + 1),
                                    (x, torch.zeros(())))[0]
        a = torch.cond(x.sum() > 0, halve_thrice, lambda x: x - 1, (x,))

        def outer(x, n):
            y = torch.while_loop(lambda y, m: m < n + 1, lambda y, m: (y * 0.9 + 0.1, m + 1),
                                 (x, torch.zeros(())))[0]
            return y, n + 1
        b, trips = torch.while_loop(lambda x, n: (x.abs().max() > 0.5) & (n < 5), outer,
                                    (x, torch.zeros(())))

        def big(x):
            return torch.cond(x.max() > 1, lambda x: x * 2, lambda x: x * 3, (x,))
        c = torch.cond(x.sum() > 0, big, lambda x: torch.tanh(x), (x,))
        return a, b, trips, c


# inputs for Nested: every branch of both conds, the outer loop stopping early and at its bound
NESTED_XS = np.stack([np.full(3, v, np.float32) for v in (-2.0, 0.2, 3.0, 0.4)])


def test_cond_takes_both_branches():
    xs = np.stack([np.random.default_rng(s).standard_normal(6).astype(np.float32) + off
                   for s, off in enumerate((-2, 2, -1, 1))])
    compare(CondActivation(), [xs], (torch.randn(6),))


def test_newton_loop_both_exits():
    # Tiny inputs converge in a few steps; large ones stop at the 100-step limit.
    xs = np.stack([np.full(4, s, np.float32) * np.arange(1, 5, dtype=np.float32) for s in (1e-8, 1.0, 100.0)])
    got, _ = compare(Newton(), [xs], (torch.randn(4),))
    assert got[2].tolist()[2] == 100.0 and got[2].tolist()[0] < 100.0


def test_loop_over_its_maximum_fails_at_run_time():
    xs = np.full((1, 4), 100.0, np.float32)
    with pytest.raises(eerie_c.EerieError, match="failed to run: .*newton_invoke returned 1"):
        eerie_c.run(Newton(), [xs], (torch.randn(4),), max_iterations=50)


MAIN = r"""
#include <stdio.h>
#include "newton.h"
int main(void)
{
    float x[4] = {100.0f, 200.0f, 300.0f, 400.0f}, small[4] = {1e-8f, 1e-8f, 1e-8f, 1e-8f};
    float y[4], d[4], n[1];
    int over = newton_invoke(x, y, d, n);
    int ok = newton_invoke(small, y, d, n);
    printf("%d %d\n", over, ok);
    return 0;
}
"""


def test_loop_overrun_returns_1_from_invoke(tmp_path):
    """Called from C: 1 past the maximum trip count, 0 for an input that converges; the
    header documents both codes and the bound."""
    res = eerie_c.compile(Newton(), (torch.randn(4),), max_iterations=50, out_dir=tmp_path)
    header = res.files["newton.h"]
    assert "Returns 0 on success, 1 when a loop's condition still held" in header
    assert "(50 iterations;" in header
    (tmp_path / "main.c").write_text(MAIN)
    subprocess.run(["gcc", "-std=c99", "-O1", "-I.", "newton.c", "main.c", "-o", "t", "-lm"],
                   cwd=tmp_path, check=True, capture_output=True)
    p = subprocess.run([str(tmp_path / "t")], capture_output=True, text=True, check=True)
    assert p.stdout.split() == ["1", "0"]
    plain = eerie_c.compile(CondActivation(), (torch.randn(6),)).files["cond_activation.h"]
    assert "Returns 0 on success. Not reentrant" in plain


def test_while_in_cond_while_in_while_cond_in_cond():
    compare(Nested(), [NESTED_XS], (torch.randn(3),))


def test_early_exit_classifier():
    torch.manual_seed(3)
    m = EarlyExit().eval()
    xs = np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32) * 3
    with torch.no_grad():
        taken = {bool(torch.softmax(m.a(torch.tensor(x)), -1).max() > 0.5) for x in xs}
    assert taken == {True, False}
    compare(m, [xs], (torch.randn(8),))


def test_cond_nested_in_while():
    xs = np.stack([np.full(3, v, np.float32) for v in (-5.0, 0.5, 7.0)])
    compare(CondInWhile(), [xs], (torch.randn(3),))


def test_loop_c_has_a_bounded_for():
    res = eerie_c.compile(Newton(), (torch.randn(4),), max_iterations=77)
    c = res.files["newton.c"]
    assert "trip0 < 78" in c and "return 1;" in c and "while (" not in c
