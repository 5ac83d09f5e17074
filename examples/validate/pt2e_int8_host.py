#!/usr/bin/env python3
"""Validate a PT2E int8 PyTorch program on the host: `eerie-c validate` on a saved .pt2.

The script quantizes a small CNN with PT2E (torchao's XNNPACK-style symmetric quantizer:
int8 activations, per-channel int8 weights), saves the converted program with
torch.export.save, and runs

    eerie-c validate OUT/small_cnn_int8.pt2 --count 50 -o OUT/validate

which compiles it, runs 50 random inputs (uniform over the range the input's QUANTIZE can
represent) through one host build and through the converted program in eager PyTorch, and
prints a table per output. Exit status 0: every output element within one output
quantization step of eager (docs/pytorch.md, "Accuracy contract").

    python examples/validate/pt2e_int8_host.py [--out build/validate_pt2e]

Needs eerie-c with torch and torchao (.ci/setup installs them) and a host C compiler.
"""
from __future__ import annotations

import argparse
import logging
import sys
import warnings
from pathlib import Path

import torch
from torch import nn

HERE = Path(__file__).resolve().parent
if (HERE.parents[1] / "eerie_c").is_dir():   # run from a source checkout: use its eerie_c
    sys.path.insert(0, str(HERE.parents[1]))
from eerie_c.cli import main as main_cli  # noqa: E402


class SmallCNN(nn.Module):
    """conv-relu, depthwise-separable block, global average pool, linear: a 10-class classifier."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU())
        self.dw = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.ReLU())
        self.pw = nn.Sequential(nn.Conv2d(16, 32, 1), nn.ReLU())
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        return self.fc(self.pw(self.dw(self.stem(x))).mean(dim=(2, 3)))


def save_int8_program(path: Path) -> Path:
    """Export, prepare_pt2e, calibrate on 16 random inputs, convert_pt2e, torch.export.save."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from torchao.testing.pt2e._xnnpack_quantizer import (XNNPACKQuantizer,
                                                          get_symmetric_quantization_config)
    torch.manual_seed(0)
    model, x = SmallCNN().eval(), torch.randn(1, 3, 16, 16)
    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    prepared = prepare_pt2e(torch.export.export(model, (x,)).module(check_guards=False), quantizer)
    for _ in range(16):
        prepared(torch.randn(x.shape))
    converted = convert_pt2e(prepared)
    torch.export.save(torch.export.export(converted, (x,)), str(path))
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="build/validate_pt2e")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pt2 = save_int8_program(out / "small_cnn_int8.pt2")
    print(f"saved the PT2E int8 program: {pt2}")
    cmd = ["validate", str(pt2), "--count", "50", "-o", str(out / "validate")]
    print("$ eerie-c " + " ".join(cmd), flush=True)
    return main_cli(cmd)   # the command line, in this process: torch is imported once

if __name__ == "__main__":
    sys.exit(main())
