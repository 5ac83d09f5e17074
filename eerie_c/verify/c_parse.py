"""Turn the generated C into a pycparser AST for the C-source proof.

Preprocessing uses gcc -E with -undef (no compiler-specific macros, so `#if defined(
__GNUC__)` branches take their portable side; pass `defines` to check a target's branches)
and -nostdinc with the stand-in headers in fake_include/.  `__attribute__((...))` is
removed by a -D define, and inline assembly statements are replaced by `((void)0)` after
checking their template does not touch the stack pointer or call anything.  Long numeric
weight tables are shrunk before parsing, since their values play no part in the proof.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from pycparser import c_ast, c_parser

from ..errors import CompilerBug

FAKE_INCLUDE = Path(__file__).resolve().parent / "fake_include"

_ASM_RE = re.compile(r"\b(?:__asm__|__asm|asm)\b\s*((?:(?:__volatile__|__volatile|volatile|goto|inline)\s*)*)\(")
_ASM_DENY = re.compile(r"\b(sp|r13|rsp|esp|push|pop|bl|blx|call|svc|stm\w*|ldm\w*)\b", re.I)


def strip_asm(text: str, fname: str) -> tuple[str, int]:
    """Replace each inline-assembly statement by ((void)0), refusing templates that could
    move the stack pointer or call code the stack bound does not see."""
    out, pos, count = [], 0, 0
    while True:
        m = _ASM_RE.search(text, pos)
        if m is None:
            out.append(text[pos:])
            return "".join(out), count
        depth, i, in_str = 1, m.end(), None
        while i < len(text) and depth:
            ch = text[i]
            if in_str:
                if ch == "\\":
                    i += 1
                elif ch == in_str:
                    in_str = None
            elif ch in "\"'":
                in_str = ch
            elif ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
            i += 1
        body = text[m.end():i - 1]
        template = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', body.split(":")[0]))
        if _ASM_DENY.search(template):
            line = text.count("\n", 0, m.start()) + 1
            raise CompilerBug(f"C proof: inline assembly {template!r} in {fname} (preprocessed line "
                              f"{line}) may move the stack pointer or call code; not verifiable")
        out.append(text[pos:m.start()])
        out.append("((void)0)")
        pos, count = i, count + 1


def preprocess(c_path: Path, include_dirs: list[Path], defines: list[str] | None = None,
               cpp: str = "gcc") -> str:
    """The preprocessed text of `c_path`, seeing only fake_include/ and `include_dirs`."""
    if shutil.which(cpp) is None:
        raise CompilerBug(f"C proof: preprocessor {cpp!r} is not installed")
    cmd = [cpp, "-E", "-std=c99", "-undef", "-nostdinc", "-isystem", str(FAKE_INCLUDE),
           *[f"-I{d}" for d in include_dirs], "-D__attribute__(x)=", "-D__extension__=",
           "-D__restrict=restrict", "-D__restrict__=restrict", "-D__inline=inline",
           "-D__inline__=inline", *(defines or []), str(c_path)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise CompilerBug(f"C proof: preprocessing {c_path.name} failed (model code may include only "
                          f"{', '.join(sorted(x.name for x in FAKE_INCLUDE.glob('*.h')))} and its own "
                          f"headers):\n{p.stderr.strip()}")
    return p.stdout


_NUM = re.compile(r"[+-]?(?:0[xX][0-9a-fA-F]+[uUlL]*|(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[uUlLfF]*)")
_NUM_CHARS = frozenset("0123456789abcdefABCDEFxX.+-uUlL, \t\r\n")


def _shrink_tables(text: str) -> str:
    """Replace long all-numeric initialiser lists (weight tables) by {0}: their values play no
    part in the proof (array sizes are declared explicitly) and parsing them dominates time.
    A linear scan, not one big regex (which backtracks badly on lists that do not match)."""
    out, pos = [], 0
    while True:
        i = text.find("{", pos)
        if i < 0:
            out.append(text[pos:])
            return "".join(out)
        j = i + 1
        while j < len(text) and text[j] in _NUM_CHARS:
            j += 1
        if j < len(text) and text[j] == "}":
            items = [x.strip() for x in text[i + 1:j].split(",")]
            if items and items[-1] == "":
                items.pop()
            if len(items) >= 16 and all(_NUM.fullmatch(x) for x in items):
                out.append(text[pos:i])
                out.append("{0}")
                pos = j + 1
                continue
        out.append(text[pos:j])
        pos = j


def parse(text: str, c_path: Path) -> c_ast.FileAST:
    """Parse preprocessed, asm-free text; a parse failure is a compiler bug."""
    text = re.sub(r"\b(__volatile__|__volatile)\b", "volatile", text)
    text = _shrink_tables(text)
    try:
        return c_parser.CParser().parse(text, str(c_path))
    except Exception as e:   # pycparser raises ParseError; anything it cannot parse is ours
        raise CompilerBug(f"C proof: pycparser cannot parse {c_path.name}: {e}") from e


def walk(n):
    """Every node of the subtree at `n`, `n` first."""
    yield n
    for _, c in n.children():
        yield from walk(c)


def from_fake_include(node) -> bool:
    """Was this node declared by one of the verifier's stand-in headers?"""
    c = getattr(node, "coord", None)
    return c is not None and c.file is not None and str(c.file).startswith(str(FAKE_INCLUDE))
