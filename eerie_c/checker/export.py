"""The steps of `eerie_c.check` before and during export: print / logging calls in `forward`
(a warning), `torch.export.export` non-strict and strict, and `torch._dynamo.explain`, whose
graph breaks name the user's line and the reason.
"""
from __future__ import annotations

import ast
import inspect
import textwrap

from .findings import (_Collector, _is_user_file, _one_line, _quiet, _user_frame_in_tb,
                                   _user_frame_in_text)


def _print_calls(module, col: _Collector):
    """print(...) and logging calls in the forward of the module and of its submodules."""
    import torch
    seen = set()
    for m in module.modules():
        cls = type(m)
        fwd = getattr(cls, "forward", None)
        if fwd is None or cls in seen or cls.__module__.startswith("torch."):
            continue
        seen.add(cls)
        try:
            src, start = inspect.getsourcelines(fwd)
            path = inspect.getsourcefile(fwd)
        except (OSError, TypeError):
            continue
        if not path or not _is_user_file(path):
            continue
        try:
            tree = ast.parse(textwrap.dedent("".join(src)))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            base = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
            is_log = name in ("debug", "info", "warning", "warn", "error", "exception", "critical", "log") \
                and (base in ("logging", "log", "logger", "LOG", "LOGGER", "_log", "_logger"))
            if name == "print" or is_log:
                col.add("print", f"`{name}(...)` inside {cls.__name__}.forward",
                        (path, start + node.lineno - 1), "source scan", fatal=False)
    del torch


def _export(module, args, strict: bool, dynamic_shapes, col: _Collector):
    import torch
    by = "torch.export (strict)" if strict else "torch.export"
    try:
        with _quiet():
            return torch.export.export(module, args, strict=strict, dynamic_shapes=dynamic_shapes)
    except Exception as e:
        text = f"{type(e).__name__}: {e}"
        where = _user_frame_in_text(text, col.user_files) or _user_frame_in_tb(e.__traceback__)
        col.add(None, _one_line(text), where, by)
        return None


def _explain(module, args, col: _Collector):
    import torch
    try:
        torch._dynamo.reset()
        with _quiet():
            ex = torch._dynamo.explain(module)(*args)
    except Exception as e:   # explain itself failed: the exports report the same problem
        del e
        return
    finally:
        torch._dynamo.reset()
    for br in ex.break_reasons:
        frames = [fs for fs in (br.user_stack or []) if _is_user_file(fs.filename)]
        where = (frames[-1].filename, frames[-1].lineno) if frames else None
        col.add(None, "graph break: " + _one_line(br.reason), where, "torch._dynamo.explain")
