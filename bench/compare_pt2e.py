#!/usr/bin/env python3
"""No penalty for coming from PyTorch: the MLPerf Tiny KWS DS-CNN written in `torch.nn`,
quantized with PT2E, against the TFLite `kws_ref_model` of the same architecture, both
compiled by eerie-c for the same board and run in QEMU (-icount shift=0).

The PyTorch network is the kws_ref_model's: conv 10x4 stride 2 (TFLite's SAME padding,
written as a ZeroPad2d), batch norm, relu; four depthwise-separable blocks of 64 channels
(depthwise 3x3 + BN + relu, pointwise 1x1 + BN + relu); average pool 25x5; linear 12;
softmax. Its weights are random (this measures the code, not the accuracy); it is calibrated
on random inputs and quantized with each quantizer:

* torchao's XNNPACK-style symmetric quantizer (per-channel weights);
* ExecuTorch's CortexMQuantizer (channels-last module and input, as it requires).

Prints one row per program: instructions per inference, flash (whole firmware ELF: text +
data), RAM (data + bss + measured stack), arena, and the ratio to the TFLite model; and the
outputs' agreement with the program's own eager run (within one output quantization step, or
1e-5 where the output is computed in float: XNNPACK's quantizer leaves the softmax in float;
fraction exactly equal) and the float islands.

    python bench/compare_pt2e.py                       # mps2-an386
    python bench/compare_pt2e.py --board mps3-an547

Measurement only: nothing here asserts a speed.
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from eerie_c import api  # noqa: E402

KWS = REPO / "models" / "mlperf_tiny" / "kws_ref_model.tflite"


def kws_dscnn():
    import torch.nn as nn

    class KwsDSCNN(nn.Module):
        def __init__(self, c: int = 64):
            super().__init__()
            self.pad = nn.ZeroPad2d((1, 1, 4, 5))     # TFLite SAME for 49x10, kernel 10x4, stride 2
            self.conv = nn.Conv2d(1, c, (10, 4), stride=2)
            self.bn = nn.BatchNorm2d(c)
            blocks = []
            for _ in range(4):
                blocks += [nn.Conv2d(c, c, 3, padding=1, groups=c), nn.BatchNorm2d(c), nn.ReLU(),
                           nn.Conv2d(c, c, 1), nn.BatchNorm2d(c), nn.ReLU()]
            self.blocks = nn.Sequential(*blocks)
            self.pool = nn.AvgPool2d((25, 5))
            self.fc = nn.Linear(c, 12)

        def forward(self, x):
            x = self.bn(self.conv(self.pad(x))).relu()
            x = self.pool(self.blocks(x)).flatten(1)
            return self.fc(x).softmax(-1)

    return KwsDSCNN()


def quantized(quantizer: str, seed: int = 0):
    """(converted PT2E module, example input) for 'xnnpack' or 'cortex_m'."""
    import torch
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    torch.manual_seed(seed)
    m = kws_dscnn().eval()
    for mod in m.modules():   # batch norms that are not the identity
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.1, 0.1)
            mod.running_var.uniform_(0.5, 1.5)
    x = torch.randn(1, 1, 49, 10)
    if quantizer == "xnnpack":
        from torchao.testing.pt2e._xnnpack_quantizer import (XNNPACKQuantizer,
                                                              get_symmetric_quantization_config)
        q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    else:
        from executorch.backends.cortex_m.quantizer.quantizer import CortexMQuantizer
        q = CortexMQuantizer()
        m = m.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)
    pm = prepare_pt2e(torch.export.export(m, (x,)).module(check_guards=False), q)
    for _ in range(16):
        pm(torch.randn_like(x))
    return convert_pt2e(pm), x


def _row(label: str, rep: dict) -> dict:
    sizes = rep["elf_sizes"]
    return {"program": label, "instructions": rep["instructions"], "macs": rep["macs"],
            "flash": sizes["text"] + sizes["data"],
            "ram": sizes["data"] + sizes["bss"] + rep["stack_high_water_bytes"],
            "arena": rep["arena_bytes"]}


def measure(board: str, n: int = 4) -> list[dict]:
    import torch
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, size=(n, 1, 49, 10, 1), dtype=np.int8)
    _, rep = api.run_model(KWS, [x], board=board)
    rows = [_row("kws_ref_model.tflite (int8)", rep)]
    for qname in ("xnnpack", "cortex_m"):
        cm, ex = quantized(qname)
        xs = torch.randn(n, *ex.shape)
        from eerie_c.python_api import run
        outs, rep = run(cm, [xs.numpy()], example_args=(ex,), board=board)
        ref = np.stack([cm(xs[k]).detach().numpy() for k in range(n)])
        got = outs[0].reshape(ref.shape)
        q = rep["quantization"]
        step = q["output_steps"][0]   # 0: the output is computed in float (a softmax island)
        row = _row(f"DS-CNN torch.nn, PT2E {qname}", rep)
        row["islands"] = [" ".join(i["kinds"]) for i in q["float_islands"]]
        tol = step * 1.001 if step else 1e-5
        row["within_step"] = bool(np.all(np.abs(got - ref) <= tol))
        row["exact"] = float(np.mean(got == ref))
        row["argmax"] = bool(np.array_equal(got.argmax(-1), ref.argmax(-1)))
        rows.append(row)
    return rows


def table(rows: list[dict], board: str) -> str:
    base = rows[0]
    out = [f"PT2E DS-CNN vs kws_ref_model on {board} (QEMU -icount shift=0; flash = ELF text + data; "
           f"RAM = data + bss + measured stack)", "",
           "| program | instructions | vs TFLite | flash B | vs TFLite | arena B | vs TFLite | RAM B | "
           "agreement with eager |", "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        agree = "-" if "exact" not in r else (
            f"{'within 1 step' if r['within_step'] else 'OFF BY MORE'}, {r['exact']:.0%} exact, "
            f"argmax {'same' if r['argmax'] else 'DIFFERS'}"
            + (f"; float island: {', '.join(r['islands'])}" if r["islands"] else "; all int8"))
        out.append(f"| {r['program']} | {r['instructions']:,} | {r['instructions'] / base['instructions']:.2f}x | "
                   f"{r['flash']:,} | {r['flash'] / base['flash']:.2f}x | {r['arena']:,} | "
                   f"{r['arena'] / base['arena']:.2f}x | {r['ram']:,} | {agree} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--board", default="mps2-an386")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    print(table(measure(args.board), args.board))
    return 0


if __name__ == "__main__":
    sys.exit(main())
