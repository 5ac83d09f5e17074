"""The IR: plain dataclasses for tensors, ops and graphs.

Tensors are keyed by a unique id (the frontend's choice, e.g. "t12"); `label` keeps the
model's own name for comments and reports. Constant tensors carry their data as a numpy
array; activations have data None. Ops are kept in execution order.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# IR dtype -> C type and numpy type.
DTYPE_C = {
    "int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "int32": "int32_t",
    "int64": "int64_t", "float32": "float", "bool": "uint8_t",
    "uint32": "uint32_t", "uint64": "uint64_t",   # TFLM's signal (audio front end) ops
}
DTYPE_NP = {
    "int8": np.int8, "uint8": np.uint8, "int16": np.int16, "int32": np.int32,
    "int64": np.int64, "float32": np.float32, "bool": np.bool_,
    "uint32": np.uint32, "uint64": np.uint64,
}
ITEMSIZE = {k: np.dtype(v).itemsize for k, v in DTYPE_NP.items()}

# Ops that only give their input another shape: the same bytes in the same order.
SHAPE_ONLY = ("RESHAPE", "SQUEEZE", "EXPAND_DIMS")


@dataclass
class Quant:
    """Affine quantization: real = scale * (q - zero_point), per tensor or per channel on `axis`."""
    scale: np.ndarray          # float32, length 1 or number of channels
    zero_point: np.ndarray     # int64, same length as scale
    axis: int = 0

    @property
    def per_channel(self) -> bool:
        return len(self.scale) > 1


@dataclass
class Tensor:
    id: str
    shape: tuple[int, ...]
    dtype: str
    label: str = ""
    quant: Quant | None = None
    data: np.ndarray | None = None   # constant contents, or None for activations
    # A variable (state) tensor keeps its contents across invocations (TFLite is_variable):
    # never constant (data stays None), never in the activation arena: it gets its own
    # static storage, initialised to `init` (None: all zero bytes) and restored to it by
    # NAME_reset_state(). Kernels that write it list it in Lowered.updates.
    variable: bool = False
    init: np.ndarray | None = None
    # 4-bit weights (a TFLite INT4 tensor, or int8 weights that all lie in [-8, 7] under
    # --optimize size): dtype stays "int8" and `data` holds the values one per int8 for the
    # compiler's own arithmetic, but the kernels must store them two per byte in flash and
    # unpack them in registers (kernels/_int4.py); a kernel that cannot must refuse.
    int4: bool = False

    @property
    def is_const(self) -> bool:
        return self.data is not None

    @property
    def size(self) -> int:
        return math.prod(int(d) for d in self.shape)   # planners ask this ~10^5 times a compile

    @property
    def nbytes(self) -> int:
        return self.size * ITEMSIZE[self.dtype]

    @property
    def ctype(self) -> str:
        return DTYPE_C[self.dtype]

    # Scalar quantization parameters, for per-tensor quantized activations.
    @property
    def scale(self) -> float:
        return float(self.quant.scale[0])

    @property
    def zero_point(self) -> int:
        return int(self.quant.zero_point[0])


@dataclass
class Op:
    kind: str                          # TFLite builtin name, e.g. "CONV_2D"
    inputs: list[str | None]           # tensor ids; None for an omitted optional input
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    name: str = ""                     # layer name for C identifiers and comments
    index: int = 0                     # position in the source model, for error messages
    subgraph: int = 0                  # the source subgraph `index` counts in (TFLite IF/WHILE bodies)
    regions: list["Graph"] = field(default_factory=list)   # bodies of control-flow ops


@dataclass
class Graph:
    name: str
    tensors: dict[str, Tensor]
    ops: list[Op]
    inputs: list[str]
    outputs: list[str]
    # A PyTorch program quantized with PT2E: the quantizer's name ("" for any other model),
    # the (scale, zero point, qmin, qmax) of every constant it dequantized (passes/fold_qdq.py
    # recovers int8 weights with them), and the float islands that pass left (report, check).
    quantized_from: str = ""
    quant_hints: list = field(default_factory=list)
    float_islands: list = field(default_factory=list)
    # What the frontend normalised in the model file rather than refuse it (a per-channel
    # bias's quantized dimension, a shared zero point, ...): one line each, in the report.
    notes: list = field(default_factory=list)

    def t(self, tid: str) -> Tensor:
        return self.tensors[tid]

    def consumers(self, tid: str) -> list[Op]:
        return [op for op in self.ops if tid in op.inputs]

    def readers(self, regions: bool = False) -> dict[str, list[Op]]:
        """Tensor id -> the ops that read it, in graph order. With regions, an IF / WHILE op
        also reads what its nested graphs read (after the ops that read it directly)."""
        r: dict[str, list[Op]] = {}
        for op in self.ops:
            for t in op.inputs:
                if t is not None:
                    r.setdefault(t, []).append(op)
        for op in self.ops if regions else ():
            for reg in op.regions:
                for rop in reg.ops:
                    for t in rop.inputs:
                        if t is not None:
                            r.setdefault(t, []).append(op)
        return r

    def producer(self, tid: str) -> Op | None:
        for op in self.ops:
            if tid in op.outputs:
                return op
        return None

    def activations(self) -> list[str]:
        """Ids of non-constant, non-variable tensors that ops read or write, in first-use order."""
        seen: dict[str, None] = {}
        for tid in self.inputs:
            seen[tid] = None
        for op in self.ops:
            for tid in list(op.inputs) + list(op.outputs):
                if tid is not None and not self.tensors[tid].is_const and not self.tensors[tid].variable:
                    seen[tid] = None
        return list(seen)

    def variables(self) -> list[str]:
        """Ids of the variable (state) tensors that ops use, in first-use order."""
        seen: dict[str, None] = {}
        for op in self.ops:
            for tid in list(op.inputs) + list(op.outputs):
                if tid is not None and self.tensors[tid].variable:
                    seen[tid] = None
        return list(seen)
