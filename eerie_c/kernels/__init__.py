"""Kernel registry: one module per op family, each printing its own C.

A kernel module registers a lowering function per op kind with `@kernel(KIND, dtypes=...)`.
The lowering function receives the op, the graph and a `LowerCtx`, and returns a `Lowered`:
the body of a C function specialised to the op's shapes, plus the constants it needs (which
the context names and places in flash) and the helper snippets it uses.

The emitter wraps the body in `static inline void NAME(const T *in0, ..., T *out0, ...)`:
parameters are `in0..inN` for the op's activation inputs (constants are referenced as globals
by the names `ctx.const()` returns) and `out0..outM` for its outputs, plus `scratch` when the
kernel asks for scratch bytes. The dtype key of an op is the dtype of its first input.

Variable (state) tensors (`Tensor.variable`: TFLite is_variable, contents persist across
invocations, e.g. SVDF's activation state, LSTM's hidden and cell state) live in their own
static storage, not in the arena. A kernel that only READS one lists it in `inputs` as usual
(a `const T *inK`). A kernel that WRITES one (reads and updates it in place) lists it in
`Lowered.updates` instead: those come as non-const `T *state0, T *state1, ...` parameters
after the outputs (and before `scratch`). The initial contents are restored by the generated
NAME_reset_state().
"""
from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..errors import EerieError
from ..ir import DTYPE_C, Graph, Op, Tensor
from ..templating import c_comment  # noqa: F401 (kernels import it from here)


@dataclass
class Const:
    cname: str
    ctype: str
    data: np.ndarray       # flattened on emission
    comment: str = ""


@dataclass
class Lowered:
    body: str                                  # C statements of the function body
    inputs: list[str]                          # activation tensor ids -> in0, in1, ...
    outputs: list[str]                         # tensor ids -> out0, out1, ...
    helpers: set[str] = field(default_factory=set)   # names of templates/helpers/*.c.j2
    scratch_bytes: int = 0
    macs: int = 0
    comment: str = ""                          # one line describing the op for the C file
    fn_name: str = ""                          # filled in by the lowering driver
    op: Op | None = None
    const_bytes: int = 0                       # flash bytes of the constants it added (driver)
    # The kernel stays correct when out0 shares bytes with in0 (it reads every input byte
    # before it writes an output byte over it), in one of two layouts: True or "start",
    # out0 starts at in0's first byte (out0 no larger than in0); "end", out0 ends at in0's
    # last byte (in0 sits at the tail of a larger out0). The planner may then place them so
    # when in0 is read by no later op (plan/lifetimes.py); plan/proof.py checks that rule.
    inplace: bool | str = False
    # Emitted out of line (noinline) rather than inlined into NAME_invoke: the Helium
    # convolution's inline assembly needs all 8 even registers, which gcc 12 could not always
    # find inside a large NAME_invoke ("impossible constraints"); in its own function it can
    noinline: bool = False
    # Control flow (IF / WHILE markers): no function; the emitter writes these statements
    # into NAME_invoke itself. (depth change before, lines with {in0}.. for input pointers,
    # depth change after); `declares` names int locals of NAME_invoke (loop trip counters).
    control: tuple[int, list[str], int] | None = None
    declares: list[str] = field(default_factory=list)
    # Variable (state) tensor ids the kernel reads AND writes in place -> state0, state1, ...
    # (non-const parameters after the outputs); see the module docstring.
    updates: list[str] = field(default_factory=list)
    # What the kernel chose for this layer under --optimize and why (report.md's per-layer
    # table): e.g. the fully connected weight format.
    choice: str = ""
    # Figures of the kernel's work beyond MACs that the instruction estimate reads
    # (estimate.py), copied into report.json's op: a pool's vector loads and stores ("pool").
    work: dict = field(default_factory=dict)
    # Extra `int` parameters after the scratch pointer (a row-band patch stage's grid row and
    # first ring row, patch/kernel.py); the emitter passes them where it calls the function.
    int_params: list[str] = field(default_factory=list)


@dataclass
class KernelInfo:
    kind: str
    dtypes: tuple[str, ...]
    lower: Callable[[Op, Graph, "LowerCtx"], Lowered]
    family: str
    key_input: int = 0          # which input's dtype is the op's dtype key (SELECT: 1)
    # dtype -> lowering function when several modules share one op kind (see _merge_kernel)
    by_dtype: dict = field(default_factory=dict)
    # dtype key -> the quantization scheme (a SCHEMES key) it stands for, where the key alone
    # does not say what is supported: CONV_2D keyed int16 is "16x8" (int8 weights only)
    schemes: dict = field(default_factory=dict)
    # dtype key -> the output dtypes supported with it, for ops whose output dtype is not
    # their input's (QUANTIZE, DEQUANTIZE, CAST, SOFTMAX int8); a key missing here: the same
    # dtype out. Read by `eerie-c ops`; the kernels that declare it enforce the same table.
    outputs: dict = field(default_factory=dict)


REGISTRY: dict[str, KernelInfo] = {}
# The op the memory planner puts in place of a prefix it runs tile by tile (patch/stage.py);
# not a model operator, so not in REGISTRY.
PATCH_STAGE = "PATCH_STAGE"

# Quantization schemes a dtype key can stand for (KernelInfo.schemes), explained by `eerie-c ops`.
SCHEMES = {
    "16x8": "int16 activations (zero point 0) with int8 symmetric weights, TFLM's 16x8 "
            "quantization (int16 weights are not supported)",
}

CTYPE_SIZE = {"int8_t": 1, "uint8_t": 1, "int16_t": 2, "uint16_t": 2, "int32_t": 4, "uint32_t": 4,
              "int64_t": 8, "uint64_t": 8, "float": 4}


def const_bytes(c: Const) -> int:
    """Flash bytes of a constant array as emitted in C."""
    return int(np.asarray(c.data).size) * CTYPE_SIZE[c.ctype]


def kernel(kind: str, dtypes: tuple[str, ...], key_input: int = 0, schemes: dict | None = None,
           outputs: dict | None = None):
    """Register `fn` as the lowering of `kind` for ops whose dtype key is one of `dtypes`;
    `schemes` and `outputs` describe what a dtype key means (see KernelInfo)."""
    schemes, outputs = dict(schemes or {}), {k: tuple(v) for k, v in (outputs or {}).items()}
    if not set(schemes) <= set(dtypes) or not set(outputs) <= set(dtypes) \
            or not set(schemes.values()) <= set(SCHEMES):
        raise RuntimeError(f"kernel {kind}: schemes / outputs for dtypes it does not register")

    def register(fn):
        info = KernelInfo(kind, tuple(dtypes), fn, fn.__module__.rsplit(".", 1)[-1], key_input,
                          schemes=schemes, outputs=outputs)
        old = REGISTRY.get(kind)
        if old is not None and old.family != info.family:
            info = _merge_kernel(old, info)
        REGISTRY[kind] = info
        return fn
    return register


def _merge_kernel(old: KernelInfo, new: KernelInfo) -> KernelInfo:
    """A second module adds dtypes to an op kind: one entry that dispatches on the op's dtype
    key (a (kind, dtype) pair still has exactly one lowering)."""
    clash = set(old.dtypes) & set(new.dtypes)
    if clash or old.key_input != new.key_input:
        raise RuntimeError(f"kernel {new.kind}: modules {old.family} and {new.family} both "
                           f"register {sorted(clash)} (or disagree on key_input)")
    table = dict(old.by_dtype) or {d: old.lower for d in old.dtypes}
    table.update({d: new.lower for d in new.dtypes})

    def lower(op, g, ctx):
        return table[op_dtype(op, g)](op, g, ctx)

    return KernelInfo(new.kind, old.dtypes + new.dtypes, lower, old.family, old.key_input, table,
                      schemes={**old.schemes, **new.schemes}, outputs={**old.outputs, **new.outputs})


def load_all():
    """Import every kernel module so their @kernel registrations run."""
    for mod in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}")
    return REGISTRY


def c_ident(text: str, limit: int = 40) -> str:
    """A readable C identifier fragment from any model-supplied name."""
    first = text.split(";")[0]
    parts = [p for p in first.split("/") if p and not re.fullmatch(r"(functional|model|sequential)(_\d+)?", p)]
    s = re.sub(r"[^0-9a-zA-Z]+", "_", "_".join(parts[-2:]) if parts else "").strip("_").lower()
    return s[:limit].strip("_") or "x"


class LowerCtx:
    """Names and collects the constants of one model; dedups identical arrays."""

    def __init__(self, graph: Graph, target: str = "host", optimize: str = "balanced"):
        self.graph = graph
        self.target = target
        self.optimize = optimize   # --optimize: balanced, speed or size (OPTIMIZE)
        self.consts: list[Const] = []
        self._by_key: dict[tuple, str] = {}
        self._names: set[str] = set()
        self.layer = "x"
        # --optimize size (kernels/_conv_pack.py): bytes the layers' compact formats save,
        # per shared helper function they need, and the helpers lower_graph turned off
        # because their savings do not pay for their code
        self.size_saved: dict[str, int] = {}
        self.size_off: frozenset[str] = frozenset()
        # ids of the 4-bit tensors (Tensor.int4) the kernels emitted packed (_int4.py)
        self.packed4: set[str] = set()

    def const(self, data: np.ndarray, ctype: str, hint: str, comment: str = "") -> str:
        data = np.ascontiguousarray(data)
        key = (ctype, data.shape, data.dtype.str, data.tobytes())
        if key in self._by_key:
            return self._by_key[key]
        base = f"{self.layer}_{hint}"
        name, n = base, 1
        while name in self._names:
            n += 1
            name = f"{base}_{n}"
        self._names.add(name)
        self._by_key[key] = name
        self.consts.append(Const(name, ctype, data, comment))
        return name

    def checkpoint(self) -> tuple:
        """What rollback needs to forget the constants made after this call (a kernel that
        tries one lowering and then takes another)."""
        return len(self.consts), dict(self._by_key), set(self._names), dict(self.size_saved)

    def rollback(self, cp: tuple):
        n, self._by_key, self._names, self.size_saved = cp[0], dict(cp[1]), set(cp[2]), dict(cp[3])
        del self.consts[n:]

    def tensor_const(self, t: Tensor, hint: str) -> str:
        if t.int4:   # 4-bit weights are emitted packed (_int4.packed_weights), never as int8
            raise EerieError(f"internal error: {t.label or t.id}: int4 weights emitted as int8")
        return self.const(t.data, DTYPE_C[t.dtype], hint, c_comment(t.label))


def op_dtype(op: Op, g: Graph) -> str:
    info = REGISTRY.get(op.kind)
    if info is not None and info.key_input and info.key_input < len(op.inputs) \
            and op.inputs[info.key_input] is not None:
        return g.t(op.inputs[info.key_input]).dtype
    first = next((i for i in op.inputs if i is not None), None)
    return g.t(first).dtype if first is not None else g.t(op.outputs[0]).dtype


def _where(op) -> str:
    """An op's index as the user can find it: TFLite numbers ops per subgraph."""
    return str(op.index) if not op.subgraph else f"{op.index} of subgraph {op.subgraph}"


def _items(problems: dict[str, list[str]]) -> str:
    return "; ".join(
        f"{k} x{len(v)} (op{'s' if len(v) > 1 else ''} {', '.join(v[:6])}{', ...' if len(v) > 6 else ''})"
        for k, v in sorted(problems.items()))


def check_supported(g: Graph):
    """One error line naming every unsupported (op, dtype) and every unsupported quantization
    scheme (op kind, reason), each with its count and op indices."""
    from .quant_schemes import quant_problem
    from ._int4 import int4_problem
    load_all()
    problems: dict[str, list[str]] = {}
    quant: dict[str, list[str]] = {}
    for op in g.ops:
        if op.kind == PATCH_STAGE:
            continue   # made by the planner from supported ops (patch/stage.py)
        info = REGISTRY.get(op.kind)
        dt = op_dtype(op, g)
        if info is None or dt not in info.dtypes:
            problems.setdefault(f"{op.kind} with {dt} tensors", []).append(_where(op))
        elif (why := quant_problem(op, g) or int4_problem(op, g)) is not None:
            quant.setdefault(f"{op.kind} with {why}", []).append(_where(op))
    parts = []
    if problems:
        parts.append(f"unsupported operator: {_items(problems)}")
    if quant:
        parts.append(f"unsupported quantization: {_items(quant)}")
    if parts:
        raise EerieError("; ".join(parts))


# --optimize: what kernels trade per layer between instructions and flash (kernels that offer
# a choice read ctx.optimize: the DSP convolutions' and fully connected layers' weight formats)
OPTIMIZE = ("balanced", "speed", "size")


def lower_graph(g: Graph, target: str = "host", special: dict | None = None,
                optimize: str = "balanced") -> tuple[list[Lowered], LowerCtx]:
    """special: op kind -> lowering function for ops that are not model operators (the
    planner's PATCH_STAGE, lowered by patch/kernel.py; passed in so that this module does
    not import the kernel modules that import it). optimize: --optimize (OPTIMIZE)."""
    if optimize not in OPTIMIZE:
        raise EerieError(f"--optimize must be one of {', '.join(OPTIMIZE)} (got {optimize!r})")
    from ._int4 import check_packed, pack_small_int8
    if optimize == "size":   # int8 weights that fit 4 bits, packed losslessly
        g = pack_small_int8(g)
    check_supported(g)
    lowered, ctx = _lower_ops(g, target, special, optimize, frozenset())
    if optimize == "size":
        # a shared unpacking helper is worth its code only if its layers together save more:
        # else lower again without it (kernels/_conv_pack.py)
        from ._conv_pack import unpaid_helpers
        off = unpaid_helpers(ctx.size_saved)
        if off:
            lowered, ctx = _lower_ops(g, target, special, optimize, off)
    check_packed(g, lowered, ctx)
    return lowered, ctx


def _lower_ops(g: Graph, target: str, special: dict | None, optimize: str,
               size_off: frozenset[str]) -> tuple[list[Lowered], LowerCtx]:
    ctx = LowerCtx(g, target, optimize)
    ctx.size_off = size_off
    lowered = []
    used: set[str] = set()
    for op in g.ops:
        if op.attrs.get("alias_of_input"):
            continue   # storage-sharing ops (RESHAPE) cost nothing at run time
        ctx.layer = f"l{op.index}_{c_ident(op.name)}"
        first_const = len(ctx.consts)
        try:
            if op.kind in (special or {}):   # PATCH_STAGE: patch/kernel.py, from the pipeline
                low = special[op.kind](op, g, ctx)
            else:
                low = REGISTRY[op.kind].lower(op, g, ctx)
        except (IndexError, KeyError, TypeError, ValueError, ArithmeticError) as e:
            # Kernels index their operands by TFLite's arity; the validator checks arity
            # for the common ops only, so a hand-edited or corrupted model that gives an op
            # too few operands (or a wrong-shaped constant) ends here: a user error.
            raise EerieError(f"malformed operands for {op.kind} (op {op.index}): "
                             f"{type(e).__name__}: {e}") from None
        low.const_bytes = sum(const_bytes(c) for c in ctx.consts[first_const:])
        name = ctx.layer
        n = 1
        while name in used:
            n += 1
            name = f"{ctx.layer}_{n}"
        used.add(name)
        low.fn_name, low.op = name, op
        # read by the memory planner: False, "start" or "end" (see Lowered.inplace)
        op.attrs["inplace_of_input"] = low.inplace if low.inplace in ("end", "shift") else bool(low.inplace) and "start"
        low.comment = low.comment or f"{op.kind} {c_comment(op.name)}"
        lowered.append(low)
    return lowered, ctx
