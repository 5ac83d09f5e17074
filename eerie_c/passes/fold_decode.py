"""TFLM_DECODE with constant inputs (what TFLM requires) is decoded at compile time: its
outputs become constants and the op goes (kernels/decode.py), so compressed weights feed a
convolution like any other weights. The TFLite reader runs this right after loading, before
validation (which wants constant weights). An output that is a model output keeps the op."""
from ..ir import Graph
from ..kernels.decode import decoded_outputs


def fold_decode(g: Graph) -> Graph:
    keep = []
    for op in g.ops:
        if op.kind == "TFLM_DECODE" and not any(o in g.outputs for o in op.outputs) \
                and all(t is not None and g.t(t).is_const for t in op.inputs):
            for tid, data in zip(op.outputs, decoded_outputs(op, g)):
                g.t(tid).data = data
            continue
        keep.append(op)
    g.ops = keep
    return g
