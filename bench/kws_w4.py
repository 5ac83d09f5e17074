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

from tflite_builder import ACT, PAD, ModelBuilder   # noqa: E402

KWS = ROOT / "models" / "mlperf_tiny" / "kws_ref_model.tflite"
OPTIONS = {"CONV_2D": "Conv2DOptions", "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions",
           "FULLY_CONNECTED": "FullyConnectedOptions", "AVERAGE_POOL_2D": "Pool2DOptions",
           "RESHAPE": "ReshapeOptions", "SOFTMAX": "SoftmaxOptions"}


def _float(t) -> np.ndarray:
    q = t.quant
    axis = q.axis if q.per_channel else 0
    shape = [1] * t.data.ndim
    if q.per_channel:
        shape[axis] = -1
    s = np.asarray(q.scale, np.float64).reshape(shape)
    return ((t.data.astype(np.float64) - np.asarray(q.zero_point).reshape(shape)) * s).astype(np.float32)


def float_dscnn(int8_model: Path = KWS) -> bytes:
    """The int8 DS-CNN as a float model (weights and biases dequantized), with a signature."""
    from eerie_c.frontend.tflite import load_tflite
    g = load_tflite(int8_model.read_bytes(), "kws")
    mb = ModelBuilder()
    mb.signature = "serving_default"
    ids = {}
    x = g.t(g.inputs[0])
    ids[x.id] = mb.input(list(x.shape), "float32", name="input")
    for op in g.ops:
        ins = []
        for tid in op.inputs:
            t = g.t(tid)
            if t.is_const:
                if op.kind == "RESHAPE":
                    ins.append(mb.const(t.data, t.dtype, name=t.label))
                else:
                    ins.append(mb.const(_float(t), "float32", name=t.label))
            else:
                ins.append(ids[tid])
        y = g.t(op.outputs[0])
        ids[y.id] = mb.tensor(list(y.shape), "float32", name=y.label)
        a = op.attrs
        act = ACT.get(a.get("fused_activation_function", "NONE"), 0)
        fields = {"CONV_2D": dict(padding=PAD[a.get("padding", "SAME")], strideH=a.get("stride_h", 1),
                                  strideW=a.get("stride_w", 1), fusedActivationFunction=act),
                  "DEPTHWISE_CONV_2D": dict(padding=PAD[a.get("padding", "SAME")],
                                            strideH=a.get("stride_h", 1), strideW=a.get("stride_w", 1),
                                            depthMultiplier=a.get("depth_multiplier", 1),
                                            fusedActivationFunction=act),
                  "AVERAGE_POOL_2D": dict(padding=PAD[a.get("padding", "VALID")],
                                          strideH=a.get("stride_h", 1), strideW=a.get("stride_w", 1),
                                          filterHeight=a.get("filter_height", 1),
                                          filterWidth=a.get("filter_width", 1),
                                          fusedActivationFunction=act),
                  "FULLY_CONNECTED": dict(fusedActivationFunction=act),
                  "RESHAPE": dict(newShape=list(y.shape)),
                  "SOFTMAX": dict(beta=float(a.get("beta", 1.0)))}[op.kind]
        mb.op(op.kind, ins, [ids[y.id]], OPTIONS[op.kind], **fields)
    mb.output(ids[g.t(g.outputs[0]).id])
    return mb.build()


def calibration_inputs(n: int = 32, seed: int = 0) -> list[np.ndarray]:
    """Inputs in the int8 model's input range (its quantization dequantized)."""
    from eerie_c.frontend.tflite import load_tflite
    g = load_tflite(KWS.read_bytes(), "kws")
    x = g.t(g.inputs[0])
    rng = np.random.default_rng(seed)
    q = rng.integers(-128, 128, size=(n, *x.shape))
    return [((v - x.zero_point) * x.scale).astype(np.float32) for v in q]


def quantize(float_model: bytes, weight_bits: int, work: Path) -> bytes:
    """Static quantization by the AI Edge Quantizer: int8 activations, channel-wise weights of
    weight_bits bits."""
    from ai_edge_quantizer import qtyping, quantizer
    src = work / "float.tflite"
    src.write_bytes(float_model)
    qt = quantizer.Quantizer(str(src))
    ops = qtyping.TFLOperationName
    qt.add_static_config(regex=".*", operation_name=ops.ALL_SUPPORTED, activation_num_bits=8,
                         weight_num_bits=8)
    if weight_bits != 8:
        # the quantizer's policy keeps DEPTHWISE_CONV_2D out of 4-bit static quantization
        # (asked for everything it leaves the depthwise layers float, between DEQUANTIZE and
        # QUANTIZE): 4 bits for the convolutions and the classifier, 8 for the depthwise ones
        for op in (ops.CONV_2D, ops.FULLY_CONNECTED):
            qt.add_static_config(regex=".*", operation_name=op, activation_num_bits=8,
                                 weight_num_bits=weight_bits)
    calib = qt.calibrate({"serving_default": [{"input": x} for x in calibration_inputs()]})
    return bytes(qt.quantize(calib, enable_progress_report=False).quantized_model)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--board", default="mps2-an386")
    ap.add_argument("--keep", type=Path, help="write the float, w8a8 and w4a8 models here")
    args = ap.parse_args(argv)
    from eerie_c.api import run_model
    from int4_models import litert_run   # noqa: E402  (tests/ops)
    work = args.keep or Path(tempfile.mkdtemp())
    work.mkdir(parents=True, exist_ok=True)
    fm = float_dscnn()
    rows = {}
    for bits in (8, 4):
        model = quantize(fm, bits, work)
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
