"""Programs with dynamic sizes (torch.export `Dim`s): what the report says about them, the
firmware harness that reads each inference's sizes before its inputs, and the input records
that carry those sizes. runner.py's run_dynamic runs them."""
from __future__ import annotations

import numpy as np

from .emit import render
from .emit.c import io_info
from .errors import EerieError
from .ir import DTYPE_NP
from .toolchain.firmware import INPUTS_FILE, OUTPUTS_FILE, firmware_files
from .version import __version__


def note_dynamic(res):
    """The dynamic sizes in the report (JSON-able)."""
    g = res.graph
    batch = getattr(g, "dynamic_batch", None)
    if batch is not None:
        res.report["dynamic_batch"] = {"dim": 0, "max": batch,
                                       "note": "inputs/outputs shapes are per sample"}
    dyn = getattr(g, "dynamic_dims", None)
    if dyn is not None:
        res.report["dynamic_sizes"] = {
            "parameters": [dict(p) for p in dyn["params"]],
            "inputs": [i["shape_text"] for i in dyn["inputs"]],
            "outputs": [o["shape_text"] for o in dyn["outputs"]],
            "note": "code, arena and shapes are for the maximum sizes; NAME_invoke takes the actual sizes"}


def dynamic_firmware(res, brd) -> dict:
    """Firmware project files for a program with dynamic sizes: the usual project with a
    harness that reads the sizes of each inference before its inputs."""
    files = firmware_files(res, brd)
    g = res.graph
    ipt = brd.insns_per_tick
    files["main.c"] = render(
        "firmware/main_dynamic.c.j2", name=res.name, NAME=res.name.upper(),
        version=__version__, board=brd, target=res.target,
        inputs=io_info(g, g.inputs), outputs=io_info(g, g.outputs), inputs_file=INPUTS_FILE,
        outputs_file=OUTPUTS_FILE, ldscript=brd.linker_script.name, ipt_num=ipt.numerator,
        ipt_den=ipt.denominator, ipt_text=f"{float(ipt):g}", dyn=g.dynamic_dims)
    # One record at the maximum sizes (zero inputs), so that `make run` works out of the box.
    sizes = [p["max"] for p in g.dynamic_dims["params"]]
    files[INPUTS_FILE] = record(g, sizes, None)
    return files


def sizes_of(g, arrays, k=0) -> list[int]:
    """The size arguments of one inference, read off its input arrays' shapes."""
    dyn = g.dynamic_dims
    syms = dyn["syms"]
    found = {}
    if len(arrays) != len(dyn["inputs"]):
        raise EerieError(f"inference {k}: {len(arrays)} inputs, the model has {len(dyn['inputs'])}")
    for a, spec in zip(arrays, dyn["inputs"]):
        shape = spec["shape"]
        a = np.asarray(a)
        if a.ndim != len(shape):
            raise EerieError(f"inference {k}: input of shape {list(a.shape)}, the model wants {spec['shape_text']}")
        for d, e in zip(a.shape, shape):
            if isinstance(e, int):
                if d != e:
                    raise EerieError(f"inference {k}: input of shape {list(a.shape)}, the model wants "
                                     f"{spec['shape_text']}")
            elif e in syms:
                if found.setdefault(e, d) != d:
                    raise EerieError(f"inference {k}: inputs disagree on a dynamic size ({found[e]} vs {d})")
    sizes = []
    for p, s in zip(dyn["params"], syms):
        if s not in found:
            raise EerieError(f"inference {k}: the inputs give no size for {p['name']}")
        if not p["min"] <= found[s] <= p["max"]:
            raise EerieError(f"inference {k}: {p['name']} = {found[s]} is outside {p['min']}..{p['max']}")
        sizes.append(int(found[s]))
    return sizes


def shapes_at(specs, syms, sizes):
    vals = dict(zip(syms, sizes))
    return [[e if isinstance(e, int) else int(e.subs(vals)) for e in s["shape"]] for s in specs]


def record(g, sizes, arrays) -> bytes:
    dyn = g.dynamic_dims
    parts = [np.asarray(sizes, np.int32).tobytes()]
    shapes = shapes_at(dyn["inputs"], dyn["syms"], sizes)
    for k, (tid, shape) in enumerate(zip(g.inputs, shapes)):
        dt = np.dtype(DTYPE_NP[g.t(tid).dtype])
        if arrays is None:
            parts.append(np.zeros(shape, dt).tobytes())
        else:
            a = np.ascontiguousarray(arrays[k])
            if a.dtype != dt:
                raise EerieError(f"input {k}: dtype {a.dtype}, the model wants {dt}")
            parts.append(a.tobytes())
    return b"".join(parts)
