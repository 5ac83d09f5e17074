"""Render the model's C files from templates/ with jinja2.

Deterministic by construction: everything iterates in op / tensor order, numbers are
printed by fixed rules, no timestamps or absolute paths reach the output.
"""
from __future__ import annotations

import hashlib
import re

import numpy as np

from ..version import __version__
from ..errors import CompilerBug
from ..ir import DTYPE_C, DTYPE_NP, Graph
from ..kernels import Const, Lowered, c_comment
from ..plan import Plan
from ..templating import c_float, render  # noqa: F401 (render, c_float: for callers of emit)

def c_int(v: int, ctype: str) -> str:
    v = int(v)
    if ctype in ("int32_t", "int64_t") and v == -(2 ** 31) and ctype == "int32_t":
        return "(-2147483647 - 1)"
    if ctype == "int64_t":
        return f"INT64_C({v})"
    if ctype == "uint32_t":
        return f"{v}u"
    if ctype == "uint64_t":
        return f"UINT64_C({v})"
    return str(v)


def c_array_items(data: np.ndarray, ctype: str, per_line: int = 16) -> str:
    flat = np.asarray(data).reshape(-1)
    if ctype == "float":
        items = [c_float(x) for x in flat.tolist()]
    elif flat.dtype == np.bool_:
        items = [str(int(x)) for x in flat.tolist()]
    elif flat.dtype.kind in "iu" and ctype not in ("int64_t", "uint32_t", "uint64_t") \
            and not (ctype == "int32_t" and flat.size and int(flat.min()) == -(2 ** 31)):
        items = list(map(str, flat.tolist()))   # c_int's text for these, without a call per item
    else:
        items = [c_int(x, ctype) for x in flat.tolist()]
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return ",\n    ".join(lines)


def _ptr(plan: Plan, g: Graph, tid: str, const: bool, name: str) -> str:
    t = g.t(tid)
    p = plan.tensors[tid]
    qual = "const " if const else ""
    if p.base == "input":
        return f"input{p.index}" if const else f"({t.ctype} *)input{p.index}"
    if p.base == "output":
        return f"output{p.index}"
    if p.base == "state":
        return f"{name}_state{p.index}"
    return f"({qual}{t.ctype} *)({name}_arena + {p.offset})"


def io_info(g: Graph, tids: list[str]) -> list[dict]:
    out = []
    for tid in tids:
        t = g.t(tid)
        out.append({
            "ctype": DTYPE_C[t.dtype], "dtype": t.dtype, "shape": list(t.shape) or [1],
            "elements": t.size, "bytes": t.nbytes, "label": t.label,
            "scale": c_float(t.scale) if t.quant is not None else None,
            "zero_point": t.zero_point if t.quant is not None else None,
        })
    return out


def state_info(g: Graph, plan: Plan) -> list[dict]:
    """Static storage of the variable (state) tensors, in NAME_stateK order. `fill` is the
    byte every element starts with when the initial contents are one repeated byte (reset by
    memset), else None (reset by memcpy from a const copy of the initial contents)."""
    out = []
    for tid, p in sorted(plan.state.items(), key=lambda kv: kv[1].index):
        t = g.t(tid)
        init = np.zeros(t.shape, DTYPE_NP[t.dtype]) if t.init is None else np.asarray(t.init)
        raw = np.ascontiguousarray(init).tobytes()
        fill = raw[0] if raw and raw.count(raw[:1]) == len(raw) else (0 if not raw else None)
        out.append({"index": p.index, "ctype": t.ctype, "elements": t.size, "bytes": t.nbytes,
                    "label": c_comment(t.label), "shape": "x".join(map(str, t.shape)) or "1",
                    "fill": fill, "data_text": None if fill == 0 else c_array_items(init, t.ctype)})
    return out


# x86-64 (System V) passes six integer or pointer arguments in registers and, with gcc's
# default -mno-accumulate-outgoing-args, pushes the rest around the call: -fstack-usage then
# calls the caller's frame "dynamic,bounded", which the stack proof rejects. Small models
# never show it (every kernel is inlined into NAME_invoke), but once NAME_invoke outgrows gcc's
# inlining limits (an unrolled RNN of a few dozen steps: UNPACK / PACK of one pointer per
# step) such calls stay out of line. So no call passes more than this many arguments, on any
# target: a kernel that would take more binds the arena, state and scratch pointers (constant
# addresses) inside itself, and if the rest (the model's input / output pointers) are still
# too many, they arrive in one table built in the caller's frame.
REGISTER_ARGS = 6


# The local of NAME_invoke (and NAME_input_rows) that layer calls reach the arena through:
# EERIE_ARENA_BASE in templates/model.c.j2 says why its value is hidden from gcc.
ARENA_BASE = "eerie_arena"


def through_base(c_text: str, name: str) -> str:
    """A call's arguments with the arena's constant address replaced by the opaque base."""
    return c_text.replace(f"{name}_arena + ", f"{ARENA_BASE} + ")


def icf_signature(fn_name: str, body: str, consts: dict[str, Const]) -> str:
    """What gcc's identical code folding compares, roughly: the body without comments or
    layout, the function's own name left out, and each of its constant tables by content
    (IPA-ICF merges read-only tables with equal contents, whatever their names)."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", body, flags=re.S)
    text = " ".join(text.split())

    def table(m: re.Match) -> str:
        c = consts[m.group(0)]
        data = np.ascontiguousarray(c.data)
        return "@" + hashlib.sha1(c.ctype.encode() + data.tobytes()).hexdigest()[:16]
    if consts:
        text = re.sub(r"\b(" + "|".join(map(re.escape, sorted(consts, key=len, reverse=True))) + r")\b",
                      table, text)
    return text.replace(fn_name, "@fn")


def keeps_constant_addresses(lowered: list[Lowered], consts: list[Const]) -> set[str]:
    """The patch stages whose calls may pass the arena's constant addresses: gcc keeps them
    out of line with one caller each, and the constant addresses are worth 10-25% of their
    instructions (it rematerializes an address instead of keeping a pointer live through the
    band loop). The opaque base exists against IPA-ICF merging twin functions and IPA-CP then
    deleting calls to the clones; a stage with no twin in the file cannot be merged, so only
    stages with a twin (a model that runs the same weights twice) go through the base."""
    stages = [low for low in lowered if low.control is None and low.op is not None
              and low.op.kind == "PATCH_STAGE"]
    if not stages:
        return set()
    by_name = {c.cname: c for c in consts}
    signatures = {}
    for low in lowered:
        if low.control is None:
            own = {n: c for n, c in by_name.items() if n.startswith(low.fn_name + "_")}
            signatures[low.fn_name] = icf_signature(low.fn_name, low.body, own)
    counts: dict[str, int] = {}
    for s in signatures.values():
        counts[s] = counts.get(s, 0) + 1
    return {low.fn_name for low in stages if counts[signatures[low.fn_name]] == 1}


def call_signature(g: Graph, plan: Plan, low: Lowered, name: str,
                   bind: bool = True) -> tuple[list[str], list[str], list[str]]:
    """-> (the kernel's parameters, the call's arguments, the lines that open the kernel's
    body binding what is not passed). bind=False: every argument passed (the row-band stage,
    whose call model_rows.c.j2 writes itself)."""
    tensors = [(f"const {g.t(t).ctype} *in{k}", _ptr(plan, g, t, True, name), t)
               for k, t in enumerate(low.inputs)]
    tensors += [(f"{g.t(t).ctype} *out{k}", _ptr(plan, g, t, False, name), t)
                for k, t in enumerate(low.outputs)]
    tensors += [(f"{g.t(t).ctype} *state{k}", _ptr(plan, g, t, False, name), t)
                for k, t in enumerate(low.updates)]
    if low.scratch_bytes:
        tensors.append(("uint8_t *scratch", f"{name}_arena + {plan.scratch[low.fn_name].offset}", None))
    ints = [(f"int {p}", p) for p in low.int_params]
    if not bind or len(tensors) + len(ints) <= REGISTER_ARGS:
        return [d for d, _, _ in tensors] + [d for d, _ in ints], \
            [a for _, a, _ in tensors] + [a for _, a in ints], []
    fixed = [(d, a) for d, a, t in tensors if t is None or plan.tensors[t].base in ("arena", "state")]
    passed = [(d, a) for d, a, t in tensors if t is not None and plan.tensors[t].base not in ("arena", "state")]
    bound = [f"/* {len(fixed)} of its {len(tensors)} buffers at fixed addresses, set here rather "
             f"than passed: past {REGISTER_ARGS} arguments a call may push them on the stack */\n"] if fixed else []
    bound += [f"{d} = {a};\n" for d, a in fixed]
    if len(passed) + len(ints) > REGISTER_ARGS:
        bound.append("/* the caller's input / output buffers, from one table */\n")
        bound += [f"{d} = ({d.rsplit('*', 1)[0].strip()} *)io[{k}];\n" for k, (d, _) in enumerate(passed)]
        table = ", ".join(a for _, a in passed)
        passed = [("const void *const *io", f"(const void *const[{len(passed)}]){{{table}}}")]
    return [d for d, _ in passed] + [d for d, _ in ints], [a for _, a in passed] + [a for _, a in ints], bound


def emit_model(g: Graph, lowered: list[Lowered], consts: list[Const], plan: Plan,
               name: str, target: str, source: str, cflags: str, rows: bool = False) -> dict[str, str]:
    helpers = []
    for low in lowered:
        for h in sorted(low.helpers):
            if h not in helpers:
                helpers.append(h)
    # Helpers may depend on others: keep the order requant first.
    helpers.sort(key=lambda h: (h != "requant", h))
    functions, calls, declares = [], [], []
    constant_ok = keeps_constant_addresses(lowered, consts)
    depth = 0
    for low in lowered:
        if low.control is not None:
            # Control flow: statements of NAME_invoke itself (if / else / bounded for).
            before, lines, after = low.control
            depth += before
            lines = list(lines)
            for k, tid in enumerate(low.inputs):
                ptr = _ptr(plan, g, tid, True, name)
                lines = [ln.replace(f"{{in{k}}}", ptr) for ln in lines]
            calls.append({"raw": ["    " * depth + through_base(ln, name) for ln in lines]})
            depth += after
            declares += [d for d in low.declares if d not in declares]
            continue
        params, args, bound = call_signature(g, plan, low, name, bind=not (rows and low is lowered[0]))
        op = low.op
        shapes = " + ".join("x".join(map(str, g.t(i).shape)) for i in low.inputs) or "-"
        out_shapes = " + ".join("x".join(map(str, g.t(o).shape)) for o in low.outputs)
        functions.append({"name": low.fn_name, "params": ", ".join(params) or "void",
                          "body": "".join(bound) + low.body.rstrip("\n"), "comment": low.comment,
                          "shapes": f"{shapes} -> {out_shapes}", "macs": low.macs,
                          "noinline": low.noinline})
        args_text = ", ".join(args)
        if low.fn_name not in constant_ok:
            args_text = through_base(args_text, name)
        calls.append({"name": low.fn_name, "args": args_text, "index": op.index,
                      "indent": "    " * depth, "raw": None})
    rows_ctx = rows_info(g, lowered, plan, calls, name) if rows else None
    ctx = {
        "rows": rows_ctx,
        "version": __version__, "name": name, "NAME": name.upper(), "target": target,
        "source": c_comment(source), "graph": g, "helpers": helpers, "functions": functions, "calls": calls, "declares": declares,
        "consts": [{"name": c.cname, "ctype": c.ctype, "size": int(np.asarray(c.data).size),
                    "data_text": c_array_items(c.data, c.ctype), "comment": c.comment} for c in consts],
        "arena_bytes": plan.arena_bytes, "arena_align": plan.align,
        "state": state_info(g, plan), "state_bytes": plan.state_bytes,
        "inputs": io_info(g, g.inputs), "outputs": io_info(g, g.outputs), "cflags": cflags,
        # arena offset of each input planned in the arena (NAME_inputK_buffer()), else None
        "input_slots": [plan.tensors[t].offset if plan.tensors[t].base == "arena" else None
                        for t in g.inputs],
        "batch_max": getattr(g, "dynamic_batch", None),   # torch Dim(max=N) on dim 0
        "dyn": getattr(g, "dynamic_dims", None),   # torch dynamic sizes (frontend/torch/dynamic.py)
        # the maximum trip counts of the bounded loops: NAME_invoke returns 1 past one of them
        "loop_bounds": sorted({int(op.attrs["max_iterations"]) for op in g.ops
                               if op.kind == "CF_BREAK_UNLESS"}),
    }
    return {
        f"{name}.c": render("model.c.j2", **ctx),
        f"{name}.h": render("model.h.j2", **ctx),
        f"{name}.mk": render("model.mk.j2", **ctx),
        f"{name}.cmake": render("model.cmake.j2", **ctx, **cmake_flags(cflags), needs_libm=True),
    }


def rows_info(g: Graph, lowered: list[Lowered], plan: Plan, calls: list[dict], name: str) -> dict:
    """What templates/model_rows.c.j2 needs for row-band input (patch/rows.py): the stage
    (step 0) is called once per grid row from NAME_input_rows, the other calls once the
    image's last row has arrived."""
    low = lowered[0]
    stage = low.op.attrs["patch"]
    r = stage.rows
    if any(c.get("raw") for c in calls):
        raise CompilerBug("row-band input with control flow in NAME_invoke")
    scratch = plan.scratch[low.fn_name].offset
    # The row-band stage keeps the arena's constant address: it is one function, called from
    # one place (nothing for IPA-ICF to merge), and its tile loops run measurably faster with
    # the address known (vww's cached row stage on mps2-an386 measured 14.8% more instructions
    # than layer by layer through the base pointer, against 8.1% estimated; within it again so).
    ring = f"{name}_arena + {scratch}"
    outs = [_ptr(plan, g, tid, False, name) for tid in low.outputs]
    return {"stage": low.fn_name, "ring": ring, "ring_rows": r.ring_rows, "ring_bytes": r.ring_bytes,
            "height": r.height, "row_bytes": r.row_bytes, "grid_rows": len(r.spans),
            "spans": ", ".join(f"{a}, {b}" for a, b in r.spans), "image_bytes": r.image_bytes,
            "stage_args": ", ".join([f"(const int8_t *)({ring})"] + outs + [ring]),
            "rest": calls[1:]}


# Flags that fix the core and calling convention: whatever links the model must share them.
ABI_FLAG_PREFIXES = ("-mcpu=", "-march=", "-mthumb", "-mfloat-abi=", "-mfpu=", "-mabi=")


def cmake_flags(cflags: str) -> dict:
    """The target's flags as CMake lists: all of them (the model's own compile) and the ABI
    ones (INTERFACE options for what links it)."""
    import shlex
    flags = shlex.split(cflags)
    return {"cflags_list": flags, "abi_flags": [f for f in flags if f.startswith(ABI_FLAG_PREFIXES)]}
