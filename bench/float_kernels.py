#!/usr/bin/env python3
"""Float32 kernels on the FPU cores: per layer of a float DS-CNN from PyTorch (the MLPerf Tiny
KWS architecture at full width, 64 channels, 4 blocks, random weights and normalisation
statistics) and of the shared float TFLite models, the instructions each CONV_2D,
DEPTHWISE_CONV_2D and FULLY_CONNECTED layer runs (QEMU -icount shift=0) per MAC, summed per
kind, on mps2-an386 (Cortex-M4F, FPv4-SP) and mps2-an500 (Cortex-M7, FPv5-D16).

Per-layer counts come from bench/profile_layers.py (a SysTick record after every layer, which
adds a few dozen instructions per layer).

    python bench/float_kernels.py [--boards mps2-an386 mps2-an500] [--models ds_cnn ad01_fp32]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import profile_layers  # noqa: E402
from eerie_c.toolchain.boards import get_board  # noqa: E402

KINDS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")
MODELS = ("ds_cnn", "ad01_fp32", "pretrainedResnet")


def ds_cnn_pt2(tmp: Path) -> Path:
    """The float DS-CNN of tests/torch/zoo.py at the KWS reference width, exported to .pt2."""
    import torch
    sys.path.insert(0, str(REPO / "tests" / "torch"))
    import zoo
    torch.manual_seed(0)
    m = zoo.DSCNN(c=64, blocks=4)
    zoo._randomize_norms(m, 0)
    m.eval()
    path = tmp / "ds_cnn_f32.pt2"
    torch.export.save(torch.export.export(m, (torch.randn(1, 1, 49, 10),)), path)
    return path


def model_path(name: str, tmp: Path) -> Path:
    if name == "ds_cnn":
        return ds_cnn_pt2(tmp)
    return REPO / "models" / "mlperf_tiny" / f"{name}.tflite"


def per_kind(ops, layers) -> dict[str, tuple[int, int]]:
    """kind -> (instructions, MACs) summed over that kind's layers."""
    out: dict[str, list[int]] = {}
    for op, n in zip(ops, layers):
        if op["kind"] in KINDS and op["macs"]:
            acc = out.setdefault(op["kind"], [0, 0])
            acc[0] += n
            acc[1] += op["macs"]
    return {k: (v[0], v[1]) for k, v in out.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--boards", nargs="+", default=["mps2-an386", "mps2-an500"])
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--layers", action="store_true", help="also print every layer")
    args = ap.parse_args(argv)
    print("| model | board | kind | layers MACs | instructions | instr/MAC |")
    print("|---|---|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="eerie-float-") as tmp:
        for name in args.models:
            path = model_path(name, Path(tmp))
            for bname in args.boards:
                ops, layers, loops = profile_layers.measure(path, get_board(bname))
                kinds = per_kind(ops, layers)
                for kind in KINDS:
                    if kind in kinds:
                        n, macs = kinds[kind]
                        print(f"| {name} | {bname} | {kind} | {macs:,} | {n:,} | {n / macs:.2f} |")
                total, macs = sum(layers), sum(op["macs"] for op in ops)
                print(f"| {name} | {bname} | whole model | {macs:,} | {total:,} | {total / max(macs, 1):.2f} |")
                if args.layers:
                    for r in profile_layers.rows(ops, layers, loops):
                        print("    " + "  ".join(r), file=sys.stderr)
                sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
