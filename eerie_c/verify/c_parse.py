"""Turn the generated C into a pycparser AST for the C-source proof.

Preprocessing runs the preprocessor of one configuration (proof_config.py: the target
compiler with the target's flags, or gcc -undef for the portable one) with -nostdinc and the
stand-in headers in fake_include/.  `__attribute__((...))` is removed by a -D define; inline
assembly is handled by asm_check.py before parsing.  Long numeric weight tables are shrunk
before parsing, since their values play no part in the proof.

Parsing is by top-level item (declaration or function definition), memoised in a cache the
caller may share between the configurations of one file: most of a file is the same under
every configuration, and parsing dominates the proof's time.  An item is reparsed unless
its text (with its line marker) and the typedef names it mentions are the same, which is
all pycparser's result depends on.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from pycparser import c_ast, c_parser

from ..errors import CompilerBug
from .proof_config import PORTABLE, ProofConfig

FAKE_INCLUDE = Path(__file__).resolve().parent / "fake_include"


def preprocess(c_path: Path, include_dirs: list[Path], defines: list[str] | None = None,
               config: ProofConfig = PORTABLE, source: str | None = None) -> str:
    """The preprocessed text of `c_path` under `config`, seeing only fake_include/ and
    `include_dirs`; `defines` are extra -D/-U options.  `source`, if given, is preprocessed
    in place of the file's contents (fed on stdin, its lines still numbered as c_path's)."""
    cpp = config.cpp
    if shutil.which(cpp) is None:
        raise CompilerBug(f"C proof: preprocessor {cpp!r} is not installed")
    cmd = [cpp, "-E", *config.flags, *(["-undef"] if config.undef else []), "-nostdinc",
           "-isystem", str(FAKE_INCLUDE),
           *[f"-I{d}" for d in include_dirs], "-D__attribute__(x)=", "-D__extension__=",
           "-D__restrict=restrict", "-D__restrict__=restrict", "-D__inline=inline",
           "-D__inline__=inline", *(defines or [])]
    if source is None:
        p = subprocess.run([*cmd, str(c_path)], capture_output=True, text=True)
    else:
        # run in the file's directory: `#include "x.h"` from stdin searches the working one
        name = str(c_path).replace("\\", "\\\\").replace('"', '\\"')
        p = subprocess.run([*cmd, "-x", "c", "-"], capture_output=True, text=True,
                           input=f'#line 1 "{name}"\n' + source, cwd=Path(c_path).parent)
    if p.returncode != 0:
        raise CompilerBug(f"C proof: preprocessing {c_path.name} for {config.label} failed (model code may include only "
                          f"{', '.join(sorted(x.name for x in FAKE_INCLUDE.glob('*.h')))} and its own "
                          f"headers):\n{p.stderr.strip()}")
    return p.stdout


_NUM = re.compile(r"[+-]?(?:0[xX][0-9a-fA-F]+[uUlL]*|(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[uUlLfF]*)")
_RUN = re.compile(r"[0-9a-fA-FxX.+\-uUlL,\s]*")
_EMPTY_ITEM = re.compile(r"^\s*,|,\s*,")


def shrink_tables(text: str) -> str:
    """Replace long all-numeric initialiser lists (weight tables) by {0}, keeping their line
    count: their values play no part in the proof (array sizes are declared explicitly) and
    parsing them would dominate its time.  A list qualifies when every item is exactly one
    numeric literal: one literal match per comma-separated item and nothing else but
    whitespace and commas (regex scans, no per-item Python loop and no backtracking)."""
    out, pos = [], 0
    while True:
        i = text.find("{", pos)
        if i < 0:
            out.append(text[pos:])
            return "".join(out)
        j = _RUN.match(text, i + 1).end()
        if j < len(text) and text[j] == "}":
            body = text[i + 1:j]
            n_items = body.count(",") + (0 if body.rstrip().endswith(",") else 1)
            if n_items >= 16 and _EMPTY_ITEM.search(body) is None:
                rest, n = _NUM.subn("", body)
                if n == n_items and not rest.strip(" \t\r\n,"):
                    out.append(text[pos:i])
                    out.append("{0}" + "\n" * body.count("\n"))   # keep later lines' numbers
                    pos = j + 1
                    continue
        out.append(text[pos:j])
        pos = j


_MARKER_LINE = re.compile(r'#\s*(\d+)\s+"((?:[^"\\]|\\.)*)"')
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|[{}();]|[^\s{}();"\']+')
_IDENT = re.compile(r"\b[A-Za-z_]\w*")


def _items(text: str) -> list[str]:
    """Split preprocessed text into runs of whole top-level items (a declaration ends at
    its `;`, a function definition at the `}` that closes its body), each run starting with
    a line marker for its first line so that coordinates survive the split."""
    chunks, cur = [], []
    depth = parens = 0
    pending = fn = init = False   # init: the item has a top-level `=` (an initialiser)
    prev = ""
    line, fname = 1, ""
    start_marker = '# 1 ""\n'
    for raw in text.split("\n"):
        m = _MARKER_LINE.match(raw) if raw.startswith("#") else None
        if m:
            line, fname = int(m.group(1)), m.group(2)
            if not cur:
                continue   # the next chunk's own marker says where it starts
            cur.append(raw)
            continue
        if not cur:
            if not raw.strip():
                line += 1
                continue
            start_marker = f'# {line} "{fname}"\n'
        cur.append(raw)
        line += 1
        if raw.startswith("#"):
            continue   # a #pragma: pycparser takes it where it stands
        for t in _TOKEN.findall(raw):
            if t == "{":
                if depth == 0 and not fn and not init and prev == ")":
                    fn = True   # `f(...) {`: a function body; the item ends at its `}`
                depth += 1
            elif t == "}":
                depth -= 1
                if depth == 0 and fn:
                    pending = fn = init = False
                    prev = t
                    continue
            elif t == "(":
                parens += 1
            elif t == ")":
                parens -= 1
            elif t == ";" and depth == 0 and parens == 0:
                pending = fn = init = False
                prev = t
                continue
            elif depth == 0 and parens == 0 and "=" in t and t[0] not in "\"'":
                init = True
            pending = True
            prev = t
        if not pending and depth == 0:
            chunks.append(start_marker + "\n".join(cur))
            cur = []
    if cur:
        chunks.append(start_marker + "\n".join(cur))
    return chunks


class ItemCache(dict):
    """The parse of each top-level item, kept across files for the life of the process:
    consecutive compiles (a test suite, `eerie-c validate` then `run`, the two configurations
    of one proof) share the headers' declarations, the helpers and most kernels, and parsing
    is most of the proof's time. Bounded by the text it holds (oldest items dropped first);
    the checker only reads the ASTs."""

    def __init__(self, max_chars: int = 8_000_000):
        super().__init__()
        self.max_chars, self.chars = max_chars, 0

    def __setitem__(self, key, value):
        if key not in self:
            self.chars += len(key[0])
        super().__setitem__(key, value)
        while self.chars > self.max_chars and len(self) > 1:
            old = next(iter(self))
            self.chars -= len(old[0])
            super().__delitem__(old)


ITEMS = ItemCache()


def parse(text: str, c_path: Path, cache: dict | None = None) -> c_ast.FileAST:
    """Parse preprocessed, asm-free text; a parse failure is a compiler bug.  `cache` (any
    dict, shared between calls; by default the process-wide ITEMS) memoises the parse of
    each top-level item."""
    text = re.sub(r"\b(__volatile__|__volatile)\b", "volatile", text)
    text = shrink_tables(text)
    try:
        return _parse_items(text, c_path, ITEMS if cache is None else cache)
    except Exception:   # pycparser's ParseError, or anything else on a bad split
        pass   # a split the item scanner got wrong: the whole file in one go decides
    try:
        return c_parser.CParser().parse(text, str(c_path))
    except Exception as e:   # pycparser raises ParseError; anything it cannot parse is ours
        raise CompilerBug(f"C proof: pycparser cannot parse {c_path.name}: {e}") from e


def _parse_items(text: str, c_path: Path, cache: dict) -> c_ast.FileAST:
    typedefs: set[str] = set()
    exts = []
    parser = None
    for chunk in _items(text):
        known = tuple(sorted(typedefs.intersection(_IDENT.findall(chunk))))
        key = (chunk, known)
        hit = cache.get(key)
        if hit is None:
            parser = parser or c_parser.CParser()
            # The typedef names the item uses, declared first so it parses as it would in
            # the whole file; their declarations are dropped from the result.
            prelude = "".join(f"typedef int {t};\n" for t in known)
            ast = parser.parse(prelude + chunk, str(c_path))
            hit = cache[key] = ast.ext[len(known):]
        for ext in hit:
            if isinstance(ext, c_ast.Typedef):
                typedefs.add(ext.name)
            elif isinstance(ext, (c_ast.Decl, c_ast.FuncDef)):
                typedefs.discard(ext.name if isinstance(ext, c_ast.Decl) else ext.decl.name)
        exts.extend(hit)
    return c_ast.FileAST(exts)


def walk(n):
    """Every node of the subtree at `n`, `n` first, then each child's subtree in order (the
    order a recursive walk gives). Iterative: a recursive generator resumes once per level
    above each node it yields, which made this walk most of the proof's time on deep kernels."""
    todo = [n]
    while todo:
        node = todo.pop()
        yield node
        kids = node.children()
        if kids:
            todo.extend(c for _, c in reversed(kids))


def from_fake_include(node) -> bool:
    """Was this node declared by one of the verifier's stand-in headers?"""
    c = getattr(node, "coord", None)
    return c is not None and c.file is not None and str(c.file).startswith(str(FAKE_INCLUDE))
