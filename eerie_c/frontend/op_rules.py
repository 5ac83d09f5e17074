"""The shape / dtype / attribute contract of the TFLite op kinds whose kernels rely on it
(`check_op`), and the quantization only some operand roles may have (`check_quant_by_role`),
so that passes and kernels only ever see a consistent graph. Each failure is one line naming
the op and what is wrong."""
from __future__ import annotations

import numpy as np

from ..errors import EerieError
from ..ir.describe import op_where, tensor_where
from .flatbuffer_check import malformed
from .tensor_checks import _bad_scale, _tiny_scale, channel_problem, channels_fit

FUSED_OK = ("NONE", "RELU", "RELU_N1_TO_1", "RELU6")


# Ops that read their filter (input 1) per output channel, and that channel's dimension.
FILTER_CHANNEL_DIM = {"CONV_2D": 0, "DEPTHWISE_CONV_2D": 3, "FULLY_CONNECTED": 0, "TRANSPOSE_CONV": 0}
# Their bias input: TFLM never reads a bias's quantization (the kernels use input scale x
# filter scale), so nothing in it is checked beyond what keeps the report sane.
BIAS_INPUT = {"CONV_2D": 2, "DEPTHWISE_CONV_2D": 2, "FULLY_CONNECTED": 2, "TRANSPOSE_CONV": 3}


_CUSTOM_HINTS = {"CUSTOM:ethos-u": ": an Arm Ethos-U NPU command stream written by Vela; compile the "
                                   "model as it was before Vela",
                 "CUSTOM:XC_": ": an XMOS xcore op written by xformer; compile the model as it was "
                               "before xformer"}


def custom_unsupported(op, what: str):
    """A custom op eerie-c cannot judge by TFLite's rules (its runtime defines its operands):
    unsupported, with a hint for the accelerator formats people meet."""
    hint = next((h for k, h in _CUSTOM_HINTS.items() if op.kind.startswith(k)), "")
    raise EerieError(f"unsupported operator: {op_where(op)} {what}{hint}")


def _all_ops(ops):
    for op in ops:
        yield op
        for r in op.regions:
            yield from _all_ops(r.ops)


def check_quant_by_role(g) -> None:
    """Quantization that only some tensors may have, checked once every op is known.

    Zero or subnormal scales: a bias's quantization is never read (TFLM ignores it too); a
    filter's zero scale makes its channel's multiplier 0 (TFLM's QuantizeMultiplier(0)), so
    those channels give the output zero point, as in TFLM; on any other tensor it is refused.
    Per-channel scales that fit no dimension of their tensor: a filter's were checked (and
    normalised) by its op's rule (in an IF / WHILE body, by the kernel's count check); any
    other tensor is read per tensor, by TFLM as by eerie-c: the first scale and zero point;
    the rest is unused, and the report says so."""
    ops = list(_all_ops(g.ops))
    filters = {op.inputs[1] for op in ops
               if op.kind in FILTER_CHANNEL_DIM and len(op.inputs) > 1 and op.inputs[1] is not None}
    biases = {op.inputs[k] for op in ops if (k := BIAS_INPUT.get(op.kind)) is not None
              and len(op.inputs) > k and op.inputs[k] is not None}
    for t in g.tensors.values():
        if not _tiny_scale(t):
            continue
        scale = np.asarray(t.quant.scale, np.float64)
        if t.id in biases and t.id not in filters:
            g.notes.append(f"{tensor_where(t)}: bias quantization scale {_bad_scale(scale)!r} "
                           f"unused (TFLM ignores a bias's quantization too)")
        elif t.id in filters:
            k = int(np.sum(scale < np.finfo(np.float32).tiny))
            g.notes.append(f"{tensor_where(t)}: {k} of {scale.size} weight scale(s) zero or "
                           f"subnormal: those output channels are the output zero point "
                           f"(multiplier 0, as TFLM)")
        else:
            raise malformed(f"quantization scale {_bad_scale(scale)!r} is not a positive finite "
                            f"number", tensor_where(t))
    for t in g.tensors.values():
        if t.quant is not None and not channels_fit(t) and t.id not in filters:
            g.notes.append(f"{tensor_where(t)}: {channel_problem(t)}; only its first scale "
                           f"{float(t.quant.scale[0]):.6g} and zero point "
                           f"{int(t.quant.zero_point[0])} are used (TFLM reads no others for "
                           f"this tensor)")


# ---------------------------------------------------------------------------------------------
# Per-op contracts: the checks TFLite's own Prepare() makes for the op kinds we compile, so a
# corrupt model fails here with a clear message instead of deep inside a kernel.

def _fail(op, msg: str):
    raise malformed(msg, op_where(op))


def _arity(op, lo: int, hi: int, outs: int = 1):
    if not lo <= len(op.inputs) <= hi:
        _fail(op, f"{len(op.inputs)} inputs, expected {lo if lo == hi else f'{lo} to {hi}'}")
    for k in range(lo):
        if op.inputs[k] is None:
            _fail(op, f"required input {k} is omitted")
    if len(op.outputs) != outs:
        _fail(op, f"{len(op.outputs)} outputs, expected {outs}")


def _same_dtype(op, g, tids, what="input and output"):
    dts = {g.t(t).dtype for t in tids if t is not None}
    if len(dts) > 1:
        _fail(op, f"{what} dtypes differ ({', '.join(sorted(dts))})")


def _needs_quant(op, g, tids):
    for t in tids:
        if t is not None and g.t(t).dtype in ("int8", "uint8", "int16") and g.t(t).quant is None:
            _fail(op, f"{tensor_where(g.t(t))} is {g.t(t).dtype} without quantization parameters")


def _attrs_common(op):
    act = op.attrs.get("fused_activation_function")
    if act in ("TANH", "SIGMOID") and op.kind == "UNIDIRECTIONAL_SEQUENCE_LSTM":
        act = None   # the LSTM's cell-gate nonlinearity, not a fused clamp
    if act is not None and act not in FUSED_OK:
        raise EerieError(f"{op_where(op)}: unsupported fused activation {act!r}")
    pad = op.attrs.get("padding")
    if pad is not None and pad not in ("SAME", "VALID"):
        _fail(op, f"unknown padding {pad!r}")
    for key in ("stride_w", "stride_h", "dilation_w_factor", "dilation_h_factor",
                "filter_width", "filter_height"):
        v = op.attrs.get(key)
        if v is not None and not 1 <= int(v) <= 65535:
            _fail(op, f"{key} is {v}")


def _window_out(padding, size, k, stride, dil):
    eff = (k - 1) * dil + 1
    return (size + stride - 1) // stride if padding == "SAME" else (size + stride - eff) // stride


def _check_window(op, g, in_shape, kh, kw, out_shape):
    a = op.attrs
    pad = a.get("padding", "VALID")
    sh, sw = int(a.get("stride_h", 1)), int(a.get("stride_w", 1))
    dh, dw = int(a.get("dilation_h_factor", 1) or 1), int(a.get("dilation_w_factor", 1) or 1)
    oh = _window_out(pad, in_shape[1], kh, sh, dh)
    ow = _window_out(pad, in_shape[2], kw, sw, dw)
    if (oh, ow) != tuple(out_shape[1:3]) or oh < 1 or ow < 1:
        _fail(op, f"output is {out_shape[1]}x{out_shape[2]} but {pad} padding with a {kh}x{kw} "
                  f"window, stride {sh}x{sw} on a {in_shape[1]}x{in_shape[2]} input gives {oh}x{ow}")


def _rank(op, g, tid, r, what):
    t = g.t(tid)
    if len(t.shape) != r:
        _fail(op, f"{what} {tensor_where(t)} has shape {list(t.shape)}, expected rank {r}")
    return t


def _weights_dtypes(op, g, x, w, b, y):
    """Float graphs are float throughout; int8 ones have int8 weights and int32 bias. A float
    input with int8 weights (float bias and output) is TFLite's hybrid (dynamic-range) scheme:
    a valid file, which check_supported reports as unsupported, not as malformed."""
    if x.dtype == "float32":
        want = {"weights": "float32", "bias": "float32", "output": "float32"}
        if w.dtype in ("int8", "uint8"):
            want["weights"] = w.dtype
    elif x.dtype == "int8":
        want = {"weights": "int8", "bias": "int32", "output": "int8"}
    else:
        return   # the kernel registry reports the unsupported dtype
    for what, t in (("weights", w), ("bias", b), ("output", y)):
        if t is not None and t.dtype != want[what]:
            _fail(op, f"{x.dtype} input with {t.dtype} {what} {tensor_where(t)} "
                      f"(expected {want[what]})")


def _conv_like(op, g, depthwise: bool):
    _arity(op, 2, 3)
    x = _rank(op, g, op.inputs[0], 4, "input")
    w = _rank(op, g, op.inputs[1], 4, "weights")
    y = _rank(op, g, op.outputs[0], 4, "output")
    b = g.t(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] is not None else None
    _constant_weights(op, w, b)
    _weights_dtypes(op, g, x, w, b, y)
    if x.shape[0] != y.shape[0]:
        _fail(op, f"batch {x.shape[0]} in but {y.shape[0]} out")
    out_c = w.shape[3] if depthwise else w.shape[0]
    if depthwise:
        if w.shape[0] != 1:
            _fail(op, f"depthwise weights {list(w.shape)} must be [1, kh, kw, channels]")
        if x.shape[3] == 0 or out_c % x.shape[3]:
            _fail(op, f"{out_c} output channels is not a multiple of {x.shape[3]} input channels")
        dm = op.attrs.get("depth_multiplier")
        if dm is not None and int(dm) > 0 and int(dm) * x.shape[3] != out_c:
            _fail(op, f"depth multiplier {dm} x {x.shape[3]} channels != {out_c} output channels")
        kh, kw = w.shape[1], w.shape[2]
    else:
        if w.shape[3] == 0 or x.shape[3] % w.shape[3]:
            _fail(op, f"weights expect {w.shape[3]} input channels, the input has {x.shape[3]}")
        kh, kw = w.shape[1], w.shape[2]
    if y.shape[3] != out_c:
        _fail(op, f"{out_c} filters but the output has {y.shape[3]} channels")
    if b is not None and b.size != out_c:
        _fail(op, f"bias has {b.size} values for {out_c} output channels")
    if kh < 1 or kw < 1:
        _fail(op, f"empty {kh}x{kw} kernel")
    _filter_channels(op, g, w, 3 if depthwise else 0, out_c)
    _check_window(op, g, x.shape, kh, kw, y.shape)
    _needs_quant(op, g, [op.inputs[0], op.inputs[1], op.outputs[0]])


def _constant_weights(op, w, b):
    """TFLM also runs filters and biases that are activations (computed by the graph); the
    kernels here pack and fold them at compile time, so that is unsupported, not malformed."""
    for what, t in (("weights", w), ("bias", b)):
        if t is not None and not t.is_const:
            raise EerieError(f"{op_where(op)}: unsupported: {what} {tensor_where(t)} computed "
                             f"by the graph (eerie-c needs constant {what})")


def _filter_channels(op, g, w, dim: int, out_c: int):
    """TFLM's per-channel filter rule (PopulateConvolutionQuantizationParams,
    fully_connected_common.cc): one scale per output channel, and the file's quantized
    dimension of that size. The kernels read the scales by output channel (dimension `dim`),
    so a filter quantized along another dimension of that size is normalised to `dim`."""
    q = w.quant
    if q is None or not q.per_channel:
        return
    n = len(q.scale)
    if n != out_c:
        _fail(op, f"{n} per-channel weight scales for {out_c} output channels")
    if not 0 <= q.axis < len(w.shape) or w.shape[q.axis] != n:
        _fail(op, f"per-channel weights quantized along dimension {q.axis} of shape "
                  f"{list(w.shape)}, which does not have {n} entries")
    if q.axis != dim:
        g.notes.append(f"{op_where(op)}: weights {tensor_where(w)} quantized along dimension "
                       f"{q.axis} (also of size {n}) read per output channel (dimension {dim}), "
                       f"as TFLM does")
        q.axis = dim


def _pool(op, g):
    _arity(op, 1, 1)
    x = _rank(op, g, op.inputs[0], 4, "input")
    y = _rank(op, g, op.outputs[0], 4, "output")
    _same_dtype(op, g, [x.id, y.id])
    if x.shape[0] != y.shape[0] or x.shape[3] != y.shape[3]:
        _fail(op, f"input {list(x.shape)} and output {list(y.shape)} differ in batch or channels")
    fh, fw = int(op.attrs.get("filter_height", 1)), int(op.attrs.get("filter_width", 1))
    _check_window(op, g, x.shape, fh, fw, y.shape)
    _needs_quant(op, g, [x.id, y.id])


def _fully_connected(op, g):
    _arity(op, 2, 3)
    x, w, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
    b = g.t(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] is not None else None
    if len(w.shape) != 2:
        _fail(op, f"weights {tensor_where(w)} must be a matrix, got shape {list(w.shape)}")
    units, depth = w.shape
    if depth == 0 or x.size % depth:
        _fail(op, f"input {list(x.shape)} does not split into rows of {depth}")
    if y.size != (x.size // depth) * units:
        _fail(op, f"output {list(y.shape)} should hold {x.size // depth} x {units} values")
    if b is not None and b.size != units:
        _fail(op, f"bias {tensor_where(b)} must hold {units} values")
    # (computed weights and bias are run-time operands of the kernel: kernels/_fc_runtime.py)
    _weights_dtypes(op, g, x, w, b, y)
    _filter_channels(op, g, w, 0, units)
    _needs_quant(op, g, [x.id, w.id, y.id])


def _elementwise(op, g, n_in):
    _arity(op, n_in, n_in)
    _same_dtype(op, g, list(op.inputs) + list(op.outputs))
    _needs_quant(op, g, list(op.inputs) + list(op.outputs))
    y = g.t(op.outputs[0])
    shapes = [g.t(t).shape for t in op.inputs]
    try:
        out = np.broadcast_shapes(*shapes)
    except ValueError:
        _fail(op, f"input shapes {' and '.join(str(list(s)) for s in shapes)} do not broadcast")
    if tuple(out) != tuple(y.shape):
        _fail(op, f"output shape {list(y.shape)}, inputs broadcast to {list(out)}")


def _same_shape(op, g, same_dtype=True):
    _arity(op, 1, 1)
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    if same_dtype:
        _same_dtype(op, g, [x.id, y.id])
    _needs_quant(op, g, [x.id, y.id])
    if tuple(x.shape) != tuple(y.shape):
        _fail(op, f"input {list(x.shape)} and output {list(y.shape)} differ")


def _reshape(op, g):
    _arity(op, 1, 2)
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    _same_dtype(op, g, [x.id, y.id])
    if x.size != y.size:
        _fail(op, f"input {list(x.shape)} ({x.size} values) and output {list(y.shape)} "
                  f"({y.size} values) differ in size")


RULES = {
    "CONV_2D": lambda op, g: _conv_like(op, g, False),
    "DEPTHWISE_CONV_2D": lambda op, g: _conv_like(op, g, True),
    "AVERAGE_POOL_2D": _pool,
    "MAX_POOL_2D": _pool,
    "L2_POOL_2D": _pool,
    "FULLY_CONNECTED": _fully_connected,
    "ADD": lambda op, g: _elementwise(op, g, 2),
    "SUB": lambda op, g: _elementwise(op, g, 2),
    "MUL": lambda op, g: _elementwise(op, g, 2),
    "SOFTMAX": lambda op, g: _same_shape(op, g, same_dtype=False),   # int8 -> int16 exists
    "LOGISTIC": _same_shape,
    "TANH": _same_shape,
    "RELU": _same_shape,
    "RELU6": _same_shape,
    "RESHAPE": _reshape,
    "SQUEEZE": _reshape,
    "EXPAND_DIMS": _reshape,
}


def check_op(op, g) -> None:
    if not op.inputs or op.inputs[0] is None:
        if op.kind.startswith("CUSTOM:"):   # (XMOS's XC_ld_weights reads only its options)
            custom_unsupported(op, "has no first input")
        _fail(op, "the op has no first input")
    _attrs_common(op)
    rule = RULES.get(op.kind)
    if rule is not None:
        rule(op, g)
