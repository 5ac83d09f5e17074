"""The step of `eerie_c.check` when the program does not export: one eager run under a
TorchDispatchMode, listing each aten op computed from the inputs that eerie-c's frontend cannot
lower, so those are known before the export problems are fixed.
"""
from __future__ import annotations

import traceback

from .findings import _Collector, _is_user_file, _quiet


# aten ops an eager run shows that are the control-flow problem itself (a tensor's value taken
# as a Python number), already reported by the export steps.
_EAGER_SKIP = {"_local_scalar_dense", "is_nonzero", "item", "equal"}
# eager op -> the op torch.export records for the same call (eval-mode batch norm)
_EAGER_NAMES = {"native_batch_norm": "_native_batch_norm_legit_no_training.default",
                "_native_batch_norm_legit": "_native_batch_norm_legit_no_training.default"}


def _eager_ops(module, args, col: _Collector):
    """When the program does not export: run it eagerly once under a dispatch mode and report
    each aten op computed from the inputs that eerie-c's frontend has no lowering for (after
    the Core ATen decompositions torch.export would apply), with the user's line. Only the
    path the example inputs take is seen; a failure of the run itself is not reported here."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from ..frontend.torch.walker import registered_lowerings
    decomps = torch.export.default_decompositions()
    LOWERINGS = registered_lowerings()
    tainted: dict[int, object] = {}       # id -> tensor computed from the inputs (kept alive)
    found: dict[tuple, str] = {}

    def mark(v):
        for t in _tensors(v):
            tainted[id(t)] = t

    def user_line():
        frames = [fr for fr in traceback.extract_stack() if _is_user_file(fr.filename)]
        return (frames[-1].filename, frames[-1].lineno) if frames else None

    class Scan(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, a=(), kw=None):
            kw = kw or {}
            name = getattr(func, "__name__", str(func))      # e.g. "cumsum.default"
            packet = name.split(".")[0]
            known = name in LOWERINGS or packet in LOWERINGS or _EAGER_NAMES.get(packet) in LOWERINGS
            uses_input = any(id(t) in tainted for t in _tensors((a, kw)))
            if uses_input and packet not in _EAGER_SKIP and not known:
                out = _decomposed(self, func, decomps, a, kw)
                if out is not NotImplemented:
                    mark(out)
                    return out
                found.setdefault((f"aten.{name}", user_line()), name)
            out = func(*a, **kw)
            if uses_input:
                mark(out)
            return out

    inputs = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    mark(inputs)
    try:
        with _quiet(), torch.no_grad(), Scan():
            module(*inputs)
    except Exception:
        pass   # the run fails too (or the mode cannot follow it): the other steps report it
    by_line: dict = {}
    for op, where in found:
        by_line.setdefault(where, []).append(op)
    for where, ops in by_line.items():
        col.add("op", f"no eerie-c lowering for {', '.join(ops)} (found by running the module eagerly "
                      f"on the example inputs, as the program does not export)", where, "eager op scan")


def _decomposed(mode, func, decomps, a, kw):
    """func run as the pieces export would record for it, each going through the scan again;
    NotImplemented when it has no decomposition. The op's own CompositeImplicit definition
    comes first (unbind's table decomposition calls tensor_split.sections, which export
    itself never records: it lowers both to select / slice), then the Core ATen table."""
    with mode:
        out = func.decompose(*a, **kw)
        if out is NotImplemented and func in decomps:
            out = decomps[func](*a, **kw)
    return out


def _tensors(v):
    import torch
    if isinstance(v, torch.Tensor):
        yield v
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from _tensors(x)
    elif isinstance(v, dict):
        for x in v.values():
            yield from _tensors(x)
