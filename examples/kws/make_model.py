#!/usr/bin/env python3
"""Build examples/kws/kws_dscnn.tflite: a small keyword-spotting DS-CNN, int8.

The architecture of the MLPerf Tiny keyword-spotting network, narrower (24 channels instead
of 64, two depthwise-separable blocks instead of four), so the committed file stays small:

    49x10x1 "MFCC" frames
    -> CONV_2D 10x4, stride 2, SAME, RELU                         -> 25x5x24
    -> 2 x (DEPTHWISE_CONV_2D 3x3, SAME, RELU -> CONV_2D 1x1, RELU) -> 25x5x24
    -> AVERAGE_POOL_2D 25x5 -> RESHAPE -> FULLY_CONNECTED 24 -> 12 -> SOFTMAX

This is a demonstration of the compiler, not a trained network. The convolutions have random
weights (fixed seed); only the last layer is fitted, by softmax regression in numpy, to tell
apart 12 synthetic "keywords": fixed MFCC-like patterns plus noise (synthetic_mfcc, which
run.py also uses). So the top keyword is meaningful for those synthetic patterns, not for
speech. The float network is run on such inputs to calibrate every activation range, then
quantized the way the TFLite post-training quantizer does: per-channel symmetric int8
weights, int32 biases with scale input_scale * weight_scale, per-tensor asymmetric int8
activations (RELU outputs have zero point -128; pooling and reshape keep their input's),
SOFTMAX output scale 1/256 and zero point -128 as TFLM requires. The result is deterministic
and committed; run this only to regenerate it.

The flatbuffer is written with the test suite's model builder, tests/tflite_builder.py
(imported by path; it uses the TFLite schema's object API from the `ai-edge-litert` package
plus `flatbuffers`).

    python3 examples/kws/make_model.py [OUT.tflite]
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
KEYWORDS = ["yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go", "silence", "unknown"]
FRAMES, COEFFS = 49, 10          # 49 frames of 10 MFCC coefficients (1 s of audio, 20 ms hop)
CH = 24                          # channels of every layer (MLPerf's DS-CNN uses 64)
BLOCKS = 2                       # depthwise-separable blocks (MLPerf's has 4)
OH, OW = 25, 5                   # after the 10x4 stride-2 SAME convolution


def _builder():
    spec = importlib.util.spec_from_file_location("tflite_builder", ROOT / "tests" / "tflite_builder.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# Each synthetic "keyword" is a fixed MFCC-like pattern: two syllables, each a Gaussian
# envelope in time with its own spectral shape (c0, the energy, largest; higher coefficients
# smaller). "silence" is the noise floor alone.
_T = np.random.default_rng(99)
_SPECTRA = _T.normal(0, 1, (len(KEYWORDS), 2, COEFFS)) * 30 / (1 + np.arange(COEFFS))
_CENTRES = _T.uniform(12, 37, (len(KEYWORDS), 2))
_WIDTHS = _T.uniform(3, 8, (len(KEYWORDS), 2))
_GAIN = np.array([0.0 if k == "silence" else 1.0 for k in KEYWORDS])


def synthetic_mfcc(rng: np.random.Generator, labels) -> np.ndarray:
    """Float MFCC-like features [n, 1, 49, 10, 1] for keyword indices `labels`: the keyword's
    pattern shifted by up to 3 frames, scaled by 0.8..1.2, plus noise. run.py uses these."""
    labels = np.asarray(labels)
    n, t = len(labels), np.arange(FRAMES)[None, :, None]
    shift = rng.uniform(-3, 3, (n, 1, 1))
    amp = rng.uniform(0.8, 1.2, (n, 1, 1)) * _GAIN[labels][:, None, None]
    x = rng.normal(0, 2.0, (n, FRAMES, COEFFS))
    for s in range(2):
        env = np.exp(-0.5 * ((t - _CENTRES[labels, s][:, None, None] - shift)
                             / _WIDTHS[labels, s][:, None, None]) ** 2)
        x += amp * env * _SPECTRA[labels, s][:, None, :]
        x[:, :, 0] += 40 * amp[:, :, 0] * env[:, :, 0]
    x[:, :, 0] -= 20
    return x[:, None, :, :, None].astype(np.float32)


# ---- float reference layers (NHWC), used only to calibrate activation ranges

def _pad_same(x, kh, kw, sh, sw):
    h, w = x.shape[1:3]
    oh, ow = -(-h // sh), -(-w // sw)
    ph, pw = max((oh - 1) * sh + kh - h, 0), max((ow - 1) * sw + kw - w, 0)
    return np.pad(x, ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0))), oh, ow


def conv2d(x, w, b, stride):
    """w: [out, kh, kw, in] (TFLite's layout), SAME padding."""
    _, kh, kw, _ = w.shape
    xp, oh, ow = _pad_same(x, kh, kw, stride, stride)
    y = np.zeros((x.shape[0], oh, ow, w.shape[0]), np.float64)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, i:i + (oh - 1) * stride + 1:stride, j:j + (ow - 1) * stride + 1:stride, :]
            y += np.einsum("nhwc,oc->nhwo", patch, w[:, i, j, :])
    return y + b


def depthwise3x3(x, w, b):
    """w: [1, 3, 3, C] (TFLite's layout), stride 1, SAME padding."""
    xp, oh, ow = _pad_same(x, 3, 3, 1, 1)
    y = np.zeros(x.shape, np.float64)
    for i in range(3):
        for j in range(3):
            y += xp[:, i:i + oh, j:j + ow, :] * w[0, i, j, :]
    return y + b


def relu(x):
    return np.maximum(x, 0)


# ---- quantization

def _per_channel(w, axis):
    """Symmetric int8 per output channel (axis), as the TFLite converter quantizes weights."""
    red = tuple(d for d in range(w.ndim) if d != axis)
    scale = np.maximum(np.abs(w).max(axis=red), 1e-8) / 127
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(np.round(w / scale.reshape(shape)), -127, 127).astype(np.int8)
    return q, scale.astype(np.float32)


def _stable(v: float) -> float:
    """A calibrated value rounded to 6 significant digits: the float64 sums behind it differ
    in their last bits between numpy / BLAS builds; rounded, the model is the same everywhere."""
    return float(f"{float(v):.6g}")


def _activation(lo, hi):
    """Asymmetric int8 (scale, zero point) covering [lo, hi], which always includes 0."""
    lo, hi = min(_stable(lo), 0.0), max(_stable(hi), 0.0)
    scale = (hi - lo) / 255
    zp = int(np.clip(round(-128 - lo / scale), -128, 127))
    return float(np.float32(scale)), zp


def _features(x, conv_w, conv_b, blocks, ranges=None):
    """The float network up to the average pool; records activation ranges if asked."""
    h = relu(conv2d(x, conv_w, conv_b, 2))
    if ranges is not None:
        ranges["input"], ranges["conv"] = (x.min(), x.max()), (0.0, h.max())
    for k, (dw, db, pw, pb) in enumerate(blocks):
        h = relu(depthwise3x3(h, dw, db))
        if ranges is not None:
            ranges[f"dw{k}"] = (0.0, h.max())
        h = relu(conv2d(h, pw, pb, 1))
        if ranges is not None:
            ranges[f"pw{k}"] = (0.0, h.max())
    return h.mean(axis=(1, 2))


def _fit_classifier(feats, labels, steps=2000, lr=0.5):
    """Softmax regression on the pooled features (standardised, then folded back into the
    weights): the only "training" here, so the last layer tells the synthetic keywords apart."""
    mu, sd = feats.mean(0), feats.std(0) + 1e-6
    f = (feats - mu) / sd
    y = np.eye(len(KEYWORDS))[labels]
    w, b = np.zeros((len(KEYWORDS), feats.shape[1])), np.zeros(len(KEYWORDS))
    for _ in range(steps):
        z = f @ w.T + b
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        g = (p - y) / len(labels)
        w -= lr * (g.T @ f + 1e-3 * w)
        b -= lr * g.sum(0)
    return w / sd, b - (w / sd) @ mu


def build() -> bytes:
    tb = _builder()
    rng = np.random.default_rng(1234)

    # Random feature extractor; He-style scales keep activations sensible through the ReLUs.
    conv_w = rng.normal(0, np.sqrt(2 / 40), (CH, 10, 4, 1))
    conv_b = rng.normal(0, 0.5, CH)
    blocks = [(rng.normal(0, np.sqrt(2 / 9), (1, 3, 3, CH)), rng.normal(0, 0.1, CH),
               rng.normal(0, np.sqrt(2 / CH), (CH, 1, 1, CH)), rng.normal(0, 0.1, CH))
              for _ in range(BLOCKS)]

    # Calibrate every activation range on the float network and fit the last layer.
    labels = rng.integers(0, len(KEYWORDS), 1024)
    x = synthetic_mfcc(rng, labels)[:, 0].astype(np.float64)
    ranges: dict = {}
    feats = _features(x, conv_w, conv_b, blocks, ranges)
    fc_w, fc_b = _fit_classifier(feats, labels)
    logits = feats @ fc_w.T + fc_b
    ranges["fc"] = (logits.min(), logits.max())
    q = {k: _activation(*v) for k, v in ranges.items()}

    mb = tb.ModelBuilder()

    def act_tensor(key, shape, name):
        s, z = q[key]
        return mb.tensor(shape, "int8", scale=s, zero_point=z, name=name)

    def weights(w, axis, name):
        wq, ws = _per_channel(w, axis)
        return mb.const(wq, "int8", scale=ws, zero_point=[0] * len(ws), axis=axis, name=name), ws

    def bias(b, in_scale, w_scale, name):
        bs = in_scale * w_scale.astype(np.float64)
        bq = np.round(b / bs).astype(np.int32)
        return mb.const(bq, "int32", scale=bs, zero_point=[0] * len(bs), name=name)

    relu_ = tb.ACT["RELU"]
    x_t = mb.input([1, FRAMES, COEFFS, 1], "int8", scale=q["input"][0], zero_point=q["input"][1],
                   name="dscnn/input/mfcc")
    w_t, ws = weights(conv_w, 0, "dscnn/conv/weights")
    b_t = bias(conv_b, q["input"][0], ws, "dscnn/conv/bias")
    prev, prev_key = act_tensor("conv", [1, OH, OW, CH], "dscnn/conv/relu"), "conv"
    mb.op("CONV_2D", [x_t, w_t, b_t], [prev], "Conv2DOptions", padding=tb.PAD["SAME"],
          strideW=2, strideH=2, dilationWFactor=1, dilationHFactor=1, fusedActivationFunction=relu_)
    for k, (dw, db, pw, pb) in enumerate(blocks):
        w_t, ws = weights(dw, 3, f"dscnn/block{k}_depthwise/weights")
        b_t = bias(db, q[prev_key][0], ws, f"dscnn/block{k}_depthwise/bias")
        y = act_tensor(f"dw{k}", [1, OH, OW, CH], f"dscnn/block{k}_depthwise/relu")
        mb.op("DEPTHWISE_CONV_2D", [prev, w_t, b_t], [y], "DepthwiseConv2DOptions",
              padding=tb.PAD["SAME"], strideW=1, strideH=1, depthMultiplier=1,
              dilationWFactor=1, dilationHFactor=1, fusedActivationFunction=relu_)
        prev, prev_key = y, f"dw{k}"
        w_t, ws = weights(pw, 0, f"dscnn/block{k}_pointwise/weights")
        b_t = bias(pb, q[prev_key][0], ws, f"dscnn/block{k}_pointwise/bias")
        y = act_tensor(f"pw{k}", [1, OH, OW, CH], f"dscnn/block{k}_pointwise/relu")
        mb.op("CONV_2D", [prev, w_t, b_t], [y], "Conv2DOptions", padding=tb.PAD["VALID"],
              strideW=1, strideH=1, dilationWFactor=1, dilationHFactor=1, fusedActivationFunction=relu_)
        prev, prev_key = y, f"pw{k}"

    # Average pooling and reshape keep their input's quantization (TFLM requires it).
    pool = act_tensor(prev_key, [1, 1, 1, CH], "dscnn/pool/average")
    mb.op("AVERAGE_POOL_2D", [prev], [pool], "Pool2DOptions", padding=tb.PAD["VALID"],
          strideH=1, strideW=1, filterHeight=OH, filterWidth=OW, fusedActivationFunction=tb.ACT["NONE"])
    shape_t = mb.const(np.array([1, CH], np.int32), "int32", name="dscnn/flatten/shape")
    flat = act_tensor(prev_key, [1, CH], "dscnn/flatten/reshape")
    mb.op("RESHAPE", [pool, shape_t], [flat], "ReshapeOptions", newShape=[1, CH])
    w_t, ws = weights(fc_w, 0, "dscnn/fc/weights")
    b_t = bias(fc_b, q[prev_key][0], ws, "dscnn/fc/bias")
    logits_t = act_tensor("fc", [1, len(KEYWORDS)], "dscnn/fc/logits")
    mb.op("FULLY_CONNECTED", [flat, w_t, b_t], [logits_t], "FullyConnectedOptions",
          fusedActivationFunction=tb.ACT["NONE"])
    probs = mb.tensor([1, len(KEYWORDS)], "int8", scale=1 / 256, zero_point=-128, name="dscnn/softmax/probabilities")
    mb.op("SOFTMAX", [logits_t], [probs], "SoftmaxOptions", beta=1.0)
    mb.output(probs)
    data = mb.build()

    # The builder labels its models as test models; say what this one is.
    import flatbuffers
    from ai_edge_litert import schema_py_generated as fb
    m = fb.ModelT.InitFromPackedBuf(data, 0)
    m.description = "eerie-c example: keyword-spotting DS-CNN (random weights), int8"
    b = flatbuffers.Builder(len(data) + 1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def main(out: Path):
    out.write_bytes(build())
    print(f"wrote {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("kws_dscnn.tflite"))
