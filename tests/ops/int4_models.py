"""Models with 4-bit (TFLite INT4) weights for the int4 tests: FULLY_CONNECTED, CONV_2D and
DEPTHWISE_CONV_2D with random shapes, scales and activations, per-channel or per-tensor, int8
activations; MLPerf Tiny's DS-CNN keyword spotter as a float model, quantized by Google's AI
Edge Quantizer (w4a8 or w8a8; also bench/kws_w4.py); and LiteRT's reference kernels, the
oracle (TFLM refuses int4 fully connected)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType

from tflite_builder import ACT, PAD, ModelBuilder


def litert_run(model: bytes, xs: np.ndarray) -> np.ndarray:
    """One inference per leading index of xs on LiteRT's reference kernels (BUILTIN_REF)."""
    it = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    inp, out = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    outs = []
    for x in xs:
        it.set_tensor(inp, x)
        it.invoke()
        outs.append(it.get_tensor(out).copy())
    return np.stack(outs)


def _weights(rng, shape, channels, per_channel, axis, mb, bits4=True, small=False):
    """bits4: an INT4 tensor; else int8, with small: values in [-8, 7] (lossless packing)."""
    lo, hi = (-8, 8) if bits4 or small else (-128, 128)
    w = rng.integers(lo, hi, size=shape)
    n = channels if per_channel else 1
    scale = rng.uniform(0.01, 0.1, n) * (16 if bits4 else 1)
    wt = mb.const(w, "int4" if bits4 else "int8", scale=scale, zero_point=[0] * n, axis=axis)
    return wt, scale


def _bias(rng, mb, channels, in_scale, w_scale):
    s = in_scale * np.asarray(w_scale)   # per tensor with per-tensor weights (LiteRT checks)
    return mb.const(rng.integers(-3000, 3000, channels), "int32", scale=s, zero_point=[0] * len(s))


def add_layer(mb, rng, kind, x, x_shape, x_scale, per_channel=True, bits4=True, small=False):
    """One random layer of `kind` after x: (output id, shape, scale)."""
    act = str(rng.choice(["NONE", "RELU", "RELU6"]))
    y_scale, y_zp = float(rng.uniform(0.05, 0.3)), int(rng.integers(-20, 20))
    if kind == "FULLY_CONNECTED":
        depth = int(np.prod(x_shape[1:]))
        units = int(rng.integers(1, 20))
        w, ws = _weights(rng, (units, depth), units, per_channel, 0, mb, bits4, small)
        b = _bias(rng, mb, units, x_scale, ws)
        shape = [x_shape[0], units]
        y = mb.tensor(shape, "int8", scale=y_scale, zero_point=y_zp)
        mb.op(kind, [x, w, b], [y], "FullyConnectedOptions", fusedActivationFunction=ACT[act])
        return y, shape, y_scale
    n, h, wd, c = x_shape
    kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    sh, sw = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    pad = str(rng.choice(["SAME", "VALID"]))
    if kh > h or kw > wd:   # (a chain's small input: VALID would leave nothing)
        pad = "SAME"
    if kind == "CONV_2D":
        oc = int(rng.integers(1, 12))
        w, ws = _weights(rng, (oc, kh, kw, c), oc, per_channel, 0, mb, bits4, small)
        opts = ("Conv2DOptions", {})
    else:
        mult = int(rng.choice([1, 1, 2]))
        oc = c * mult
        w, ws = _weights(rng, (1, kh, kw, oc), oc, per_channel, 3, mb, bits4, small)
        opts = ("DepthwiseConv2DOptions", {"depthMultiplier": mult})
    b = _bias(rng, mb, oc, x_scale, ws)
    if pad == "SAME":
        oh, ow = -(-h // sh), -(-wd // sw)
    else:
        oh, ow = (h - kh) // sh + 1, (wd - kw) // sw + 1
    shape = [n, oh, ow, oc]
    y = mb.tensor(shape, "int8", scale=y_scale, zero_point=y_zp)
    mb.op(kind, [x, w, b], [y], opts[0], padding=PAD[pad], strideH=sh, strideW=sw,
          fusedActivationFunction=ACT[act], **opts[1])
    return y, shape, y_scale


def layer_model(kinds, seed, per_channel=True, bits4=True, small=False):
    """(model bytes, input shape): the layers `kinds` in a chain on a random input."""
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    shape = [1, int(rng.integers(3, 9)), int(rng.integers(3, 9)), int(rng.integers(1, 9))]
    if kinds[0] == "FULLY_CONNECTED":
        shape = [int(rng.integers(1, 3)), int(rng.integers(1, 40))]
    scale = 0.05
    x = mb.input(shape, "int8", scale=scale, zero_point=int(rng.integers(-10, 10)))
    in_shape = list(shape)
    for kind in kinds:
        x, shape, scale = add_layer(mb, rng, kind, x, shape, scale, per_channel, bits4, small)
    mb.output(x)
    return mb.build(), in_shape


KWS = Path(__file__).resolve().parents[2] / "models" / "mlperf_tiny" / "kws_ref_model.tflite"
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


def aeq_quantize(float_model: bytes, weight_bits: int, work: Path) -> bytes:
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
