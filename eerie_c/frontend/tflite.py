"""TFLite flatbuffer -> IR, with the `tflite` package's generated readers.

Only subgraph 0 is read here. Builtin options are turned into a plain attrs dict by
reflection over the options table (CamelCase getters -> snake_case keys), with the enums that
kernels care about (padding, fused activation) spelled out as strings.
"""
from __future__ import annotations

import re

import numpy as np
import tflite

from ..errors import EerieError
from ..ir import Graph, Op, Quant, Tensor, verify_graph

_TENSOR_TYPES = {v: k for k, v in vars(tflite.TensorType).items() if not k.startswith("_")}
_OPERATORS = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
_OPTIONS = {v: k for k, v in vars(tflite.BuiltinOptions).items() if not k.startswith("_")}
_DTYPES = {"INT8": "int8", "UINT8": "uint8", "INT16": "int16", "INT32": "int32",
           "INT64": "int64", "FLOAT32": "float32", "BOOL": "bool"}
_PADDING = {0: "SAME", 1: "VALID"}
_ACTIVATION = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH",
               5: "SIGN_BIT", 6: "SIGMOID"}
_SKIP_GETTERS = ("Init", "GetRootAs")
_DTYPE_NP = {"int8": np.int8, "uint8": np.uint8, "int16": np.int16, "int32": np.int32,
             "int64": np.int64, "float32": np.float32, "bool": np.bool_}


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _options_attrs(op) -> dict:
    """Every scalar and vector field of the op's builtin options table, by reflection."""
    kind = op.BuiltinOptionsType()
    if kind == 0 or kind not in _OPTIONS:
        return {}
    cls_name = _OPTIONS[kind]
    cls = getattr(getattr(tflite, cls_name), cls_name, None) or getattr(tflite, cls_name)
    table = op.BuiltinOptions()
    if table is None:
        return {}
    opts = cls()
    opts.Init(table.Bytes, table.Pos)
    attrs = {}
    for getter in dir(cls):
        if getter.startswith("_") or getter.startswith(_SKIP_GETTERS) or "BufferHasIdentifier" in getter:
            continue
        if getter.endswith(("AsNumpy", "Length", "IsNone")):
            continue
        fn = getattr(opts, getter)
        if hasattr(opts, getter + "AsNumpy"):
            value = [int(v) for v in np.atleast_1d(getattr(opts, getter + "AsNumpy")())] \
                if not getattr(opts, getter + "IsNone")() else []
        else:
            try:
                value = fn()
            except TypeError:
                continue   # a getter that needs arguments (nested table); not used by kernels
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        attrs[_snake(getter)] = value
    if "padding" in attrs:
        attrs["padding"] = _PADDING.get(attrs["padding"], attrs["padding"])
    if "fused_activation_function" in attrs:
        attrs["fused_activation_function"] = _ACTIVATION.get(
            attrs["fused_activation_function"], attrs["fused_activation_function"])
    return attrs


def _buffer_data(model, buf: bytes, index: int) -> np.ndarray | None:
    if index <= 0 or index >= model.BuffersLength():
        return None
    b = model.Buffers(index)
    if b.Offset() > 1:   # large models keep data outside the flatbuffer
        start, size = int(b.Offset()), int(b.Size())
        if start + size > len(buf):
            raise EerieError(f"malformed TFLite file: buffer {index} lies outside the file")
        return np.frombuffer(buf, dtype=np.uint8, count=size, offset=start)
    if b.DataIsNone() or b.DataLength() == 0:
        return None
    return b.DataAsNumpy()


def _tensor(model, buf: bytes, sg, i: int) -> tuple[Tensor, str | None]:
    t = sg.Tensors(i)
    type_name = _TENSOR_TYPES.get(t.Type(), str(t.Type()))
    label = (t.Name() or b"").decode("utf-8", "replace")
    shape = tuple(int(d) for d in t.ShapeAsNumpy()) if not t.ShapeIsNone() else ()
    if type_name not in _DTYPES:
        return None, type_name
    dtype = _DTYPES[type_name]
    quant = None
    q = t.Quantization()
    if q is not None and not q.ScaleIsNone() and q.ScaleLength() > 0:
        scale = np.asarray(q.ScaleAsNumpy(), dtype=np.float32)
        zp = np.asarray(q.ZeroPointAsNumpy(), dtype=np.int64) if not q.ZeroPointIsNone() \
            else np.zeros(len(scale), np.int64)
        if len(zp) != len(scale):
            raise EerieError(f"malformed TFLite file: tensor {i} ({label!r}) has {len(scale)} "
                             f"scales but {len(zp)} zero points")
        quant = Quant(scale=scale, zero_point=zp, axis=int(q.QuantizedDimension()))
    raw = _buffer_data(model, buf, t.Buffer())
    data = None
    if raw is not None:
        itemsize = np.dtype(_DTYPE_NP[dtype]).itemsize
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if raw.size != count * itemsize:
            raise EerieError(f"malformed TFLite file: tensor {i} ({label!r}) has shape {list(shape)} "
                             f"({count * itemsize} bytes) but its buffer holds {raw.size} bytes")
        data = np.frombuffer(raw.tobytes(), dtype=_DTYPE_NP[dtype]).reshape(shape).copy()
    return Tensor(id=f"t{i}", shape=shape, dtype=dtype, label=label, quant=quant, data=data), None


def load_tflite(buf: bytes, name: str) -> Graph:
    if len(buf) < 8 or buf[4:8] != b"TFL3":
        raise EerieError("not a TFLite model: missing the 'TFL3' file identifier")
    try:
        return _load(buf, name)
    except EerieError:
        raise
    except Exception as e:   # the flatbuffer readers raise on out-of-range offsets
        raise EerieError(f"malformed TFLite file: {type(e).__name__}: {e}") from None


def _load(buf: bytes, name: str) -> Graph:
    model = tflite.Model.GetRootAs(buf, 0)
    if model.SubgraphsLength() < 1:
        raise EerieError("malformed TFLite file: the model has no subgraph")
    codes = []
    for i in range(model.OperatorCodesLength()):
        c = model.OperatorCodes(i)
        code = max(int(c.BuiltinCode()), int(c.DeprecatedBuiltinCode()))
        if code == tflite.BuiltinOperator.CUSTOM:
            codes.append("CUSTOM:" + (c.CustomCode() or b"?").decode("utf-8", "replace"))
        else:
            codes.append(_OPERATORS.get(code, f"BUILTIN_{code}"))
    sg = model.Subgraphs(0)
    tensors, bad_types = {}, {}
    for i in range(sg.TensorsLength()):
        t, bad = _tensor(model, buf, sg, i)
        if bad:
            bad_types.setdefault(bad, []).append(i)
        else:
            tensors[t.id] = t
    if bad_types:
        items = "; ".join(f"{k} x{len(v)} (tensors {', '.join(map(str, v[:5]))}"
                          f"{', ...' if len(v) > 5 else ''})" for k, v in sorted(bad_types.items()))
        raise EerieError(f"unsupported tensor dtype: {items}")

    def tid(i: int) -> str | None:
        if i < 0:
            return None
        if f"t{i}" not in tensors:
            raise EerieError(f"malformed TFLite file: tensor index {i} out of range")
        return f"t{i}"

    ops = []
    for k in range(sg.OperatorsLength()):
        o = sg.Operators(k)
        if o.OpcodeIndex() >= len(codes):
            raise EerieError(f"malformed TFLite file: op {k} has opcode index {o.OpcodeIndex()} out of range")
        kind = codes[o.OpcodeIndex()]
        ins = [tid(int(i)) for i in o.InputsAsNumpy()] if not o.InputsIsNone() else []
        outs = [tid(int(i)) for i in o.OutputsAsNumpy()] if not o.OutputsIsNone() else []
        if any(x is None for x in outs):
            raise EerieError(f"malformed TFLite file: op {k} ({kind}) has an omitted output")
        layer = tensors[outs[0]].label if outs else ""
        ops.append(Op(kind=kind, inputs=ins, outputs=outs, attrs=_options_attrs(o),
                      name=layer or f"{kind.lower()}_{k}", index=k))
    inputs = [tid(int(i)) for i in sg.InputsAsNumpy()]
    outputs = [tid(int(i)) for i in sg.OutputsAsNumpy()]
    g = Graph(name=name, tensors=tensors, ops=ops, inputs=inputs, outputs=outputs)
    return verify_graph(g, "frontend")
