"""The result of `eerie_c.check` and its text: each finding (what kind of problem, the user's
file and line, why, and how to rewrite it) and the pass / fail summary that `eerie-c check`
prints.
"""
from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass, field


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
    "container": "Python lists, dicts and sorts are resolved while the program is traced, so an "
                 "index, key, order or length taken from a tensor's value cannot be followed. "
                 "Keep the candidates in one tensor and select with tensor ops: for a list "
                 "indexed by a tensor, `torch.stack(outs).index_select(0, i.reshape(1))[0]` (i "
                 "e.g. `x.argmax()`; or `torch.gather`); for a dict keyed by a tensor value, "
                 "`torch.where(cond, a, b)`; instead of `sort(key=...)`, `torch.sort` / "
                 "`torch.topk` on a tensor of keys (eerie-c lowers neither yet: when the order "
                 "only feeds a sum or a max, drop the sort); for a list grown in a "
                 "value-dependent loop, a fixed-size tensor (the loop's bound) carried through "
                 "`torch.while_loop`. Lists and dicts built and indexed with Python ints (fixed "
                 "at trace time) are fine.",
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

FIXES["float_island"] = (
    "Nothing to change if float is acceptable here (it is correct, only slower and larger). To "
    "run it in int8, use an op with an int8 kernel (`eerie-c ops`) or a quantizer that annotates "
    "it; ExecuTorch's CortexMQuantizer quantizes convolutions only in a channels-last module "
    "(model.to(memory_format=torch.channels_last), and a channels-last example input).")

TITLES = {"float_island": "float island in a quantized program (falls back to float32)",
          "if": "value-dependent `if`", "loop": "value-dependent loop", "item": "Python number from a tensor",
          "tolist": "`.tolist()`", "numpy": "`.numpy()`", "shape": "value-dependent shape",
          "container": "list/dict manipulation driven by a tensor value",
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


def _show_path(path: str) -> str:
    try:
        rel = os.path.relpath(path)
        return rel if not rel.startswith("..") else path
    except ValueError:
        return path
