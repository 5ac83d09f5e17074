"""From what a tracer or the compiler says to a finding of `eerie_c.check`: the user's file and
line (frames of torch, the standard library and eerie-c itself skipped), the kind of problem
read from that line and the message, the message cut to one informative line, and the
collector that merges repeats of one problem found by several steps. Also `_quiet`, which keeps
what the tracers print out of the report.
"""
from __future__ import annotations

import contextlib
import io
import linecache
import logging
import os
import re
import sysconfig
import traceback
from pathlib import Path

from .report import Finding


# ---- where in the user's code -----------------------------------------------------------------

def _lib_dirs() -> tuple[str, ...]:
    import torch
    # torch, and eerie-c's whole package (this module is eerie_c/check/findings.py)
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    dirs = [os.path.dirname(torch.__file__), package]
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


def _block(path: str, line: int, limit: int = 200) -> list[str]:
    """The lines of the block that the statement at `line` opens (more indented than it)."""
    head = linecache.getline(path, line)
    indent = len(head) - len(head.lstrip())
    out = []
    for k in range(line + 1, line + 1 + limit):
        text = linecache.getline(path, k)
        if not text:
            break
        if not text.strip():
            continue
        if len(text) - len(text.lstrip()) <= indent:
            break
        out.append(text.strip())
    return out


# A Python container driven by a tensor's value: a list / dict subscripted with a value taken
# from a tensor (argmax, int(...), .item()), or a sort / max / min whose key computes on tensors.
_VALUE_OF_TENSOR = re.compile(r"\.(argmax|argmin|item|long|int)\(|(?<![\w.])(int|bool)\(")
_SORT_BY_KEY = re.compile(r"(\.sort\(|(?<![\w.])(sorted|max|min)\()[^#]*\bkey\s*=")


def _subscripts(code: str):
    """The text inside each subscript `name[...]` of a line (nested brackets balanced)."""
    for m in re.finditer(r"[\w)\]]\s*\[", code):
        depth, start = 0, m.end()
        for k in range(start - 1, len(code)):
            depth += {"[": 1, "]": -1}.get(code[k], 0)
            if depth == 0:
                yield code[start:k]
                break


def _indexed_by_value(code: str) -> bool:
    return any(_VALUE_OF_TENSOR.search(inner) for inner in _subscripts(code))


_GROWS = re.compile(r"\.(append|extend|insert)\(")


def _classify(code: str, reason: str, block=()) -> str:
    c = code.strip()
    r = reason.lower()
    shape = any(k in r for k in ("dynamic shape operator", "data-dependent output size", "nonzero",
                                 "unbacked", "masked_select")) or re.search(r"dimension u\d+", r)
    if re.match(r"(if|elif)\b", c) or (" if " in c and " else " in c and "lambda" not in c):
        return "if"
    if re.match(r"(while|for)\b", c):
        # a list grown in a value-dependent loop has a value-dependent length
        return "container" if any(_GROWS.search(b) for b in block) else "loop"
    if re.match(r"assert\b", c):
        return "assert"
    if not shape and (_SORT_BY_KEY.search(c) or _indexed_by_value(c)):
        return "container"
    if ".tolist()" in c:
        return "tolist"
    if ".numpy()" in c or "numpy" in r:
        return "numpy"
    # float(x), not x.float(): the method is a dtype cast, fine in an exported program
    if ".item()" in c or "item()" in r or "_local_scalar_dense" in r or \
            re.search(r"(?<![\w.])(int|float|bool)\(", c):
        return "item"
    if shape:
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


# ---- shared by the steps -------------------------------------------------------------------

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
        kind = kind_hint or _classify(code, reason, _block(file, line) if file else ())
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
