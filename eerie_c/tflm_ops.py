"""The operators TensorFlow Lite Micro registers, with the dtypes its reference kernels run,
and the comparison with eerie-c's kernel registry (`eerie-c ops --vs-tflm`).

TFLM is the reference eerie-c is tested against, so "what TFLM has and we do not" is a
concrete list. The table below is read off tflite-micro's sources (commit 90b983c, Aug 2026):
the Add* methods of tensorflow/lite/micro/micro_mutable_op_resolver.h (118 registrations:
builtin operators and custom ones), and for each the input dtypes its kernel's Prepare / Eval
accept. The dtype of an op is keyed the way the registry keys it (its first input's dtype, or
the input `kernels.KernelInfo.key_input` names: the values of SELECT_V2 and EMBEDDING_LOOKUP).
For ops whose output dtype is not their input's, OUTPUTS lists the output dtypes per input.
"""
from __future__ import annotations

ANY = ("bool", "float32", "int8", "int16", "int32", "int64", "uint8")   # every dtype eerie-c has
F = ("float32",)
F8 = ("float32", "int8")
F816 = ("float32", "int8", "int16")
F81632 = ("float32", "int8", "int16", "int32")

# builtin operator -> input dtypes TFLM's kernel runs
BUILTIN: dict[str, tuple[str, ...]] = {
    "ABS": F816, "ADD": F81632, "ADD_N": F8, "ARG_MAX": F8, "ARG_MIN": F8,
    "ASSIGN_VARIABLE": ANY, "AVERAGE_POOL_2D": F816, "BATCH_MATMUL": F816,
    "BATCH_TO_SPACE_ND": F8, "BROADCAST_ARGS": ("int32", "int64"), "BROADCAST_TO": ANY,
    "CALL_ONCE": ANY, "CAST": ("bool", "float32", "int8", "int16", "int32", "uint32"),
    "CEIL": F, "CONCATENATION": ("bool", "float32", "int8", "int16", "int32", "int64"),
    "CONV_2D": F816, "COS": F, "CUMSUM": F8, "DEPTH_TO_SPACE": F8, "DEPTHWISE_CONV_2D": F816,
    "DEQUANTIZE": ("int8", "int16", "uint8"), "DIV": ("float32", "int8", "int32"),
    "DYNAMIC_UPDATE_SLICE": F81632, "ELU": F8, "EMBEDDING_LOOKUP": F8,
    "EQUAL": ("bool", "float32", "int8", "int32", "int64"), "EXP": F,
    "EXPAND_DIMS": F816, "FILL": ("float32", "int8", "int32"), "FLOOR": F, "FLOOR_DIV": F,
    "FLOOR_MOD": F, "FULLY_CONNECTED": F816, "GATHER": F8, "GATHER_ND": F8,
    "GREATER": ("float32", "int8", "int16", "int32", "int64"),
    "GREATER_EQUAL": ("float32", "int8", "int32", "int64"), "HARD_SWISH": F8, "IF": ANY,
    "L2_NORMALIZATION": F8, "L2_POOL_2D": F, "LEAKY_RELU": F816,
    "LESS": ("float32", "int8", "int32", "int64"), "LESS_EQUAL": ("float32", "int8", "int32", "int64"),
    "LOG": F, "LOGICAL_AND": ("bool",), "LOGICAL_NOT": ("bool",), "LOGICAL_OR": ("bool",),
    "LOGISTIC": F816, "LOG_SOFTMAX": F8,
    "MAXIMUM": ("float32", "int8", "int16", "int32", "int64"), "MAX_POOL_2D": F816,
    "MEAN": F816, "MINIMUM": ("float32", "int8", "int16", "int32", "int64"), "MIRROR_PAD": F8,
    "MUL": F81632, "NEG": F, "NOT_EQUAL": ("bool", "float32", "int8", "int32", "int64"),
    "PACK": ("float32", "int8", "int16", "int32", "int64"), "PAD": F81632, "PADV2": F81632,
    "PRELU": F816, "QUANTIZE": ("float32", "int8", "int16", "int32", "uint8"),
    "READ_VARIABLE": ANY, "REDUCE_ALL": ("bool",), "REDUCE_MAX": F8, "REDUCE_MIN": F8,
    "RELU": F816, "RELU6": F816, "RESHAPE": ANY, "RESIZE_BILINEAR": F8,
    "RESIZE_NEAREST_NEIGHBOR": F816,
    "REVERSE_V2": ("bool", "float32", "int8", "int16", "int32", "int64", "uint8"),
    "ROUND": F, "RSQRT": F8, "SELECT_V2": F816, "SHAPE": ANY, "SIN": F,
    "SLICE": ("bool", "float32", "int8", "int16", "int32", "int64"), "SOFTMAX": F816,
    "SPACE_TO_BATCH_ND": F8, "SPACE_TO_DEPTH": F8, "SPLIT": F81632, "SPLIT_V": F81632,
    "SQRT": F, "SQUARE": F, "SQUARED_DIFFERENCE": F81632, "SQUEEZE": ANY,
    "STRIDED_SLICE": ("bool", "float32", "int8", "int16", "int32"), "SUB": F81632, "SUM": F816,
    "SVDF": F8, "TANH": F816, "TRANSPOSE": F816, "TRANSPOSE_CONV": F816,
    "UNIDIRECTIONAL_SEQUENCE_LSTM": F816, "UNPACK": F81632, "VAR_HANDLE": ANY, "WHILE": ANY,
    "ZEROS_LIKE": ("float32", "int8", "int32", "int64"),
}

# input dtype -> output dtypes, where they differ from the input's
OUTPUTS: dict[str, dict[str, tuple[str, ...]]] = {
    "QUANTIZE": {"float32": ("int8", "int16"), "int8": ("int8", "int16", "int32", "uint8"),
                 "int16": ("int8", "int16", "int32"), "int32": ("int8", "int16"),
                 "uint8": ("int8",)},
    "DEQUANTIZE": {d: ("float32",) for d in ("int8", "int16", "uint8")},
    "CAST": {d: ("bool", "float32", "int8", "int16", "int32", "uint32")
             for d in ("bool", "float32", "int8", "int16", "int32", "uint32")},
    "EMBEDDING_LOOKUP": {"float32": ("float32",), "int8": ("float32", "int8")},
    "SHAPE": {d: ("int32",) for d in ANY},
    "SOFTMAX": {"float32": ("float32",), "int8": ("int8", "int16"), "int16": ("int16",)},
    "TFLM_DECODE": {"uint8": ("bool", "float32", "int8", "int16", "int32", "int64")},
}

# custom operators TFLM registers (the resolver's AddCustom names) -> input dtypes
CUSTOM: dict[str, tuple[str, ...]] = {
    "CIRCULAR_BUFFER": ("int8",),
    "TFLite_Detection_PostProcess": F,
    "ETHOSU": ("int8",),                 # a command stream for the Ethos-U NPU
    "TFLM_DECODE": ("uint8",),           # compressed constants (look-up table, Huffman, prune)
    "SignalDelay": ("int16",), "SignalEnergy": ("int16",), "SignalFftAutoScale": ("int16",),
    "SignalFilterBank": ("uint32",), "SignalFilterBankLog": ("uint32",),
    "SignalFilterBankSpectralSubtraction": ("uint32",), "SignalFilterBankSquareRoot": ("uint64",),
    "SignalFramer": ("int16",), "SignalIrfft": ("int16", "int32", "float32"),
    "SignalOverlapAdd": ("int16", "float32"), "SignalPCAN": ("uint32",),
    "SignalRfft": ("int16", "int32", "float32"), "SignalStacker": ("int16",),
    "SignalWindow": ("int16",),
}

TFLM_COUNT = len(BUILTIN) + len(CUSTOM)   # the resolver's Add* methods

# (op, dtype) TFLM registers that eerie-c leaves out on purpose, and why
NOT_TAKEN = {
    ("GREATER", "int16"): "TFLM computes no scaling for int16 GREATER (its Prepare sets the "
                          "multipliers for int8 only), so its results do not follow its own "
                          "quantized comparison",
    ("ETHOSU", "int8"): "a command stream for the Ethos-U NPU's own driver, not a computation",
}

# supported ops whose TFLM options are not all supported, and which
LIMITS = {
    "CIRCULAR_BUFFER": "a period of 1 only (TFLM stops the invoke early between periods)",
    "TFLite_Detection_PostProcess": "fast NMS with max_classes_per_detection 1 only (TFLM "
                                    "writes past its outputs with more)",
    "TFLM_DECODE": "look-up-table compression only (no Huffman, no pruning)",
}


def _pairs(kind: str, dtypes, outputs: dict) -> set[tuple[str, str]]:
    """(input dtype, output dtype) pairs an op runs."""
    return {(d, o) for d in dtypes for o in outputs.get(d, (d,))}


def compare() -> dict:
    """TFLM's registrations against the registry: per op, whether every TFLM dtype (and output
    dtype) is supported here, which are missing, and what eerie-c runs that TFLM does not."""
    from .kernels import load_all
    reg = load_all()
    from .cli import FRONTEND_OPS
    rows = []
    for kind, dtypes in sorted(BUILTIN.items()) + sorted(CUSTOM.items()):
        info = reg.get(kind)
        custom = kind in CUSTOM
        if kind in FRONTEND_OPS:   # taken apart by the frontend, whatever the dtypes
            rows.append(dict(op=kind, custom=custom, status="supported", missing=[], extra=[]))
            continue
        want = _pairs(kind, dtypes, OUTPUTS.get(kind, {}))
        have = set() if info is None else _pairs(kind, info.dtypes, info.outputs)
        missing = sorted(want - have)
        extra = sorted(have - want)
        status = "missing" if info is None else ("partial" if missing else "supported")
        rows.append(dict(op=kind, custom=custom, status=status, missing=missing, extra=extra))
    tflm = set(BUILTIN) | set(CUSTOM)
    extra_ops = sorted(k for k in reg if k not in tflm and not _internal(k))
    return dict(rows=rows, extra_ops=extra_ops)


def _internal(kind: str) -> bool:
    import tflite
    from .frontend.tflite import KNOWN_CUSTOM
    return kind not in {n for n in dir(tflite.BuiltinOperator) if n.isupper()} | set(KNOWN_CUSTOM)


def _pair_text(kind: str, pairs) -> str:
    if kind in OUTPUTS:
        return ", ".join(f"{a}->{b}" for a, b in pairs)
    return ", ".join(a for a, _ in pairs)


def _why(row) -> str:
    why = [NOT_TAKEN[(row["op"], a)] for a, _ in row["missing"] if (row["op"], a) in NOT_TAKEN]
    return f" (not taken on purpose: {why[0]})" if why else ""


def vs_tflm_text() -> str:
    """The report `eerie-c ops --vs-tflm` prints."""
    c = compare()
    rows = c["rows"]
    by = {s: [r for r in rows if r["status"] == s] for s in ("supported", "partial", "missing")}
    n_b = sum(1 for r in rows if not r["custom"])
    lines = [f"TFLM registers {len(rows)} operators ({n_b} builtin, {len(rows) - n_b} custom).",
             f"supported here: {len(by['supported'])} (every dtype TFLM runs)",
             f"partly here:    {len(by['partial'])} (some of TFLM's dtypes missing)",
             f"missing here:   {len(by['missing'])}",
             f"extra here:     {len(c['extra_ops'])} operators TFLM does not register, "
             f"{sum(1 for r in rows if r['extra'])} with dtypes TFLM does not run", ""]
    lines.append(f"Supported ({len(by['supported'])}): " + ", ".join(r["op"] for r in by["supported"]))
    lines += ["Supported with limits:"] + [f"  {k}: {v}" for k, v in sorted(LIMITS.items())]
    lines.append("")
    lines.append(f"Partly supported ({len(by['partial'])}), the dtypes missing here:")
    lines += [f"  {r['op']}: {_pair_text(r['op'], r['missing'])}{_why(r)}" for r in by["partial"]]
    lines.append("")
    lines.append(f"Missing ({len(by['missing'])}):")
    lines += [f"  {r['op']}{' (custom)' if r['custom'] else ''}: {_pair_text(r['op'], r['missing'])}"
              f"{_why(r)}" for r in by["missing"]]
    lines.append("")
    lines.append(f"Extra here ({len(c['extra_ops'])} operators): " + (", ".join(c["extra_ops"]) or "-"))
    lines.append("Dtypes here that TFLM does not run:")
    lines += [f"  {r['op']}: {_pair_text(r['op'], r['extra'])}" for r in rows if r["extra"]]
    return "\n".join(lines)
