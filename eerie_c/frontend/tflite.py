"""TFLite flatbuffer -> IR, with the `tflite` package's generated readers.

Subgraph 0 is the model; the subgraphs that IF / WHILE / CALL_ONCE name are inlined into it
as regions by tflite_control.py (which also turns resource variables into state tensors).
Builtin options are turned into a plain attrs dict by
reflection over the options table (CamelCase getters -> snake_case keys), with the enums that
kernels care about (padding, fused activation) spelled out as strings.
"""
from __future__ import annotations

import re

import flatbuffers
import numpy as np
import tflite
from flatbuffers import flexbuffers

from ..errors import EerieError
from ..ir import Graph, Op, Quant, Tensor, verify_graph
from ..ir.describe import quote
from .tflite_control import CONTROL_KINDS, expand_control
from .flatbuffer_check import malformed, verify_flatbuffer
from .tensor_checks import check_shape
from .tflite_shapes import derive_shapes
from .tflite_variables import fold_constant_variables
from .validate import check_graph

_TENSOR_TYPES = {v: k for k, v in vars(tflite.TensorType).items() if not k.startswith("_")}
_OPERATORS = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
_OPTIONS = {v: k for k, v in vars(tflite.BuiltinOptions).items() if not k.startswith("_")}
_DTYPES = {"INT8": "int8", "UINT8": "uint8", "INT16": "int16", "INT32": "int32",
           "INT64": "int64", "FLOAT32": "float32", "BOOL": "bool", "UINT32": "uint32",
           "UINT64": "uint64"}
_PADDING = {0: "SAME", 1: "VALID"}
_ACTIVATION = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH",
               5: "SIGN_BIT", 6: "SIGMOID"}
_SKIP_GETTERS = ("Init", "GetRootAs")
_DTYPE_NP = {"int8": np.int8, "uint8": np.uint8, "int16": np.int16, "int32": np.int32,
             "int64": np.int64, "float32": np.float32, "bool": np.bool_, "uint32": np.uint32,
             "uint64": np.uint64}


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
        # (exactly "Init": CallOnceOptions has an InitSubgraphIndex field)
        if getter.startswith("_") or getter == "Init" or getter.startswith(_SKIP_GETTERS[1:]) \
                or "BufferHasIdentifier" in getter:
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


def _custom_attrs(op) -> dict:
    """A custom op's options: a flexbuffer map (TFLM's signal ops write one), as a dict; empty
    for anything else (the op's kernel, if there is one, says what it misses)."""
    if op.CustomOptionsIsNone() or op.CustomOptionsLength() == 0:
        return {}
    try:
        value = flexbuffers.Loads(op.CustomOptionsAsNumpy().tobytes())
    except Exception:
        # Not a flexbuffer: the custom op's own runtime format (XMOS's XC_* ops in models
        # their xformer wrote). The op is unsupported, which check_supported says; the file
        # is not malformed. A kernel that needs options reports what it misses.
        return {}
    if isinstance(value, list):   # options TFLM reads by position (CIRCULAR_BUFFER's)
        return {"custom_vector": [v for v in value if isinstance(v, (bool, int, float))]}
    return dict(value) if isinstance(value, dict) else {}


def _buffer_data(model, buf: bytes, index: int, where: str) -> np.ndarray | None:
    n = model.BuffersLength()
    if index >= n and index > 0:
        raise malformed(f"buffer index {index} is out of range ({n} buffers)", where)
    if index == 0:   # buffer 0 is the empty sentinel: an activation
        return None
    b = model.Buffers(index)
    if b.Offset() > 1:   # large models keep data outside the flatbuffer
        start, size = int(b.Offset()), int(b.Size())
        if start + size > len(buf):
            raise malformed(f"buffer {index} (bytes {start} to {start + size}) lies outside the file", where)
        return np.frombuffer(buf, dtype=np.uint8, count=size, offset=start)
    if b.DataIsNone() or b.DataLength() == 0:
        return None
    return b.DataAsNumpy()


def unpack_int4(raw: np.ndarray, count: int, shape: tuple, buffer: int, where: str) -> np.ndarray:
    """A TFLite INT4 buffer: the tensor's values in row-major order, two per byte, the even
    element in the low nibble (LiteRT's UnpackDenseInt4IntoInt8), an odd count's last high
    nibble unused; as int8 values in [-8, 7]."""
    need = (count + 1) // 2
    if raw.size != need:
        raise malformed(f"shape {list(shape)} of int4 needs {need} bytes but buffer {buffer} "
                        f"holds {raw.size}", where)
    b = raw.astype(np.uint8)
    pairs = np.stack([b & 0xF, b >> 4], axis=-1).reshape(-1)[:count].astype(np.int8)
    return np.where(pairs >= 8, pairs - 16, pairs).astype(np.int8).reshape(shape)


def _tensor(model, buf: bytes, sg, i: int) -> tuple[Tensor, str | None]:
    t = sg.Tensors(i)
    label = (t.Name() or b"").decode("utf-8", "replace")
    where = f"tensor {i} ({quote(label)})"
    type_name = _TENSOR_TYPES.get(t.Type(), f"type code {t.Type()}")
    shape = tuple(int(d) for d in t.ShapeAsNumpy()) if not t.ShapeIsNone() else ()
    count = check_shape(shape, where)
    int4 = type_name == "INT4"
    if type_name not in _DTYPES and not int4:
        return None, type_name
    dtype = "int8" if int4 else _DTYPES[type_name]
    quant = None
    q = t.Quantization()
    if q is not None and not q.ScaleIsNone() and q.ScaleLength() > 0:
        scale = np.asarray(q.ScaleAsNumpy(), dtype=np.float32)
        # (a count other than the scales' is normalised by validate.check_quant, as TFLM reads it)
        zp = np.asarray(q.ZeroPointAsNumpy(), dtype=np.int64).reshape(-1) \
            if not q.ZeroPointIsNone() and q.ZeroPointLength() > 0 else np.zeros(len(scale), np.int64)
        quant = Quant(scale=scale, zero_point=zp, axis=int(q.QuantizedDimension()))
    raw = _buffer_data(model, buf, t.Buffer(), where)
    data = None
    if int4:   # constants only (weights): an INT4 activation is unsupported
        if raw is None or t.IsVariable():
            return None, type_name
        return Tensor(id=f"t{i}", shape=shape, dtype=dtype, label=label, quant=quant,
                      data=unpack_int4(raw, count, shape, t.Buffer(), where), int4=True), None
    if raw is not None:
        itemsize = np.dtype(_DTYPE_NP[dtype]).itemsize
        if raw.size != count * itemsize:
            raise malformed(f"shape {list(shape)} of {dtype} needs {count * itemsize} bytes but "
                            f"buffer {t.Buffer()} holds {raw.size}", where)
        data = np.frombuffer(raw.tobytes(), dtype=_DTYPE_NP[dtype]).reshape(shape).copy()
    if t.IsVariable():
        # State that persists across invocations. TFLite(-Micro) resets variable tensors to
        # zeros (int8: the zero point) and ignores any buffer the model gives them (checked
        # against the tflite-micro oracle), so the initial contents are that, not the buffer.
        init = None
        if dtype == "int8" and quant is not None and quant.zero_point[0] != 0:
            init = np.full(shape, quant.zero_point[0], dtype=np.int8)
        return Tensor(id=f"t{i}", shape=shape, dtype=dtype, label=label, quant=quant,
                      variable=True, init=init), None
    return Tensor(id=f"t{i}", shape=shape, dtype=dtype, label=label, quant=quant, data=data), None


def load_tflite(buf: bytes, name: str, max_iterations: int | None = None) -> Graph:
    """Read and validate an untrusted .tflite file. Any problem with the file is an
    EerieError naming what is wrong and where; nothing else escapes."""
    if len(buf) < 8 or buf[4:8] != b"TFL3":
        raise EerieError("not a TFLite model: missing the 'TFL3' file identifier")
    loc = ["the model"]
    try:
        verify_flatbuffer(buf)
        g = _load(buf, name, loc, max_iterations)
        loc[0] = "the model's shapes"
        try:
            derive_shapes(g)   # the shapes LiteRT derives where the file stores others
            check_graph(g, len(buf))
        except EerieError as e:
            raise _dynamic_shapes(buf, e) from None
    except EerieError:
        raise
    except (RecursionError, MemoryError) as e:
        raise malformed(f"{type(e).__name__}", loc[0]) from None
    except Exception as e:   # the readers raise on anything the verifier did not foresee
        detail = " ".join(str(e).split())[:120]
        raise malformed(f"{type(e).__name__}: {detail}", loc[0]) from None
    return verify_graph(g, "frontend")


def _dynamic_shapes(buf: bytes, e: EerieError) -> EerieError:
    """A graph input whose shape signature has -1 beyond the batch dimension (a model exported
    with unknown sizes, as tflite-support's dilated_conv.tflite): the file's shapes are then
    placeholders (often all 1), and a check that fails on them is no sign of a corrupt file."""
    sg = tflite.Model.GetRootAs(buf, 0).Subgraphs(0)
    for k in range(sg.InputsLength()):
        t = sg.Tensors(sg.Inputs(k))
        sig = [int(d) for d in t.ShapeSignatureAsNumpy()] if t.ShapeSignatureLength() else []
        if -1 in sig[1:]:
            name = (t.Name() or b"").decode("utf-8", "replace")
            return EerieError(f"unsupported: dynamic shapes: graph input {k} ({name!r}) has shape "
                              f"signature {sig}, so the file's shapes are placeholders (convert "
                              f"the model with fixed input sizes); with them: {e}")
    return e


def _builtin_code(c) -> int:
    """An operator code's builtin_code field as stored. The `tflite` package's BuiltinCode()
    returns deprecated_builtin_code for codes below 127, so a writer that leaves that field 0
    (the AI Edge Quantizer's DEQUANTIZE and QUANTIZE) would read as ADD; LiteRT takes the
    larger of the two fields, as this does."""
    o = c._tab.Offset(10)
    return int(c._tab.Get(flatbuffers.number_types.Int32Flags, o + c._tab.Pos)) if o else 0


def _load(buf: bytes, name: str, loc: list[str], max_iterations: int | None = None) -> Graph:
    model = tflite.Model.GetRootAs(buf, 0)
    if model.SubgraphsLength() < 1:
        raise malformed("the model has no subgraph")
    codes = []
    for i in range(model.OperatorCodesLength()):
        loc[0] = f"operator code {i}"
        c = model.OperatorCodes(i)
        code = max(_builtin_code(c), int(c.DeprecatedBuiltinCode()))
        if code == tflite.BuiltinOperator.CUSTOM:
            custom = (c.CustomCode() or b"?").decode("ascii", "backslashreplace")
            codes.append("CUSTOM:" + custom)   # the kind a kernel registers, if any
        else:
            codes.append(_OPERATORS.get(code, f"BUILTIN_{code}"))
    tensors, ir_ops, inputs, outputs, resources = _read_subgraph(model, buf, 0, codes, loc)
    g = Graph(name=name, tensors=tensors, ops=ir_ops, inputs=inputs, outputs=outputs)
    # compressed constants (TFLM_DECODE) are constants: decoded here, before validation
    from .tflm_decode import fold_decode
    g = fold_decode(g)
    if resources or any(op.kind in CONTROL_KINDS for op in ir_ops):
        # IF / WHILE / CALL_ONCE subgraphs inlined as regions, resource variables as state.
        def read(s: int, prefix: str):
            return _read_subgraph(model, buf, s, codes, loc, prefix)
        g = expand_control(g, resources, read, model.SubgraphsLength(), max_iterations)
        g = fold_constant_variables(g)   # variables that only ever hold a constant
    return g


def _read_subgraph(model, buf: bytes, s: int, codes: list[str], loc: list[str], prefix: str = ""):
    """Tensors (ids prefix + "t<i>"), ops, inputs and outputs of subgraph `s`, plus the ids of
    its RESOURCE tensors (variable handles, kept out of the tensor table)."""
    sg = model.Subgraphs(s)
    where_sg = f"subgraph {s}"
    tensors, bad_types, resources = {}, {}, set()
    n_tensors = sg.TensorsLength()
    for i in range(n_tensors):
        loc[0] = f"tensor {i}" if s == 0 else f"{where_sg} tensor {i}"
        t, bad = _tensor(model, buf, sg, i)
        if bad == "RESOURCE":
            resources.add(f"{prefix}t{i}")
        elif bad:
            bad_types.setdefault(bad, []).append(i)
        else:
            t.id = prefix + t.id
            tensors[t.id] = t

    def tid(i: int, where: str) -> str | None:
        if i == -1:
            return None
        if not 0 <= i < n_tensors:
            raise malformed(f"tensor index {i} is out of range ({n_tensors} tensors)", where)
        return f"{prefix}t{i}"

    ops = []
    for k in range(sg.OperatorsLength()):
        loc[0] = f"op {k}" if s == 0 else f"{where_sg} op {k}"
        o = sg.Operators(k)
        if o.OpcodeIndex() >= len(codes):
            raise malformed(f"opcode index {o.OpcodeIndex()} is out of range ({len(codes)} operator codes)",
                            loc[0])
        kind = codes[o.OpcodeIndex()]
        where = f"{loc[0]} ({kind})"
        loc[0] = where
        ins = [tid(int(i), where) for i in o.InputsAsNumpy()] if not o.InputsIsNone() else []
        outs = [tid(int(i), where) for i in o.OutputsAsNumpy()] if not o.OutputsIsNone() else []
        if any(x is None for x in outs):
            raise malformed("an output is omitted (-1)", where)
        ops.append((k, kind, ins, outs, o))
    loc[0] = where_sg
    inputs = [tid(int(i), f"{where_sg} inputs") for i in sg.InputsAsNumpy()] if not sg.InputsIsNone() else []
    outputs = [tid(int(i), f"{where_sg} outputs") for i in sg.OutputsAsNumpy()] if not sg.OutputsIsNone() else []
    if bad_types:
        # Only after every index has been checked: a corrupt file is reported as such.
        items = "; ".join(f"{k} x{len(v)} (tensors {', '.join(map(str, v[:5]))}"
                          f"{', ...' if len(v) > 5 else ''})" for k, v in sorted(bad_types.items()))
        raise EerieError(f"unsupported tensor dtype: {items}" + (f" in {where_sg}" if s else ""))
    ir_ops = []
    for k, kind, ins, outs, o in ops:
        loc[0] = f"op {k} ({kind}) builtin options" if s == 0 else f"{where_sg} op {k} ({kind}) builtin options"
        layer = tensors[outs[0]].label if outs and outs[0] in tensors else ""
        attrs = _custom_attrs(o) if kind.startswith("CUSTOM:") else _options_attrs(o)
        if kind == "FULLY_CONNECTED" and len(ins) > 1 and ins[1] in tensors and tensors[ins[1]].int4:
            # the reference for INT4 weights is LiteRT's (TFLM refuses them), whose fully
            # connected kernel rounds its requantization once (kernels/_int4.py)
            attrs["rounding"] = "single"
        ir_ops.append(Op(kind=kind, inputs=ins, outputs=outs, attrs=attrs,
                         name=layer or f"{kind.lower()}_{k}", index=k, subgraph=s))
    loc[0] = where_sg
    return tensors, ir_ops, inputs, outputs, resources
