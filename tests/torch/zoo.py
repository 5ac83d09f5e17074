"""Small PyTorch models of the kinds people deploy on microcontrollers, built here (no weights
from a hub): each family as an `nn.Module` with an example input, for the float32 and the
PT2E int8 tests (test_zoo_float.py, test_pt2e.py).

Every module is deterministic given the seed, and puts its batch norms' statistics somewhere
other than the defaults (a fresh BatchNorm is the identity, which would hide folding bugs).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


def _randomize_norms(m: nn.Module, seed: int):
    g = torch.Generator().manual_seed(seed)
    for mod in m.modules():
        if isinstance(mod, (nn.BatchNorm1d, nn.BatchNorm2d)):
            c = mod.num_features
            mod.running_mean.copy_(torch.randn(c, generator=g) * 0.1)
            mod.running_var.copy_(torch.rand(c, generator=g) * 0.5 + 0.75)
            mod.weight.data.copy_(torch.rand(c, generator=g) * 0.5 + 0.75)
            mod.bias.data.copy_(torch.randn(c, generator=g) * 0.1)
    return m


class ImageCNN(nn.Module):
    """conv-bn-relu x2, max pool, global average pool, linear: the classic image classifier."""

    def __init__(self):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.c2, self.b2 = nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.b1(self.c1(x)))
        x = self.pool(F.relu(self.b2(self.c2(x))))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


class DSCNN(nn.Module):
    """Keyword spotting DS-CNN (the MLPerf Tiny kws_ref_model's architecture at width `c`):
    conv 10x4 stride 2, `blocks` depthwise-separable blocks, average pool, linear 12."""

    def __init__(self, c: int = 64, blocks: int = 4, frames: int = 49, coeffs: int = 10):
        super().__init__()
        self.conv = nn.Conv2d(1, c, (10, 4), stride=2, padding=(5, 1))
        self.bn = nn.BatchNorm2d(c)
        layers = []
        for _ in range(blocks):
            layers += [nn.Conv2d(c, c, 3, padding=1, groups=c), nn.BatchNorm2d(c), nn.ReLU(),
                       nn.Conv2d(c, c, 1), nn.BatchNorm2d(c), nn.ReLU()]
        self.blocks = nn.Sequential(*layers)
        h, w = (frames + 10 - 10) // 2 + 1, (coeffs + 2 - 4) // 2 + 1
        self.pool = nn.AvgPool2d((h, w))
        self.fc = nn.Linear(c, 12)

    def forward(self, x):
        x = F.relu(self.bn(self.conv(x)))
        x = self.pool(self.blocks(x)).flatten(1)
        return self.fc(x)


class GRUNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(8, 16, batch_first=True)
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.fc(y[:, -1])


class LSTMNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(8, 16, batch_first=True)
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.fc(y[:, -1])


class TCN(nn.Module):
    """Dilated causal Conv1d blocks with residuals (left padding only: no look-ahead)."""

    def __init__(self, c: int = 8):
        super().__init__()
        self.inp = nn.Conv1d(2, c, 1)
        self.convs = nn.ModuleList(nn.Conv1d(c, c, 3, dilation=d) for d in (1, 2, 4))
        self.head = nn.Conv1d(c, 3, 1)

    def forward(self, x):
        x = self.inp(x)
        for conv in self.convs:
            d = conv.dilation[0]
            x = x + F.relu(conv(F.pad(x, (2 * d, 0))))
        return self.head(x)


class TinyTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32,
                                              dropout=0.0, batch_first=True)
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        return self.fc(self.enc(x).mean(dim=1))


class UNet(nn.Module):
    """Two-level U-Net: down (conv, max pool), up (F.interpolate), skip concatenation."""

    def __init__(self, mode: str = "nearest"):
        super().__init__()
        self.mode = mode
        self.d1 = nn.Conv2d(1, 8, 3, padding=1)
        self.d2 = nn.Conv2d(8, 16, 3, padding=1)
        self.u1 = nn.Conv2d(24, 8, 3, padding=1)
        self.out = nn.Conv2d(8, 2, 1)

    def forward(self, x):
        a = F.relu(self.d1(x))
        b = F.relu(self.d2(F.max_pool2d(a, 2)))
        if self.mode == "nearest":
            up = F.interpolate(b, scale_factor=2, mode="nearest")
        else:
            up = F.interpolate(b, scale_factor=2, mode="bilinear", align_corners=False)
        return self.out(F.relu(self.u1(torch.cat([a, up], dim=1))))


class AutoEncoder(nn.Module):
    """MLP autoencoder (the MLPerf Tiny anomaly detection shape, smaller)."""

    def __init__(self, n: int = 64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n, 32), nn.ReLU(), nn.Linear(32, 8), nn.ReLU(),
                                 nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, n))

    def forward(self, x):
        return self.net(x)


class MobileBlock(nn.Module):
    """MobileNetV3-style inverted residual: expand 1x1, hardswish, depthwise 3x3,
    squeeze-excite (pool, fc, relu, fc, hardsigmoid, scale), project 1x1, residual."""

    def __init__(self, c: int = 8, e: int = 24):
        super().__init__()
        self.expand, self.bn1 = nn.Conv2d(c, e, 1), nn.BatchNorm2d(e)
        self.dw, self.bn2 = nn.Conv2d(e, e, 3, padding=1, groups=e), nn.BatchNorm2d(e)
        self.se1, self.se2 = nn.Conv2d(e, 8, 1), nn.Conv2d(8, e, 1)
        self.project, self.bn3 = nn.Conv2d(e, c, 1), nn.BatchNorm2d(c)

    def forward(self, x):
        y = F.hardswish(self.bn1(self.expand(x)))
        y = F.hardswish(self.bn2(self.dw(y)))
        s = F.adaptive_avg_pool2d(y, 1)
        s = F.hardsigmoid(self.se2(F.relu(self.se1(s))))
        y = y * s
        return x + self.bn3(self.project(y))


class Norms(nn.Module):
    """layer_norm over the features and group_norm over channel groups."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1)
        self.gn = nn.GroupNorm(2, 8)
        self.ln = nn.LayerNorm(8)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        y = self.gn(self.conv(x))
        y = y.mean(dim=(2, 3))
        return self.fc(self.ln(y))


def families():
    """name -> (module factory, example input shape). The same list for float and int8."""
    return {
        "image_cnn": (ImageCNN, (1, 3, 16, 16)),
        "ds_cnn": (lambda: DSCNN(c=16, blocks=2), (1, 1, 49, 10)),
        "gru": (GRUNet, (1, 6, 8)),
        "lstm": (LSTMNet, (1, 6, 8)),
        "tcn": (TCN, (1, 2, 32)),
        "transformer": (TinyTransformer, (1, 6, 16)),
        "unet_nearest": (lambda: UNet("nearest"), (1, 1, 16, 16)),
        "unet_bilinear": (lambda: UNet("bilinear"), (1, 1, 16, 16)),
        "autoencoder": (AutoEncoder, (1, 64)),
        "mobile_block": (MobileBlock, (1, 8, 12, 12)),
        "norms": (Norms, (1, 4, 8, 8)),
    }


def build(name: str, seed: int = 0):
    """(module in eval mode, example input) for a family, deterministic in `seed`."""
    factory, shape = families()[name]
    torch.manual_seed(seed)
    m = _randomize_norms(factory(), seed).eval()
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed + 1))
    return m, x
