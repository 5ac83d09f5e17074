"""The traceability check for PyTorch programs: `eerie_c.check(module, example_args)` and
`eerie-c check FILE.py:NAME`.

It answers "can eerie-c compile this program, and if not, which lines must change and how?"
without writing any C. Each step is the one the compiler itself takes, run so that it reports
every problem instead of stopping at the first:

1. the source of `forward` is scanned for print / logging calls (they run once, while
   exporting, and are not part of the compiled program: a warning, not a failure);
2. `torch.export.export` (non-strict, as eerie_c.compile does) and strict export (TorchDynamo),
   plus `torch._dynamo.explain`, whose graph breaks name the user's line and the reason
   (steps 1 and 2: export.py);
3. when the program exports, its Core ATen graph is lowered through eerie-c's own frontend
   node by node, collecting each op that eerie-c cannot lower (with the user's line from the
   node's stack trace), then every IR op is checked against the kernel registry
   (lower.py), and finally the whole program is compiled (passes, lowering,
   planning, C proof) in memory;
4. when it does not export, the module is run eagerly once under a dispatch mode, and each
   aten op computed from the inputs that the frontend cannot lower (after the decompositions
   torch.export would apply) is listed with its line, so those are known before the export
   problems are fixed (eager.py).

Each problem is classified from the source line and the tracer's reason: a Python `if` on a
tensor value (rewrite with torch.cond), a loop whose trip count depends on tensor values
(torch.while_loop with a bounded counter), `.item()` / `.tolist()` / `int(tensor)` (keep 0-d
tensors), results whose size depends on values (boolean masks, nonzero: keep the shape and
mask the values), and ops eerie-c lacks (findings.py). The program passes (exit
status 0) when it exports in one graph and compiles; otherwise the CLI exits with status 1
(report.py holds the result and its text).

This module runs the steps in order (`check`) and loads a `FILE.py:NAME` target for the CLI
(`load_target`).
"""
from __future__ import annotations

import inspect
import os
import re
import sys
from pathlib import Path

from ..errors import EerieError
from .eager import _eager_ops
from .export import _explain, _export, _print_calls
from .findings import _Collector, _is_user_file, _quiet
from .lower import _ir_ops, _lower
# The report's names, importable from here as they always were.
from .report import FIXES, TITLES, CheckResult, Finding, _show_path  # noqa: F401


def check(module, example_args=None, dynamic_shapes=None, max_iterations: int | None = None,
          name: str | None = None) -> CheckResult:
    """Report why `module` (an nn.Module, or a function of tensors) cannot be compiled, with
    the lines to change; `result.ok` when it exports in one graph and compiles."""
    from ..frontend.torch import DEFAULT_MAX_ITERATIONS
    from ..frontend.torch.values import _torch
    torch = _torch()
    if example_args is None:
        raise EerieError("check needs example_args (a tuple of example inputs)")
    if not isinstance(example_args, tuple):
        example_args = tuple(example_args) if isinstance(example_args, list) else (example_args,)
    if not isinstance(module, torch.nn.Module):
        if not callable(module):
            raise EerieError(f"check needs an nn.Module or a function, not a {type(module).__name__}")
        fn = module

        class Wrapped(torch.nn.Module):
            def forward(self, *a):
                return fn(*a)
        Wrapped.__name__ = getattr(fn, "__name__", "function")
        module = Wrapped()
    if not isinstance(module, torch.fx.GraphModule):   # a convert_pt2e module refuses .eval()
        module = module.eval()
    label = name or type(module).__name__
    try:
        label += f" ({_show_path(inspect.getsourcefile(type(module)))})"
    except (TypeError, OSError):
        pass
    user_files = set()
    for m in module.modules():
        try:
            f = inspect.getsourcefile(type(m))
            if f and _is_user_file(f):
                user_files.add(os.path.realpath(f))
        except (TypeError, OSError):
            pass
    col = _Collector(sorted(user_files))
    res = CheckResult(label, col.findings)

    _print_calls(module, col)
    ep = _export(module, example_args, False, dynamic_shapes, col)
    _explain(module, example_args, col)
    _export(module, example_args, True, dynamic_shapes, col)
    if ep is None:
        _eager_ops(module, example_args, col)
        return res
    res.exported = True
    g = _lower(ep, "checked", max_iterations or DEFAULT_MAX_ITERATIONS, col)
    if g is None:
        return res
    res.graph_ops = sum(1 for _ in _ir_ops(g))
    if any(f.fatal for f in col.findings):
        return res
    from ..api import compile_graph
    try:
        with _quiet():
            out = compile_graph(g, "checked", "host", source=label)
        res.compiled = True
        res.compile_report = out.report
        _float_islands(out.graph, res)
    except EerieError as e:
        col.add(None, str(e), None, "eerie-c compile")
    return res


def _float_islands(g, res: CheckResult) -> None:
    """A quantized program's float islands, as warnings: which ops fall back and why."""
    import re as _re
    for isl in getattr(g, "float_islands", []):
        m = _re.match(r'File "([^"]+)", line (\d+)', isl["sources"][0]) if isl["sources"] else None
        ops = ", ".join(f"{n} ({k})" for n, k in zip(isl["ops"][:4], isl["kinds"][:4]))
        res.findings.append(Finding("float_island", f"{ops}{' ...' if len(isl['ops']) > 4 else ''}: "
                                    f"{isl['reason']}", m.group(1) if m else None,
                                    int(m.group(2)) if m else None, fatal=False))


def load_target(spec: str, shapes: list[str] | None = None):
    """`FILE.py:NAME` -> (module, example_args, dynamic_shapes). NAME is an nn.Module class
    (built with no arguments), an nn.Module instance, or a function returning
    (module, example_args[, dynamic_shapes]). Example inputs: --shape options (random
    tensors), else the class's or the file's `example_args` (a tuple, or a function
    returning one)."""
    import importlib.util
    torch = __import__("torch")
    if ":" not in spec:
        raise EerieError(f"{spec}: expected FILE.py:NAME (NAME an nn.Module class or a function "
                         f"returning (module, example_args))")
    path, name = spec.rsplit(":", 1)
    p = Path(path)
    if not p.is_file():
        raise EerieError(f"{path}: no such file")
    mod_name = "eerie_check_" + re.sub(r"\W", "_", p.stem)
    spec_ = importlib.util.spec_from_file_location(mod_name, str(p.resolve()))
    mod = importlib.util.module_from_spec(spec_)
    sys.path.insert(0, str(p.resolve().parent))
    sys.modules[mod_name] = mod
    try:
        spec_.loader.exec_module(mod)
    except Exception as e:
        raise EerieError(f"{path}: importing it failed: {type(e).__name__}: {e}") from None
    finally:
        sys.path.remove(str(p.resolve().parent))
    obj = getattr(mod, name, None)
    if obj is None:
        raise EerieError(f"{path} has no {name}")
    dyn = None
    args = None
    if isinstance(obj, type) and issubclass(obj, torch.nn.Module):
        try:
            module = obj()
        except TypeError as e:
            raise EerieError(f"{name}() needs arguments ({e}); name a function returning "
                             f"(module, example_args) instead") from None
        args = getattr(obj, "example_args", None)
    elif isinstance(obj, torch.nn.Module):
        module, args = obj, getattr(obj, "example_args", None)
    elif callable(obj):
        got = obj()
        if not isinstance(got, tuple) or len(got) not in (2, 3):
            raise EerieError(f"{name}() must return (module, example_args) or "
                             f"(module, example_args, dynamic_shapes)")
        module, args = got[0], got[1]
        dyn = got[2] if len(got) == 3 else None
    else:
        raise EerieError(f"{name} is neither an nn.Module class nor a function")
    if shapes:
        args = tuple(torch.randn(*[int(d) for d in s.replace("x", ",").split(",") if d.strip()])
                     for s in shapes)
    if args is None:
        args = getattr(mod, "example_args", None)
    if callable(args):
        args = args()
    if args is None:
        raise EerieError(f"no example inputs for {name}: pass --shape 1,3,32,32 (once per input), "
                         f"or give the class an `example_args` tuple")
    if not isinstance(args, tuple):
        args = tuple(args) if isinstance(args, list) else (args,)
    return module, args, dyn
