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
  parameter) of an integer type whose range holds every value it takes (names resolve by C
  block scope), it must not be assigned, incremented or written by an asm output anywhere
  in the condition, the body or the rest of the step, and its address must not be taken
  anywhere in the function.  No local or parameter may reuse an enum constant's name.
* only the compiler builtins in call_graph.ALLOWED_BUILTINS (pure, no memory or control
  flow effects) may be called;
* inline assembly obeys asm_check.py: no stack-pointer, program-counter, push/pop, trap or
  directive, no branch or label except one counted-loop form whose counter a constant
  bounds (`if (n > 0 && n <= B)` right before it).
* `while` and `do` loops are rejected, except the `do { ... } while (0)` macro idiom.
  Loops that come from model control flow must be emitted with an explicit maximum trip
  count, as a bounded `for` over a trip counter that stops early on the real condition:

      for (trip = 0; trip < MAX_TRIPS && (cond); ++trip) { ... }
      /* or */ for (trip = 0; trip < MAX_TRIPS; ++trip) { if (!(cond)) break; ... }

  (a comment would not survive the preprocessor, so the counter itself is the marker).

All of this holds for the file as preprocessed under one configuration (proof_config.py);
`prove_configurations` proves each configuration the file is built under: the target
compiler's own macros (the code that ships, DSP/MVE intrinsics and inline assembly
included) and the portable one (no compiler macros).

The proof is split by job: proof_config.py names the configurations, c_parse.py
preprocesses (-nostdinc with the stand-in headers in fake_include/) and parses the file,
asm_check.py reads and checks the inline assembly, c_intervals.py evaluates constant
expressions and value intervals, c_checker.py walks the AST with the per-declaration and
per-function checks, loop_bounds.py bounds the `for` loops and call_graph.py checks the
callees and the absence of recursion.  This module is the entry point: `prove_c`,
`prove_configurations`.
"""
from __future__ import annotations

import hashlib

from pathlib import Path

from ..errors import CompilerBug
from .asm_check import scan_asm
from .c_checker import ALLOCATORS, FORBIDDEN_CALLS, CSourceChecker
from .c_parse import FAKE_INCLUDE, parse, preprocess, shrink_tables
from .proof_config import PORTABLE, ProofConfig, features

__all__ = ["prove_c", "prove_configurations", "preprocess", "parse", "ALLOCATORS",
           "FORBIDDEN_CALLS", "FAKE_INCLUDE"]


def prove_c(c_path: Path, include_dirs: list[Path], entry: str, defines: list[str] | None = None,
            config: ProofConfig = PORTABLE, cache: dict | None = None) -> dict:
    """Prove the generated C file, as preprocessed under `config` (plus `defines`), free of
    heap use, VLAs, recursion, function pointers and unbounded loops.  Raises CompilerBug
    on the first violation; returns a report dict.  `cache` memoises parsing (c_parse.parse)
    across calls on the same file."""
    c_path = Path(c_path)
    source = shrink_tables(c_path.read_text())
    text = _relative_markers(preprocess(c_path, [Path(d) for d in include_dirs], defines, config, source), c_path)
    return _prove_text(text, c_path, entry, config, {} if cache is None else cache)


def _relative_markers(text: str, c_path: Path) -> str:
    """The preprocessor's line markers name files in the file's own directory by their bare
    name. That directory is a fresh temporary one per compile (verify_generated), and its name
    in every marker made each item's text new to the parse cache (c_parse.ITEMS) and each
    proof new to PROVED: a second compile of the same model parsed every item again. Messages
    name files by their base name anyway (c_checker._where)."""
    return text.replace(f'"{c_path.parent}/', '"')


def _prove_text(text: str, c_path: Path, entry: str, config: ProofConfig, cache: dict) -> dict:
    text, asm = scan_asm(text)
    ast = parse(text, c_path, cache)
    ch = CSourceChecker(ast, c_path.name, asm)
    try:
        ch.run()
        reach, depth, ext = ch.check_calls(entry)
    except CompilerBug as e:   # name the configuration: a target branch may be the culprit
        raise CompilerBug(f"{e} [preprocessed for {config.label}]") from e
    return {"check": "c_ast", "ok": True, "entry": entry, "configuration": config.label,
            "features": features(config), "functions": len(ch.defined),
            "reachable_functions": len(reach), "call_depth": depth, "loops": ch.loops,
            "max_loop_trips": ch.max_trips, "arrays": ch.arrays,
            "asm_statements": ch.asm_statements, "asm_loops": ch.asm_loops, "externals": ext}


# Proofs already done in this process, by (preprocessed text, file name, entry, configuration):
# the same file proves the same way (a model compiled again by `run` after `compile`, or by
# the next test); its CompilerBug, if any, is raised again since failures are not kept.
PROVED: dict[tuple, dict] = {}


def prove_configurations(c_path: Path, include_dirs: list[Path], entry: str,
                         configs: list[ProofConfig]) -> dict:
    """prove_c under each configuration (proof_config.configurations); the figures of the
    first (the target's) at the top, every configuration's under `per_configuration`."""
    c_path = Path(c_path)
    cache = None   # c_parse.ITEMS, the process-wide cache of parsed items
    done: dict[str, dict] = {}   # preprocessed text -> its result: identical text, same proof
    results = []
    # the weight tables shrunk once, before preprocessing (c_parse.shrink_tables)
    source = shrink_tables(c_path.read_text())
    for config in configs:
        text = _relative_markers(preprocess(c_path, [Path(d) for d in include_dirs], None, config, source),
                                 c_path)
        r = done.get(text)
        if r is None:
            key = (hashlib.sha256(text.encode()).hexdigest(), c_path.name, entry, config.label)
            r = PROVED.get(key)
            if r is None:
                r = _prove_text(text, c_path, entry, config, cache)
                PROVED[key] = r
                while len(PROVED) > 256:   # the oldest proofs go first
                    del PROVED[next(iter(PROVED))]
            r = dict(r)
        else:
            r = dict(r, configuration=config.label, features=features(config))
        done.setdefault(text, r)
        results.append(r)
    out = dict(results[0])
    del out["configuration"], out["features"]
    out["configurations"] = [r["configuration"] for r in results]
    out["per_configuration"] = {
        r["configuration"]: {k: r[k] for k in ("features", "functions", "loops", "max_loop_trips",
                                               "asm_statements", "asm_loops")}
        for r in results}
    return out
