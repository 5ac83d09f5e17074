"""4-bit weights against 8-bit on a DS-CNN keyword spotter (issue 29's targets), both quantized
by Google's AI Edge Quantizer (static, channel-wise weights, int8 activations) from one float
model: MLPerf Tiny's kws_ref_model with its int8 weights and biases dequantized (the float
network that quantization came from, up to rounding). Compiles both for a board (default
mps2-an386), runs them in QEMU, checks every output bit-exact with LiteRT's reference kernels
(BUILTIN_REF) and prints constants, model flash and instructions with the ratios.

    python3 bench/kws_w4.py [--board mps2-an386] [--keep DIR]

Needs ai-edge-quantizer (pip), the cross toolchain and QEMU.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "ops")]

from int4_models import aeq_quantize, float_dscnn, litert_run   # noqa: E402  (tests/ops)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--board", default="mps2-an386")
    ap.add_argument("--keep", type=Path, help="write the float, w8a8 and w4a8 models here")
    args = ap.parse_args(argv)
    from eerie_c.api import run_model
    work = args.keep or Path(tempfile.mkdtemp())
    work.mkdir(parents=True, exist_ok=True)
    fm = float_dscnn()
    rows = {}
    for bits in (8, 4):
        model = aeq_quantize(fm, bits, work)
        path = work / f"kws_w{bits}a8.tflite"
        path.write_bytes(model)
        from ai_edge_litert.interpreter import Interpreter
        det = Interpreter(model_content=model).get_input_details()[0]
        xs = np.random.default_rng(1).integers(-128, 128, size=(4, *det["shape"])).astype(det["dtype"])
        ref = litert_run(model, xs)
        got, rep = run_model(path, [xs], board=args.board)
        exact = np.array_equal(got[0], ref)
        rows[bits] = dict(constants=rep["constant_bytes"], flash=rep["model_flash_bytes"],
                          instructions=rep["instructions"] // len(xs) if "instructions" in rep else None,
                          exact=exact)
    print(f"DS-CNN kws, AI Edge Quantizer static w{{8,4}}a8 channel-wise, {args.board}")
    print(f"{'':14}{'w8a8':>12}{'w4a8':>12}{'ratio':>8}{'target':>8}")
    for key, target in (("constants", 0.7), ("flash", 0.8), ("instructions", 1.15)):
        a, b = rows[8][key], rows[4][key]
        print(f"{key:14}{a:>12,}{b:>12,}{b / a:>8.3f}{'<= ' + str(target):>8}")
    print(f"bit-exact with LiteRT BUILTIN_REF: w8a8 {rows[8]['exact']}, w4a8 {rows[4]['exact']}")


if __name__ == "__main__":
    main()
