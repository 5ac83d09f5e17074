"""TFLM_DECODE whose result is a model output: a copy from flash of what the TFLite reader
decoded (frontend/tflm_decode.py decodes every TFLM_DECODE when the file is read; the others
became constants there and have no op left)."""
from __future__ import annotations

from . import Lowered, kernel


@kernel("CUSTOM:TFLM_DECODE", dtypes=("uint8",),
        outputs={"uint8": ("bool", "float32", "int8", "int16", "int32", "int64")})
def lower_decode(op, g, ctx):
    lines = []
    for k, (tid, data) in enumerate(zip(op.outputs, op.attrs["decoded"])):
        if data is None:   # an output that only feeds other ops: a constant already
            continue
        t = g.t(tid)
        name = ctx.const(data, t.ctype, f"decoded{k}", "decoded at compile time")
        lines.append(f"memcpy(out{k}, {name}, {t.size} * sizeof({t.ctype}));")
    return Lowered(body="\n".join(lines), inputs=[], outputs=[t for t, d in zip(op.outputs, op.attrs["decoded"])
                                                              if d is not None])
