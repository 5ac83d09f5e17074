#!/usr/bin/env python3
"""A PyTorch CNN quantized to int8 with PT2E, on an emulated Cortex-M4 board.

The flow a PyTorch user follows to deploy int8:

1. `torch.export.export` the float module;
2. `prepare_pt2e` with a quantizer (torchao's XNNPACK-style symmetric config: int8
   activations, per-channel int8 weights), calibrate on a few inputs, `convert_pt2e`;
3. hand the converted module to eerie-c, which folds every quantize/dequantize pair into
   int8 tensors and runs the convolutions, pooling and the classifier on the same int8
   kernels as a TFLite model (SMLAD on the M4), with float islands (none here) reported.

The script compiles for the board, runs a batch of inputs in QEMU (one boot), and prints the
agreement with the converted program's own eager outputs (the accuracy contract: within one
output quantization step on every element, same argmax), the fraction exactly equal, and the
memory and instruction figures from the report. The firmware project, report.md and the
memory picture are written to --out.

    python examples/torch_int8/run.py [--board mps2-an386] [--out build/torch_int8]

Needs eerie-c with torch and torchao (.ci/setup installs them), plus arm-none-eabi-gcc with
newlib, make and qemu-system-arm.
"""
from __future__ import annotations

import argparse
import logging
import sys
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

HERE = Path(__file__).resolve().parent
try:
    import eerie_c
except ImportError:      # run from a source checkout without `pip install .`
    sys.path.insert(0, str(HERE.parents[1]))
    import eerie_c


class SmallCNN(nn.Module):
    """conv-bn-relu, depthwise-separable block, max pool, global average pool, linear."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.dw = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.BatchNorm2d(16), nn.ReLU())
        self.pw = nn.Sequential(nn.Conv2d(16, 32, 1), nn.BatchNorm2d(32), nn.ReLU())
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = self.pool(self.pw(self.dw(self.stem(x))))
        return self.fc(x.mean(dim=(2, 3)))


def quantize(model: nn.Module, example: torch.Tensor, calibration: list[torch.Tensor]):
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from torchao.testing.pt2e._xnnpack_quantizer import (XNNPACKQuantizer,
                                                          get_symmetric_quantization_config)
    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    exported = torch.export.export(model.eval(), (example,))
    prepared = prepare_pt2e(exported.module(check_guards=False), quantizer)
    for x in calibration:
        prepared(x)
    return convert_pt2e(prepared)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--board", default="mps2-an386")
    ap.add_argument("--out", default="build/torch_int8")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)

    torch.manual_seed(0)
    model = SmallCNN().eval()
    for m in model.modules():          # batch norms as after training, not the identity
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
    example = torch.randn(1, 3, 32, 32)
    quantized = quantize(model, example, [torch.randn(1, 3, 32, 32) for _ in range(32)])

    xs = np.random.default_rng(1).standard_normal((8, 1, 3, 32, 32)).astype(np.float32)
    outs, report = eerie_c.run(quantized, [xs], example_args=(example,), board=args.board,
                               out_dir=args.out)
    with torch.no_grad():
        ref = np.stack([quantized(torch.tensor(x)).numpy() for x in xs])
    got = outs[0].reshape(ref.shape)
    step = report["quantization"]["output_steps"][0]   # the scale of the output's final DEQUANTIZE
    worst = float(np.abs(got - ref).max())
    exact = float(np.mean(got == ref))
    same_argmax = bool(np.array_equal(got.argmax(-1), ref.argmax(-1)))
    q = report["quantization"]
    print(f"{args.board}: {len(xs)} inferences in QEMU")
    print(f"  int8 ops {q['int8_ops']}, float ops {q['float_ops']}, float islands {len(q['float_islands'])}")
    print(f"  vs eager PT2E: max |diff| {worst:.6g} = {worst / step:.2f} output steps "
          f"(step {step:.6g}), {exact:.1%} exactly equal, argmax {'same' if same_argmax else 'DIFFERS'}")
    print(f"  instructions per inference: {report['instructions']:,}")
    print(f"  arena {report['arena_bytes']:,} B, RAM {report['ram_bytes']:,} B "
          f"(stack high-water {report['stack_high_water_bytes']:,} B), flash {report['flash_bytes']:,} B")
    print(f"  report: {Path(args.out) / 'report.md'}")
    ok = worst / step <= 1.001 and same_argmax   # float32 outputs: exact to ~1e-5 steps
    print("accuracy contract: " + ("met" if ok else "NOT MET"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
