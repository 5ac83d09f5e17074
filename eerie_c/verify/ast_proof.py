"""Proof over the generated C itself: parse the preprocessed model file with pycparser and
show that its memory use is static and its running time bounded.

What is proved (each violation is a compiler bug and raises CompilerBug naming the function
and line):

* no allocator: no reference to malloc/calloc/realloc/free/alloca/__builtin_alloca or any
  other name in ALLOCATORS, nor to the non-local-control-flow functions in FORBIDDEN_CALLS;
* no variable-length array and every array has a constant size: each array dimension is an
  integer constant expression (literals, enum constants, sizeof of basic types, arithmetic on
  those) greater than zero; an empty dimension is allowed only where C gives it a size some
  other way (a function parameter, an `extern` declaration, an initialised array);
* no recursion: the call graph over the functions defined in the file has no cycle (a cycle
  is reported as `f -> g -> f`);
* no function pointers: no declaration of a pointer to function (directly, in arrays,
  struct members, parameters, return types or typedefs), no typedef of a function type, no
  use of a function name other than as the callee of a call, and every call is through a
  plain identifier;
* every called function is defined in the file or is one of the library functions declared
  by the verifier's own headers (fake_include/: string.h, math.h, ...), so the stack bound
  knows each external callee; including any other system header fails preprocessing;
* no goto;
* every `for` loop is bounded by compile-time constants.  Accepted shape:

      for (i = A; i < B; ++i)        /* also i++, i += K, i = i + K; <= as well */
      for (i = A; i > B; --i)        /* also i--, i -= K, i = i - K; >= as well */
      for (int i = A; ...)           /* C99 declaration in the init */

  A and B are integer constant expressions, or may use the variables of enclosing bounded
  loops and `const` integer locals initialised from such expressions (their value ranges
  are known by interval arithmetic, so the trip count still has a compile-time maximum); K is
  a positive constant; the comparison may be the first operand of a `&&` chain
  (`i < B && other_condition`) or be written `B > i`.  The loop variable must be a local (or
  parameter) of an integer type whose range holds every value it takes, and it must not be
  assigned, incremented or have its address taken anywhere in the condition, the body or
  the rest of the step.
* `while` and `do` loops are rejected, except the `do { ... } while (0)` macro idiom.
  Loops that come from model control flow must be emitted with an explicit maximum trip
  count, as a bounded `for` over a trip counter that stops early on the real condition:

      for (trip = 0; trip < MAX_TRIPS && (cond); ++trip) { ... }
      /* or */ for (trip = 0; trip < MAX_TRIPS; ++trip) { if (!(cond)) break; ... }

  (a comment would not survive the preprocessor, so the counter itself is the marker).

The proof is split by job: c_parse.py preprocesses and parses the file (gcc -E -undef
-nostdinc with the stand-in headers in fake_include/, inline assembly checked and removed),
c_intervals.py evaluates constant expressions and value intervals, c_checker.py walks the
AST with the per-declaration and per-function checks, loop_bounds.py bounds the `for`
loops and call_graph.py checks the callees and the absence of recursion.  This module is
the entry point, `prove_c`.
"""
from __future__ import annotations

from pathlib import Path

from .c_checker import ALLOCATORS, FORBIDDEN_CALLS, CSourceChecker
from .c_parse import FAKE_INCLUDE, parse, preprocess, strip_asm

__all__ = ["prove_c", "preprocess", "parse", "ALLOCATORS", "FORBIDDEN_CALLS", "FAKE_INCLUDE"]


def prove_c(c_path: Path, include_dirs: list[Path], entry: str, defines: list[str] | None = None,
            cpp: str = "gcc") -> dict:
    """Prove the generated C file free of heap use, VLAs, recursion, function pointers and
    unbounded loops. Raises CompilerBug on the first violation; returns a report dict."""
    c_path = Path(c_path)
    text = preprocess(c_path, [Path(d) for d in include_dirs], defines, cpp)
    text, n_asm = strip_asm(text, c_path.name)
    ast = parse(text, c_path)
    ch = CSourceChecker(ast, c_path.name)
    ch.run()
    reach, depth, ext = ch.check_calls(entry)
    return {"check": "c_ast", "ok": True, "entry": entry, "functions": len(ch.defined),
            "reachable_functions": len(reach), "call_depth": depth, "loops": ch.loops,
            "max_loop_trips": ch.max_trips, "arrays": ch.arrays, "asm_statements": n_asm,
            "externals": ext}
