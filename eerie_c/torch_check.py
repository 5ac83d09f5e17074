"""Traceability check for PyTorch programs: `eerie_c.check(module, example_args)` and
`eerie-c check FILE.py:NAME`.

It answers "can eerie-c compile this program, and if not, which lines must change and how?"
without writing any C. Each step is the one the compiler itself takes, run so that it reports
every problem instead of stopping at the first:

1. the source of `forward` is scanned for print / logging calls (they run once, while
   exporting, and are not part of the compiled program: a warning, not a failure);
2. `torch.export.export` (non-strict, as eerie_c.compile does) and strict export (TorchDynamo),
   plus `torch._dynamo.explain`, whose graph breaks name the user's line and the reason;
3. when the program exports, its Core ATen graph is lowered through eerie-c's own frontend
   node by node, collecting each op that eerie-c cannot lower (with the user's line from the
   node's stack trace), then every IR op is checked against the kernel registry, and finally
   the whole program is compiled (passes, lowering, planning, C proof) in memory;
4. when it does not export, the module is run eagerly once under a dispatch mode, and each
   aten op computed from the inputs that the frontend cannot lower (after the decompositions
   torch.export would apply) is listed with its line, so those are known before the export
   problems are fixed.

Each problem is classified from the source line and the tracer's reason: a Python `if` on a
tensor value (rewrite with torch.cond), a loop whose trip count depends on tensor values
(torch.while_loop with a bounded counter), `.item()` / `.tolist()` / `int(tensor)` (keep 0-d
tensors), results whose size depends on values (boolean masks, nonzero: keep the shape and
mask the values), and ops eerie-c lacks. The program passes (exit status 0) when it exports in
one graph and compiles; otherwise the CLI exits with status 1.
"""
from __future__ import annotations

import ast
import contextlib
import inspect
import io
import linecache
import logging
import os
import re
import sys
import sysconfig
import textwrap
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from .errors import EerieError

FIXES = {
    "if": "A Python `if` cannot depend on a tensor's value in an exported program. Write both "
          "branches as functions of the tensors they need and call "
          "`torch.cond(pred, true_fn, false_fn, (x,))` (pred a one-element bool tensor; both "
          "branches return tensors of the same shapes and dtypes). To choose between two values "
          "element by element, `torch.where(pred, a, b)` is simpler.",
    "loop": "The loop's trip count depends on tensor values. Use "
            "`torch.while_loop(cond_fn, body_fn, (x, i))` with a counter among the carried values "
            "and the bound in the condition (`... & (i < 100)`); eerie-c also bounds every loop "
            "at compile time (`max_iterations=`, default 1000) and reports an overrun through "
            "NAME_invoke's return code.",
    "item": "`.item()` (or float()/int()/bool() of a tensor) turns a value into a Python number "
            "that the exported program cannot follow. Keep it a 0-d tensor (`s = x.sum()`, not "
            "`x.sum().item()`) and keep computing with tensor ops; decisions on it go through "
            "torch.cond / torch.where.",
    "tolist": "`.tolist()` copies tensor values into Python lists. Keep the tensor and use "
              "indexing, slicing or torch ops on it instead.",
    "numpy": "`.numpy()` leaves PyTorch; the exported program cannot follow it. Use the "
             "equivalent torch ops on the tensor.",
    "shape": "The size of this result depends on tensor values (boolean-mask indexing, nonzero, "
             "masked_select, unique). eerie-c needs every shape fixed at compile time: keep the "
             "shape and mask the values instead, e.g. `torch.where(mask, x, torch.zeros_like(x))`, "
             "or reduce with the mask (`(x * mask).sum()`).",
    "assert": "An `assert` on a tensor value needs its value at export time. Remove it, or "
              "use `torch._check(...)` on sizes only.",
    "print": "print / logging inside forward runs once while the program is exported and is "
             "not part of the compiled program. Remove it (or guard it with "
             "`if not torch.compiler.is_exporting():`).",
    "op": "eerie-c has no lowering for this op. Rewrite it with supported ops (docs/pytorch.md "
          "lists them; `eerie-c ops` shows the kernels), or keep it out of the exported program.",
    "dynamic": "Declare each dynamic dimension with a maximum, `torch.export.Dim(\"batch\", max=N)`: "
               "eerie-c plans memory for the maximum.",
    "other": "",
}

TITLES = {"if": "value-dependent `if`", "loop": "value-dependent loop", "item": "Python number from a tensor",
          "tolist": "`.tolist()`", "numpy": "`.numpy()`", "shape": "value-dependent shape",
          "assert": "`assert` on a tensor value", "print": "print/logging in forward",
          "op": "op eerie-c cannot lower", "dynamic": "dynamic dimension", "other": "cannot compile"}


@dataclass
class Finding:
    kind: str            # a key of FIXES
    reason: str          # one line: what the tracer or compiler said
    file: str | None = None
    line: int | None = None
    code: str = ""       # the source line
    fatal: bool = True
    found_by: list[str] = field(default_factory=list)

    @property
    def fix(self) -> str:
        return FIXES.get(self.kind, "")

    @property
    def where(self) -> str:
        if not self.file:
            return "(no source line)"
        return f"{_show_path(self.file)}:{self.line}"


@dataclass
class CheckResult:
    program: str
    findings: list[Finding]
    exported: bool = False
    compiled: bool = False
    graph_ops: int = 0
    compile_report: dict | None = None

    @property
    def ok(self) -> bool:
        return self.compiled and not any(f.fatal for f in self.findings)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.fatal]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if not f.fatal]

    def text(self) -> str:
        out = [f"eerie-c check: {self.program}"]
        for f in sorted(self.findings, key=lambda f: (not f.fatal, f.file or "~", f.line or 0)):
            label = "problem" if f.fatal else "warning"
            out.append(f"{f.where}: {label}: {TITLES.get(f.kind, f.kind)}")
            if f.code:
                out.append(f"    {f.code}")
            out += textwrap.wrap(f.reason, 96, initial_indent="    why: ", subsequent_indent="         ")
            if f.fix:
                out += textwrap.wrap(f.fix, 96, initial_indent="    fix: ", subsequent_indent="         ")
        if self.ok:
            r = self.compile_report or {}
            out.append(f"OK: exports in one graph and compiles ({self.graph_ops} ops; arena "
                       f"{r.get('arena_bytes', '?')} B, constants {r.get('constant_bytes', '?')} B)"
                       + (f"; {len(self.warnings)} warning(s)" if self.warnings else ""))
        else:
            n = len(self.problems)
            out.append(f"FAILED: {n} problem{'s' if n != 1 else ''}; eerie-c cannot compile this program "
                       f"until {'they are' if n != 1 else 'it is'} fixed")
        return "\n".join(out)

    def __str__(self):
        return self.text()


# ---- where in the user's code -----------------------------------------------------------------

def _lib_dirs() -> tuple[str, ...]:
    import torch
    dirs = [os.path.dirname(torch.__file__), os.path.dirname(os.path.abspath(__file__))]
    for key in ("stdlib", "platstdlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            dirs.append(p)
    return tuple(os.path.realpath(d) + os.sep for d in dirs)


def _is_user_file(path: str) -> bool:
    if not path or path.startswith("<"):
        return False
    real = os.path.realpath(path)
    if any(real.startswith(d) for d in _lib_dirs()):
        return False
    parts = Path(real).parts
    return not any(p in ("_pytest", "pluggy") for p in parts) and os.path.exists(real)


def _show_path(path: str) -> str:
    try:
        rel = os.path.relpath(path)
        return rel if not rel.startswith("..") else path
    except ValueError:
        return path


def _code(path: str, line: int) -> str:
    return linecache.getline(path, line).strip()


_FILE_LINE = re.compile(r'File "([^"]+)", line (\d+)')
_CAUSED = re.compile(r"#\s*(\S+?):(\d+) in ")


def _user_frame_in_text(text: str, user_files=()) -> tuple[str, int] | None:
    hits = [(f, int(n)) for f, n in _FILE_LINE.findall(text) if _is_user_file(f)]
    if hits:
        return hits[-1]
    # "Caused by: CODE  # ...tail/of/path.py:LINE in fn": the path may be cut at its start
    for tail, n in reversed(_CAUSED.findall(text)):
        for f in user_files:
            if f.endswith(tail.lstrip(".")):
                return f, int(n)
    return None


def _user_frame_in_tb(tb) -> tuple[str, int] | None:
    frames = [fr for fr in traceback.extract_tb(tb) if _is_user_file(fr.filename)]
    return (frames[-1].filename, frames[-1].lineno) if frames else None


def _node_frame(node) -> tuple[str, int] | None:
    return _user_frame_in_text(node.meta.get("stack_trace") or "") if node is not None else None


def _classify(code: str, reason: str) -> str:
    c = code.strip()
    r = reason.lower()
    if re.match(r"(if|elif)\b", c) or (" if " in c and " else " in c and "lambda" not in c):
        return "if"
    if re.match(r"(while|for)\b", c):
        return "loop"
    if re.match(r"assert\b", c):
        return "assert"
    if ".tolist()" in c:
        return "tolist"
    if ".numpy()" in c or "numpy" in r:
        return "numpy"
    if ".item()" in c or "item()" in r or "_local_scalar_dense" in r or re.search(r"\b(int|float|bool)\(", c):
        return "item"
    if any(k in r for k in ("dynamic shape operator", "data-dependent output size", "nonzero",
                            "unbacked", "masked_select")) or re.search(r"dimension u\d+", r):
        return "shape"
    if "dynamic dimension" in r and "max" in r:
        return "dynamic"
    if "unsupported pytorch op" in r or "unsupported operator" in r or "is not supported" in r:
        return "op"
    if "data-dependent" in r or "guardondatadependent" in r:
        return "if"
    return "other"


def _one_line(text: str, limit: int = 300) -> str:
    """The informative first sentence of a tracer message, on one line."""
    text = str(text)
    for cut in ("\n\nFor more information", "For more information, run", "\n\nThe following call",
                "consider using data-dependent friendly", "Developer debug context",
                "\n\nfrom user code", "For C++ stack trace", "\n  Hint:"):
        i = text.find(cut)
        if i > 0:
            text = text[:i]
    text = " ".join(text.split())
    text = re.sub(r"\s*\(unhinted: (?:[^()]|\([^()]*\))*\)", "", text)
    text = re.sub(r"\s*\(Size-like symbols: [^)]*\)", "", text)
    return text[:limit].rstrip() + ("..." if len(text) > limit else "")


# ---- the steps ------------------------------------------------------------------------------

@contextlib.contextmanager
def _quiet():
    """Tracers print graphs and warnings (and the user's own prints run): keep them out of
    the report."""
    import warnings
    names = ("torch", "torch.export", "torch._dynamo", "torch._export", "torch.fx", "torch._subclasses")
    levels = {n: logging.getLogger(n).level for n in names}
    out, err = io.StringIO(), io.StringIO()
    try:
        for n in names:
            logging.getLogger(n).setLevel(logging.CRITICAL)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                yield
    finally:
        for n, lv in levels.items():
            logging.getLogger(n).setLevel(lv)


class _Collector:
    def __init__(self, user_files):
        self.findings: list[Finding] = []
        self.user_files = list(user_files)

    def add(self, kind_hint: str | None, reason: str, where: tuple[str, int] | None, by: str,
            fatal: bool = True):
        file, line = where if where else (None, None)
        code = _code(file, line) if file else ""
        kind = kind_hint or _classify(code, reason)
        for f in self.findings:
            same_place = file is not None and f.file == file and f.line == line
            same_text = file is None and f.file is None and f.reason == reason
            if same_place or same_text:
                if by not in f.found_by:
                    f.found_by.append(by)
                if same_place and f.kind == kind == "op" and reason not in f.reason:
                    f.reason += "; " + reason   # several unsupported ops on one line
                return f
        f = Finding(kind, reason, file, line, code, fatal, [by])
        self.findings.append(f)
        return f


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


class _Poison:
    """Stands for the result of a node that could not be lowered: whatever uses it is not
    reported again."""

    def __repr__(self):
        return "<not lowered>"


POISON = _Poison()


def _poisoned(v) -> bool:
    if isinstance(v, _Poison):
        return True
    if isinstance(v, (list, tuple)):
        return any(_poisoned(x) for x in v)
    if isinstance(v, dict):
        return any(_poisoned(x) for x in v.values())
    return False


def _collecting_lowerer(ep, name, max_iterations):
    from .frontend.torch import _Lowerer

    class Collecting(_Lowerer):
        """The frontend's own walk, noting each node it cannot lower and carrying on."""

        def __init__(self, *a):
            super().__init__(*a)
            self.problems: list = []

        def call(self, node, args, kwargs, env):
            if _poisoned((args, kwargs)):
                return POISON
            before = len(self.problems)
            try:
                return super().call(node, args, kwargs, env)
            except Exception as e:
                if len(self.problems) == before:
                    msg = str(e) if isinstance(e, EerieError) else f"{type(e).__name__}: {e}"
                    self.problems.append((node, msg))
                    return self.stand_in(node.meta.get("val"))
                return POISON

        def stand_in(self, val):
            """A tensor of the node's shape in place of its result, so the ops after it are
            still checked; POISON when the shape is not static."""
            if isinstance(val, (list, tuple)):
                parts = [self.stand_in(v) for v in val]
                return POISON if any(p is POISON for p in parts) else type(val)(parts)
            if not isinstance(val, self.torch.Tensor):
                return POISON
            try:
                from .frontend.torch import _ir_dtype
                return self.tensor(tuple(int(d) for d in val.shape), _ir_dtype(val.dtype), "not_lowered")
            except Exception:
                return POISON

        def finish_outputs(self, outs, g, what):
            if self.problems or _poisoned(outs):
                return []
            return super().finish_outputs(outs, g, what)

    return Collecting(ep, name, max_iterations)


def _ir_ops(g):
    for op in g.ops:
        if op.regions:
            for r in op.regions:
                yield from _ir_ops(r)
        else:
            yield op


def _lower(ep, name, max_iterations, col: _Collector):
    """The exported program through eerie-c's frontend; returns the IR graph or None."""
    from .kernels import REGISTRY, load_all, op_dtype
    try:
        with _quiet():
            ep = ep.run_decompositions()
    except Exception as e:
        col.add("other", f"decomposition to the Core ATen opset failed: {_one_line(e)}", None, "eerie-c frontend")
        return None
    L = _collecting_lowerer(ep, name, max_iterations)
    try:
        g = L.run()
    except Exception as e:   # before the walk: inputs (dynamic dimensions, non-tensor inputs)
        msg = str(e) if isinstance(e, EerieError) else f"{type(e).__name__}: {e}"
        col.add(None, msg, None, "eerie-c frontend")
        return None
    for node, msg in L.problems:
        where = _node_frame(node)
        reason = re.sub(r"\s*\(File \"[^\"]*\", line \d+, in [^)]*\)$", "", msg)
        if getattr(node.target, "__name__", "").startswith("_local_scalar_dense"):
            reason = f"{msg} (the value of a tensor taken as a Python number)"
        col.add(None, reason, where, "eerie-c frontend")
    if L.problems:
        return None
    load_all()
    bad = False
    for op in _ir_ops(g):
        if op.kind in ("IF", "WHILE"):
            continue
        info, dt = REGISTRY.get(op.kind), op_dtype(op, g)
        if info is not None and dt in info.dtypes:
            continue
        bad = True
        what = op.kind if info is None else f"{op.kind} with {dt} tensors"
        where = _user_frame_in_text(op.attrs.get("torch_source", "") or "")
        col.add("op", f"eerie-c has no kernel for {what} (made from torch node {op.name})", where,
                "eerie-c kernels")
    return None if bad else g


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
    from .frontend.torch import LOWERINGS
    decomps = torch.export.default_decompositions()
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
                decomp = decomps[func] if func in decomps else None
                if decomp is not None:
                    with self:            # its pieces go through this scan again
                        out = decomp(*a, **kw)
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


def check(module, example_args=None, dynamic_shapes=None, max_iterations: int | None = None,
          name: str | None = None) -> CheckResult:
    """Report why `module` (an nn.Module, or a function of tensors) cannot be compiled, with
    the lines to change; `result.ok` when it exports in one graph and compiles."""
    from .frontend.torch import DEFAULT_MAX_ITERATIONS, _torch
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
    from .api import compile_graph
    try:
        with _quiet():
            out = compile_graph(g, "checked", "host", source=label)
        res.compiled = True
        res.compile_report = out.report
    except EerieError as e:
        col.add(None, str(e), None, "eerie-c compile")
    return res


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
