"""Bugs the differential tester (tests/fuzz/difftest/torch_programs.py) found, each as the
minimal pure-torch program it shrank to."""
import pytest
import torch
import torch.nn as nn

from test_torch_models import check


class SplitSeluConv(nn.Module):
    """The shrunk program: selu on one part of a channel split, cat back, a conv1d."""
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(10, 12, 3, padding=1)

    def forward(self, x):
        a, b = torch.split(x, [2, 8], 1)
        return self.conv(torch.cat([a, torch.selu(b)], 1))


@pytest.mark.parametrize("act", [nn.SELU(), nn.ELU(alpha=0.4), nn.ELU(alpha=2.5)],
                         ids=["selu", "elu0.4", "elu2.5"])
def test_elu_keeps_alpha_and_scale(act):
    """aten.elu's alpha / scale / input_scale were dropped (every ELU lowered as alpha 1), so
    SELU and ELU(alpha != 1) gave silently wrong values (0.47 off on outputs of ~2)."""
    check(nn.Sequential(act), torch.randn(1, 4, 9), n=3)


def test_split_selu_conv():
    check(SplitSeluConv(), torch.randn(1, 10, 9))
