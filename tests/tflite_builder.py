"""Build small TFLite models in tests, with the schema's generated object API (shipped by
the ai-edge-litert oracle package), so every op test runs on a real .tflite flatbuffer.

    mb = ModelBuilder()
    x = mb.input([1, 8, 8, 3], "int8", scale=0.05, zero_point=-3)
    w = mb.const(weights_int8, "int8", scale=[...], zero_point=[0]*C, axis=0)
    y = mb.tensor([1, 8, 8, C], "int8", scale=0.1, zero_point=2)
    mb.op("CONV_2D", [x, w, b], [y], "Conv2DOptions", padding=0, strideW=1, strideH=1)
    mb.output(y)
    data = mb.build()
"""
from __future__ import annotations

import flatbuffers
from flatbuffers import flexbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as fb

TYPES = {"float32": fb.TensorType.FLOAT32, "int8": fb.TensorType.INT8, "int16": fb.TensorType.INT16,
         "int32": fb.TensorType.INT32, "uint8": fb.TensorType.UINT8, "int64": fb.TensorType.INT64,
         "bool": fb.TensorType.BOOL, "resource": fb.TensorType.RESOURCE,
         "uint32": fb.TensorType.UINT32, "uint64": fb.TensorType.UINT64, "int4": fb.TensorType.INT4}
NP = {"float32": np.float32, "int8": np.int8, "int16": np.int16, "int32": np.int32,
      "uint8": np.uint8, "int64": np.int64, "bool": np.bool_, "uint32": np.uint32, "uint64": np.uint64,
      "int4": np.int8}   # int4: values in [-8, 7], written two per byte (pack_int4)
ACT = {"NONE": 0, "RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3}
PAD = {"SAME": 0, "VALID": 1}


def pack_int4(values) -> np.ndarray:
    """TFLite's INT4 buffer: row-major values two per byte, the even element in the low nibble
    (LiteRT's tensor_utils::UnpackDenseInt4IntoInt8 reads them so), an odd count padded."""
    v = np.asarray(values, np.int64).reshape(-1)
    assert v.size == 0 or (v.min() >= -8 and v.max() <= 7), "int4 values must lie in [-8, 7]"
    v = np.concatenate([v, np.zeros(v.size % 2, np.int64)]) & 0xF
    return (v[0::2] | v[1::2] << 4).astype(np.uint8)


class ModelBuilder:
    def __init__(self):
        self.tensors: list = []
        self.buffers = [fb.BufferT()]      # buffer 0 is the empty sentinel
        self.opcodes: list = []
        self.ops: list = []
        self.inputs: list[int] = []
        self.outputs: list[int] = []
        self.subgraphs: list["ModelBuilder"] = []   # extra subgraphs 1.. (see subgraph())
        self.name = "main"

    def subgraph(self, name: str | None = None) -> "ModelBuilder":
        """A further subgraph (for IF / WHILE / CALL_ONCE) sharing this model's buffers and
        operator codes; `.index` is its subgraph index. Build it like the main one; only the
        main builder's build() writes the model."""
        root = getattr(self, "root", self)
        sub = ModelBuilder()
        sub.buffers, sub.opcodes, sub.root = root.buffers, root.opcodes, root
        root.subgraphs.append(sub)
        sub.index = len(root.subgraphs)
        sub.name = name or f"subgraph_{sub.index}"
        return sub

    def tensor(self, shape, dtype, scale=None, zero_point=None, axis=0, data=None, name=None,
               variable=False) -> int:
        t = fb.TensorT()
        t.isVariable = bool(variable)   # state that persists across invocations
        t.shape = list(shape)
        t.type = TYPES[dtype]
        t.name = name or f"tensor_{len(self.tensors)}"
        if scale is not None:
            q = fb.QuantizationParametersT()
            q.scale = [float(s) for s in np.atleast_1d(scale)]
            zp = zero_point if zero_point is not None else 0
            q.zeroPoint = [int(z) for z in np.atleast_1d(zp)]
            if len(q.zeroPoint) == 1 and len(q.scale) > 1:
                q.zeroPoint = q.zeroPoint * len(q.scale)
            q.quantizedDimension = axis
            t.quantization = q
        if data is not None:
            arr = np.asarray(data, dtype=NP[dtype])
            assert tuple(arr.shape) == tuple(shape), (arr.shape, shape)
            b = fb.BufferT()
            b.data = pack_int4(arr) if dtype == "int4" else np.frombuffer(arr.tobytes(), dtype=np.uint8)
            self.buffers.append(b)
            t.buffer = len(self.buffers) - 1
        self.tensors.append(t)
        return len(self.tensors) - 1

    def const(self, data, dtype, **kw) -> int:
        arr = np.asarray(data, dtype=NP[dtype])
        return self.tensor(arr.shape, dtype, data=arr, **kw)

    def variable(self, shape, dtype, **kw) -> int:
        """A variable (state) tensor: contents persist from one invocation to the next."""
        return self.tensor(shape, dtype, variable=True, **kw)

    def input(self, shape, dtype, **kw) -> int:
        i = self.tensor(shape, dtype, **kw)
        self.inputs.append(i)
        return i

    def output(self, i: int):
        self.outputs.append(i)

    def op(self, kind: str, inputs, outputs, options: str | None = None, **fields):
        code = getattr(fb.BuiltinOperator, kind)
        for k, oc in enumerate(self.opcodes):
            if oc.builtinCode == code:
                idx = k
                break
        else:
            oc = fb.OperatorCodeT()
            oc.builtinCode = code
            oc.deprecatedBuiltinCode = min(code, 127)
            oc.version = 1
            self.opcodes.append(oc)
            idx = len(self.opcodes) - 1
        o = fb.OperatorT()
        o.opcodeIndex = idx
        o.inputs = list(inputs)
        o.outputs = list(outputs)
        if options:
            opts = getattr(fb, options + "T")()
            for k, v in fields.items():
                assert hasattr(opts, k), f"{options} has no field {k}"
                setattr(opts, k, v)
            o.builtinOptionsType = getattr(fb.BuiltinOptions, options)
            o.builtinOptions = opts
        self.ops.append(o)

    def custom_op(self, name: str, inputs, outputs, options: dict | None = None):
        """A CUSTOM operator `name` with its options as a flexbuffer map (TFLM's signal ops
        read theirs so)."""
        for k, oc in enumerate(self.opcodes):
            if oc.builtinCode == fb.BuiltinOperator.CUSTOM and oc.customCode == name:
                idx = k
                break
        else:
            oc = fb.OperatorCodeT()
            oc.builtinCode = oc.deprecatedBuiltinCode = fb.BuiltinOperator.CUSTOM
            oc.customCode, oc.version = name, 1
            self.opcodes.append(oc)
            idx = len(self.opcodes) - 1
        o = fb.OperatorT()
        o.opcodeIndex, o.inputs, o.outputs = idx, list(inputs), list(outputs)
        o.customOptions = list(flexbuffers.Dumps(dict(options or {})))
        o.customOptionsFormat = fb.CustomOptionsFormat.FLEXBUFFERS
        self.ops.append(o)

    def _subgraph_t(self):
        sg = fb.SubGraphT()
        sg.tensors, sg.operators = self.tensors, self.ops
        sg.inputs, sg.outputs = self.inputs, self.outputs
        sg.name = self.name
        return sg

    def _tensor_map(self, i: int):
        tm = fb.TensorMapT()
        tm.name, tm.tensorIndex = self.tensors[i].name, i
        return tm

    def build(self) -> bytes:
        m = fb.ModelT()
        m.version = 3
        m.operatorCodes, m.buffers = self.opcodes, self.buffers
        m.subgraphs = [self._subgraph_t()] + [s._subgraph_t() for s in self.subgraphs]
        m.description = "eerie-c test model"
        if getattr(self, "signature", None):   # a signature (the AI Edge Quantizer calibrates by one)
            sd = fb.SignatureDefT()
            sd.signatureKey, sd.subgraphIndex = self.signature, 0
            sd.inputs, sd.outputs = [self._tensor_map(i) for i in self.inputs], \
                [self._tensor_map(i) for i in self.outputs]
            m.signatureDefs = [sd]
        b = flatbuffers.Builder(1024)
        b.Finish(m.Pack(b), file_identifier=b"TFL3")
        return bytes(b.Output())


# Broadcast operand shapes of rank 4, 5 and 6, every operand broadcast along some dims and not
# others (the 6-D case with a 5-D second operand). Outputs [2,2,3,4], [2,2,3,4,2], [2,2,3,4,2,3].
HIGH_RANK_PAIRS = [([2, 1, 3, 1], [1, 2, 1, 4]), ([2, 1, 3, 1, 2], [1, 2, 1, 4, 2]),
                   ([2, 1, 3, 1, 2, 1], [2, 1, 4, 1, 3])]
HIGH_RANK_TRIPLES = [([2, 1, 3, 1], [1, 2, 1, 4], [4]), ([1, 2, 1, 4, 2], [2, 1, 3, 1, 2], [1, 1, 1, 2]),
                     ([2, 1, 3, 1, 2, 1], [1, 1, 4, 1, 3], [1, 2, 1, 1, 1, 1])]


def op_fan(groups):
    """One model holding many small ops (one compile, one TFLM interpreter). groups: a list of
    (specs, shape sets); for each spec and each tuple of operand shapes, fresh inputs of those
    shapes and the op on them, one output each. A spec is (kind, operand dtypes, output dtype,
    (scale, zero point) or None per operand then for the output, options name or None, option
    fields or None). Returns (model, inputs [(shape, dtype, kind, operand index)], a label per
    output)."""
    mb = ModelBuilder()
    inputs, labels = [], []
    kw = (lambda q: dict(scale=q[0], zero_point=q[1]) if q else {})
    for specs, shape_sets in groups:
        for kind, dtypes, out_dtype, quants, options, fields in specs:
            quants = quants or [None] * (len(dtypes) + 1)
            for shapes in shape_sets:
                ids = []
                for k, (shape, dt, q) in enumerate(zip(shapes, dtypes, quants)):
                    ids.append(mb.input(list(shape), dt, **kw(q)))
                    inputs.append((list(shape), dt, kind, k))
                out = list(np.broadcast_shapes(*[tuple(s) for s in shapes]))
                y = mb.tensor(out, out_dtype, **kw(quants[-1]))
                mb.op(kind, ids, [y], options, **(fields or {}))
                mb.output(y)
                labels.append(f"{kind} {'/'.join(dtypes)} {' x '.join(map(str, shapes))}")
    return mb.build(), inputs, labels
