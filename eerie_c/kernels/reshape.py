"""RESHAPE / SQUEEZE / EXPAND_DIMS. Normally aliased away by passes/alias_reshape.py (no
code at all); lowered to a copy only when both sides are caller-owned buffers."""
from . import Lowered, kernel


def _lower_copy(op, g, ctx):
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    return Lowered(body=f"memcpy(out0, in0, {y.nbytes});\n", inputs=[x.id], outputs=[y.id])


ALL_TYPES = ("int8", "uint8", "int16", "int32", "float32", "bool", "int64", "uint32", "uint64")
for _kind in ("RESHAPE", "SQUEEZE", "EXPAND_DIMS"):
    kernel(_kind, dtypes=ALL_TYPES)(_lower_copy)
