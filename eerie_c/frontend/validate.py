"""Validation of untrusted .tflite files, before and after they are read into the IR.

Two layers, both raising EerieError with one line naming what is wrong and where:

* `verify_flatbuffer(buf)` (frontend/flatbuffer_check.py) walks the flatbuffer structure the
  frontend reads (model, operator codes, subgraph 0, tensors, quantization, operators,
  buffers) the way the flatbuffers C++ Verifier does: every table's vtable and every vector / string lies inside the file. The
  Python readers do not check bounds (a negative vtable offset silently reads from the end of
  the file, a long string is silently cut), so nothing is read before this has passed.
* `check_graph(g, file_size)` (this module) checks the IR the frontend built: sane limits and
  quantization arrays of the right length (frontend/tensor_checks.py), a graph whose every
  activation is produced exactly once before it is used, and the shape / dtype / attribute
  contract of the op kinds we know (frontend/op_rules.py), so that passes and kernels only
  ever see a consistent graph.

What is refused follows TFLM: a file TFLM's runtime accepts is not "malformed" here unless
reading it as TFLM does would make the generated code unsafe (out-of-bounds reads, sizes over
the limits). Quantization parameters that TFLM reads leniently are normalised instead, each
with one line in `g.notes` (the report's "Normalised on load" section):

* fewer or more zero points than scales: TFLM's allocator uses the first zero point for every
  channel (micro_allocator.cc), and so does eerie-c;
* per-channel scales whose quantized dimension does not fit the tensor: on a 1-D tensor with
  one scale per element (the converter writes per-channel biases with the filter's dimension,
  e.g. 3 on a [8] bias: TFLM's person-detection model) the dimension is 0; on any other
  tensor that no kernel reads per channel (TFLM reads only the first scale and zero point of
  those) they are left unused;
* the filter of a CONV_2D, DEPTHWISE_CONV_2D or FULLY_CONNECTED: TFLM needs one scale per
  output channel and that many entries along the file's quantized dimension; such a filter
  quantized along another dimension of the same size is read per output channel, like TFLM;
* a zero (or subnormal) scale on a bias (TFLM ignores a bias's quantization) or on a filter's
  channels (multiplier 0: the output zero point, as TFLM computes it). Anywhere else a zero
  scale is refused: it is no step size, and TFLM's arithmetic on it divides by zero.
"""
from __future__ import annotations

from ..errors import EerieError
from ..ir.describe import op_where, tensor_where
from .flatbuffer_check import malformed
from .op_rules import check_op, check_quant_by_role, custom_unsupported
from .tensor_checks import MAX_TENSOR_BYTES, check_quant, check_shape


def check_graph(g, file_size: int) -> None:
    """Limits, quantization, topology and per-op contracts of a freshly read graph."""
    const_bytes = 0
    for t in g.tensors.values():
        where = tensor_where(t)
        check_shape(t.shape, where)
        if t.nbytes > MAX_TENSOR_BYTES:
            raise malformed(f"shape {list(t.shape)} needs {t.nbytes} bytes (at most {MAX_TENSOR_BYTES})", where)
        check_quant(t, where, g.notes)
        if t.is_const:
            const_bytes += t.nbytes
    # Tensors may share a buffer, so allow some slack, but never unbounded amplification.
    if const_bytes > 4 * file_size + (1 << 20):
        raise malformed(f"constant tensors total {const_bytes} bytes, far more than the "
                        f"{file_size}-byte file holds")
    # Graph inputs and outputs.
    if not g.outputs:
        raise malformed("the graph has no outputs", "subgraph 0")
    for kind, ids in (("input", g.inputs), ("output", g.outputs)):
        seen = set()
        for k, tid in enumerate(ids):
            if tid is None:
                raise malformed(f"graph {kind} {k} is an omitted (-1) tensor", "subgraph 0")
            if tid in seen:
                raise malformed(f"{tensor_where(g.t(tid))} is listed twice as a graph {kind}", "subgraph 0")
            seen.add(tid)
            if g.t(tid).is_const:
                raise malformed(f"graph {kind} {k}, {tensor_where(g.t(tid))}, is a constant", "subgraph 0")
            if g.t(tid).variable:
                raise EerieError(f"graph {kind} {k}, {tensor_where(g.t(tid))}, is a variable (state) "
                                 f"tensor: not supported as a graph {kind}")
    both = set(g.inputs) & set(g.outputs)
    if both:
        t = g.t(sorted(both)[0])
        raise EerieError(f"{tensor_where(t)} is both a graph input and a graph output "
                         f"(a pass-through graph has nothing to compile)")
    # Every activation is produced exactly once, before any use: a cycle is a use before
    # production in execution order.
    defined = set(g.inputs)
    producer: dict[str, int] = {}
    for op in g.ops:
        where = op_where(op)
        if not op.outputs and not op.regions:   # (CALL_ONCE's IF makes nothing)
            raise malformed("the op has no outputs", where)
        for k, tid in enumerate(op.inputs):
            if tid is None:
                continue
            t = g.t(tid)
            if not t.is_const and not t.variable and tid not in defined:
                if tid in producer or any(tid in o.outputs for o in g.ops):
                    raise malformed(f"input {k}, {tensor_where(t)}, is used before the op that "
                                    f"produces it (ops out of order or a cycle)", where)
                if op.kind.startswith("CUSTOM:"):
                    # A custom op's runtime may own tensors nobody produces (Vela's ethos-u op
                    # reads scratch buffers its driver allocates): unsupported, not malformed.
                    custom_unsupported(op, f"reads {tensor_where(t)}, which no op produces")
                raise malformed(f"input {k}, {tensor_where(t)}, is neither a graph input, a "
                                f"constant nor produced by an op", where)
        for k, tid in enumerate(op.outputs):
            t = g.t(tid)
            if t.is_const:
                raise malformed(f"output {k}, {tensor_where(t)}, is a constant", where)
            if tid in g.inputs:
                raise malformed(f"output {k}, {tensor_where(t)}, is a graph input", where)
            if tid in producer and not t.variable:
                raise malformed(f"output {k}, {tensor_where(t)}, is already produced by op "
                                f"{producer[tid]}", where)
            producer[tid] = op.index
            defined.add(tid)
        check_op(op, g)
    for k, tid in enumerate(g.outputs):
        if tid not in defined:
            raise malformed(f"graph output {k}, {tensor_where(g.t(tid))}, is never produced", "subgraph 0")
    check_quant_by_role(g)
