"""PyTorch programs compiled through torch.export, run on the host, compared with the module's
own output (float32, max abs difference 1e-5). Also: the layout transposes the
frontend adds around NHWC ops cancel in a conv/relu/pool chain, .pt2 files and the CLI."""
import subprocess
import sys

import numpy as np
import pytest

# CI installs torch (.ci/setup): without it this module errors at collection, never skips.
import torch  # noqa: E402
nn = torch.nn
F = nn.functional

import eerie_c  # noqa: E402


ATOL = 1e-5   # the bound: max abs difference from eager (observed ~1e-6)


def check(module, *args, tmp_path=None, atol=ATOL, n=2, seed=0, **kw):
    """Run the compiled C on `n` random batches of the example shapes; compare with eager:
    within `atol` absolute, NaN exactly where eager gives NaN."""
    module = module.eval()
    gen = torch.Generator().manual_seed(seed)
    batches = [[torch.randn(a.shape, generator=gen) for a in args] for _ in range(n)]
    arrays = [np.stack([b[k].numpy() for b in batches]) for k in range(len(args))]
    got, report = eerie_c.run(module, arrays, tuple(args), **kw)
    with torch.no_grad():
        refs = [module(*b) for b in batches]
    refs = [r if isinstance(r, (tuple, list)) else (r,) for r in refs]
    assert len(got) == len(refs[0])
    for k, g in enumerate(got):
        r = np.stack([ref[k].numpy() for ref in refs])
        assert g.shape == r.shape, (g.shape, r.shape)
        np.testing.assert_allclose(g, r, rtol=0, atol=atol, equal_nan=True)
    return report


def randomize_bn(m):
    g = torch.Generator().manual_seed(1)
    for mod in m.modules():
        if isinstance(mod, (nn.BatchNorm1d, nn.BatchNorm2d)):
            with torch.no_grad():
                mod.running_mean.copy_(torch.rand(mod.num_features, generator=g) - 0.5)
                mod.running_var.copy_(torch.rand(mod.num_features, generator=g) + 0.5)
                mod.weight.copy_(torch.rand(mod.num_features, generator=g) + 0.5)
                mod.bias.copy_(torch.rand(mod.num_features, generator=g) - 0.5)
    return m


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 12, 3, stride=2)
        self.bn2 = nn.BatchNorm2d(12)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(12, 5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.c1(x))), 2)
        x = F.relu(self.bn2(self.c2(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


class DepthwiseSeparable(nn.Module):
    def __init__(self):
        super().__init__()
        self.dw = nn.Conv2d(4, 8, 3, padding=1, groups=4, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.pw = nn.Conv2d(8, 6, 1)
        self.grouped = nn.Conv2d(6, 6, 3, groups=3, padding=1)

    def forward(self, x):
        x = F.relu6(self.bn(self.dw(x)))
        x = F.avg_pool2d(self.pw(x), 2)
        return torch.sigmoid(self.grouped(x))


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(6, 6, 3, padding=1)
        self.b = nn.Conv2d(6, 6, 3, padding=1)
        self.bn = nn.BatchNorm2d(6)

    def forward(self, x):
        y = F.relu(self.a(x))
        return F.relu(self.bn(self.b(y)) + x)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(10, 16)
        self.l2 = nn.Linear(16, 16)
        self.l3 = nn.Linear(16, 8)
        self.bn = nn.BatchNorm1d(16)

    def forward(self, x):
        x = F.gelu(self.l1(x))
        x = F.hardswish(self.bn(self.l2(x)))
        y = self.l3(torch.tanh(x))
        return torch.sigmoid(y), F.gelu(y, approximate="tanh"), torch.log_softmax(y, dim=-1)


class Elementwise(nn.Module):
    def forward(self, x, y):
        a = (x * 2.5 - 1) / 4 + y
        b = torch.clamp(a, -0.5, 0.75) * torch.abs(y) - torch.exp(-x.abs())
        c = torch.where(x > y, torch.sqrt(x * x + 1), -torch.rsqrt(y * y + 1))
        d = torch.maximum(x, y) + torch.minimum(x, 0.1 * y) + (x ** 2) * 0.5
        return a, b, c, d


class Shapes(nn.Module):
    def forward(self, x):                  # x: [2, 3, 4, 5]
        p = x.permute(0, 2, 3, 1)           # [2, 4, 5, 3]
        s = p[:, 1:3, ::2, :]               # [2, 2, 3, 3]
        t = torch.cat([s, s * 2], dim=-1)   # [2, 2, 3, 6]
        u = x[:, 1].transpose(1, 2)         # [2, 5, 4]
        v = x.reshape(2, 60).sum(dim=1, keepdim=True) + x.mean(dim=(1, 2)).unsqueeze(-1).squeeze(-1)
        w = torch.softmax(x, dim=1)
        return t, u, v, w, x.flatten(1)[:, -7:]


class Conv1d(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv1d(3, 5, 3, padding=1)

    def forward(self, x):
        return F.relu(self.c(x))


MODELS = [
    ("small_cnn", lambda: randomize_bn(SmallCNN()), [(1, 3, 16, 16)]),
    ("depthwise_separable", lambda: randomize_bn(DepthwiseSeparable()), [(1, 4, 8, 8)]),
    ("residual", lambda: randomize_bn(Residual()), [(1, 6, 6, 6)]),
    ("mlp", lambda: randomize_bn(MLP()), [(4, 10)]),
    ("elementwise", Elementwise, [(3, 7), (3, 7)]),
    ("shapes", Shapes, [(2, 3, 4, 5)]),
    ("conv1d", Conv1d, [(1, 3, 12)]),
]


@pytest.mark.parametrize("name,make,shapes", MODELS, ids=[m[0] for m in MODELS])
def test_model_matches_eager(name, make, shapes):
    torch.manual_seed(0)
    check(make(), *[torch.randn(s) for s in shapes])


def test_transposes_cancel_in_conv_chain():
    torch.manual_seed(0)
    res = eerie_c.compile(randomize_bn(SmallCNN()).eval(), (torch.randn(1, 3, 16, 16),))
    kinds = [op.kind for op in res.graph.ops]
    # Only the NCHW input needs a transpose; everything after stays NHWC.
    assert kinds.count("TRANSPOSE") == 1, kinds
    assert "BATCH_NORM" not in kinds and kinds.count("MUL") == 0, kinds   # batch norm folded


def test_pt2_file_and_cli(tmp_path):
    torch.manual_seed(0)
    m = randomize_bn(SmallCNN()).eval()
    x = torch.randn(1, 3, 16, 16)
    path = tmp_path / "cnn.pt2"
    torch.export.save(torch.export.export(m, (x,)), str(path))
    np.save(tmp_path / "x.npy", x.numpy())
    p = subprocess.run([sys.executable, "-m", "eerie_c.cli", "run", str(path), "--input", str(tmp_path / "x.npy"),
                        "--output", str(tmp_path / "y.npy")], capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    ref = m(x).detach().numpy()
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), ref, rtol=0, atol=1e-5)
    p = subprocess.run([sys.executable, "-m", "eerie_c.cli", str(path), "-o", str(tmp_path / "out")],
                       capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "out" / "cnn.c").exists()


def test_unsupported_op_is_a_clear_error():
    class Sort(nn.Module):
        def forward(self, x):
            return torch.sort(x).values
    with pytest.raises(eerie_c.EerieError, match="unsupported PyTorch op aten.sort"):
        eerie_c.compile(Sort(), (torch.randn(4),))
