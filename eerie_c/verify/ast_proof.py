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

Preprocessing uses gcc -E with -undef (no compiler-specific macros, so `#if defined(
__GNUC__)` branches take their portable side; pass `defines` to check a target's branches)
and -nostdinc with the stand-in headers in fake_include/.  `__attribute__((...))` is
removed by a -D define, and inline assembly statements are replaced by `((void)0)` after
checking their template does not touch the stack pointer or call anything.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from pycparser import c_ast, c_parser

from ..errors import CompilerBug

FAKE_INCLUDE = Path(__file__).resolve().parent / "fake_include"

ALLOCATORS = frozenset({
    "malloc", "calloc", "realloc", "free", "alloca", "__builtin_alloca",
    "__builtin_alloca_with_align", "__builtin_alloca_with_align_and_max", "__builtin_malloc",
    "__builtin_calloc", "__builtin_realloc", "__builtin_free", "aligned_alloc",
    "posix_memalign", "memalign", "valloc", "pvalloc", "reallocarray", "strdup", "strndup",
    "_malloc_r", "_calloc_r", "_realloc_r", "_free_r", "sbrk", "_sbrk", "brk", "mmap",
    "munmap", "pvPortMalloc", "vPortFree", "k_malloc", "k_free", "os_malloc", "os_free",
})
FORBIDDEN_CALLS = frozenset({
    "setjmp", "longjmp", "_setjmp", "_longjmp", "sigsetjmp", "siglongjmp",
    "__builtin_setjmp", "__builtin_longjmp", "qsort", "bsearch", "atexit", "exit", "_Exit",
    "abort", "signal", "raise",
})

_ASM_RE = re.compile(r"\b(?:__asm__|__asm|asm)\b\s*((?:(?:__volatile__|__volatile|volatile|goto|inline)\s*)*)\(")
_ASM_DENY = re.compile(r"\b(sp|r13|rsp|esp|push|pop|bl|blx|call|svc|stm\w*|ldm\w*)\b", re.I)

# Integer types a loop variable may have, with their value ranges.  `int`, `long` and
# `size_t` are taken at their smallest width among our targets (32 bits), which only makes
# the overflow check stricter.
_INT_RANGES = {
    "char": (-128, 127), "signed char": (-128, 127), "int8_t": (-128, 127),
    "unsigned char": (0, 255), "uint8_t": (0, 255),
    "short": (-32768, 32767), "short int": (-32768, 32767), "signed short": (-32768, 32767),
    "int16_t": (-32768, 32767), "unsigned short": (0, 65535), "uint16_t": (0, 65535),
    "int": (-2**31, 2**31 - 1), "signed": (-2**31, 2**31 - 1), "signed int": (-2**31, 2**31 - 1),
    "long": (-2**31, 2**31 - 1), "long int": (-2**31, 2**31 - 1), "int32_t": (-2**31, 2**31 - 1),
    "int_fast8_t": (-128, 127), "int_fast16_t": (-32768, 32767), "int_fast32_t": (-2**31, 2**31 - 1),
    "ptrdiff_t": (-2**31, 2**31 - 1),
    "unsigned": (0, 2**32 - 1), "unsigned int": (0, 2**32 - 1), "unsigned long": (0, 2**32 - 1),
    "uint32_t": (0, 2**32 - 1), "size_t": (0, 2**32 - 1), "uint_fast32_t": (0, 2**32 - 1),
    "long long": (-2**63, 2**63 - 1), "int64_t": (-2**63, 2**63 - 1),
    "unsigned long long": (0, 2**64 - 1), "uint64_t": (0, 2**64 - 1),
}
_UNSIGNED_TYPES = {k for k, (lo, _) in _INT_RANGES.items() if lo == 0}
_SIZEOF = {"char": 1, "signed char": 1, "unsigned char": 1, "int8_t": 1, "uint8_t": 1,
           "short": 2, "unsigned short": 2, "int16_t": 2, "uint16_t": 2, "int": 4,
           "unsigned": 4, "unsigned int": 4, "int32_t": 4, "uint32_t": 4, "float": 4,
           "long long": 8, "int64_t": 8, "uint64_t": 8, "double": 8}


# ---------------------------------------------------------------------------------------
# preprocessing and parsing

def _strip_asm(text: str, fname: str) -> tuple[str, int]:
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
    text = re.sub(r"\b(__volatile__|__volatile)\b", "volatile", text)
    text = _shrink_tables(text)
    try:
        return c_parser.CParser().parse(text, str(c_path))
    except Exception as e:   # pycparser raises ParseError; anything it cannot parse is ours
        raise CompilerBug(f"C proof: pycparser cannot parse {c_path.name}: {e}") from e


# ---------------------------------------------------------------------------------------
# constant and interval evaluation

def _c_int(text: str) -> int | None:
    t = text.rstrip("uUlL")
    try:
        if t.lower().startswith("0x"):
            return int(t, 16)
        if t.lower().startswith("0b"):
            return int(t, 2)
        if len(t) > 1 and t.startswith("0"):
            return int(t, 8)
        return int(t)
    except ValueError:
        return None


def _cdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _type_name(node) -> str | None:
    """'unsigned int' etc. for a Typename/Decl whose type is a plain identifier type."""
    t = node.type if isinstance(node, (c_ast.Typename, c_ast.Decl)) else node
    if isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.IdentifierType):
        return " ".join(t.type.names)
    return None


class _Eval:
    """Integer constant expressions, and intervals over enclosing loop variables."""

    def __init__(self, enums: dict[str, int]):
        self.enums = enums

    def const(self, e) -> int | None:
        r = self.interval(e, {})
        return r[0] if r is not None and r[0] == r[1] else None

    def interval(self, e, env: dict[str, tuple[int, int]]) -> tuple[int, int] | None:
        if isinstance(e, c_ast.Constant):
            if e.type in ("int", "unsigned int", "long int", "unsigned long int", "long long int",
                          "unsigned long long int") or e.type.endswith("int"):
                v = _c_int(e.value)
                return None if v is None else (v, v)
            if e.type == "char" and len(e.value) == 3:
                return (ord(e.value[1]),) * 2
            return None
        if isinstance(e, c_ast.ID):
            if e.name in env:
                return env[e.name]
            if e.name in self.enums:
                return (self.enums[e.name],) * 2
            return None
        if isinstance(e, c_ast.Cast):
            tn = _type_name(e.to_type)
            if tn not in _INT_RANGES:
                return None
            r = self.interval(e.expr, env)
            lo, hi = _INT_RANGES[tn]
            return r if r is not None and lo <= r[0] and r[1] <= hi else None
        if isinstance(e, c_ast.UnaryOp):
            if e.op == "sizeof":
                tn = _type_name(e.expr) if isinstance(e.expr, c_ast.Typename) else None
                return (_SIZEOF[tn],) * 2 if tn in _SIZEOF else None
            r = self.interval(e.expr, env)
            if r is None:
                return None
            if e.op == "-":
                return (-r[1], -r[0])
            if e.op == "+":
                return r
            if r[0] == r[1]:
                if e.op == "~":
                    return (~r[0],) * 2
                if e.op == "!":
                    return (int(not r[0]),) * 2
            return None
        if isinstance(e, c_ast.TernaryOp):
            c = self.interval(e.cond, env)
            a, b = self.interval(e.iftrue, env), self.interval(e.iffalse, env)
            if c is not None and (c[0] > 0 or c[1] < 0):
                return a
            if c == (0, 0):
                return b
            if a is None or b is None:
                return None
            return (min(a[0], b[0]), max(a[1], b[1]))
        if isinstance(e, c_ast.BinaryOp):
            a, b = self.interval(e.left, env), self.interval(e.right, env)
            if a is None or b is None:
                return None
            op = e.op
            if op == "+":
                return (a[0] + b[0], a[1] + b[1])
            if op == "-":
                return (a[0] - b[1], a[1] - b[0])
            if op == "*":
                p = [x * y for x in a for y in b]
                return (min(p), max(p))
            if op in ("/", "%") and b[0] == b[1] and b[0] > 0:
                if op == "/":
                    return (_cdiv(a[0], b[0]), _cdiv(a[1], b[0]))
                if a[0] == a[1]:
                    return (a[0] - _cdiv(a[0], b[0]) * b[0],) * 2
                return (min(0, -(b[0] - 1)) if a[0] < 0 else 0, b[0] - 1 if a[1] > 0 else 0)
            if op in ("<", ">", "<=", ">=", "==", "!="):
                if op in (">", ">="):
                    a, b, op = b, a, "<" if op == ">" else "<="
                if op == "<" and (a[1] < b[0] or a[0] >= b[1]):
                    return (int(a[1] < b[0]),) * 2
                if op == "<=" and (a[1] <= b[0] or a[0] > b[1]):
                    return (int(a[1] <= b[0]),) * 2
                if op in ("==", "!=") and (a[1] < b[0] or b[1] < a[0]):
                    return (int(op == "!="),) * 2
            if a[0] != a[1] or b[0] != b[1]:
                return None
            x, y = a[0], b[0]
            ops = {"<<": lambda: x << y if 0 <= y < 64 else None,
                   ">>": lambda: x >> y if 0 <= y < 64 else None,
                   "&": lambda: x & y, "|": lambda: x | y, "^": lambda: x ^ y,
                   "&&": lambda: int(bool(x) and bool(y)), "||": lambda: int(bool(x) or bool(y)),
                   "<": lambda: int(x < y), ">": lambda: int(x > y), "<=": lambda: int(x <= y),
                   ">=": lambda: int(x >= y), "==": lambda: int(x == y), "!=": lambda: int(x != y)}
            f = ops.get(op)
            v = f() if f else None
            return None if v is None else (v, v)
        return None


def _maybe_unsigned(e) -> bool:
    """Could this expression have an unsigned type (so a comparison with it is unsigned)?"""
    found = False

    class V(c_ast.NodeVisitor):
        def visit_Constant(self, n):
            nonlocal found
            if "unsigned" in n.type or re.search(r"[uU]", n.value.lstrip("0xX")) and n.type != "char":
                found = True

        def visit_Cast(self, n):
            nonlocal found
            if _type_name(n.to_type) in _UNSIGNED_TYPES:
                found = True
            self.generic_visit(n)

        def visit_UnaryOp(self, n):
            nonlocal found
            if n.op == "sizeof":
                found = True
            self.generic_visit(n)

    V().visit(e)
    return found


# ---------------------------------------------------------------------------------------
# the checker

def _where(node) -> str:
    c = getattr(node, "coord", None)
    return f"{Path(c.file).name}:{c.line}" if c is not None and c.file else "?"


def _from_fake(node) -> bool:
    c = getattr(node, "coord", None)
    return c is not None and c.file is not None and str(c.file).startswith(str(FAKE_INCLUDE))


class _Checker:
    def __init__(self, ast: c_ast.FileAST, fname: str):
        self.ast = ast
        self.fname = fname
        self.enums: dict[str, int] = {}
        self.ev = _Eval(self.enums)
        self.defined: dict[str, c_ast.FuncDef] = {}
        self.declared_fns: set[str] = set()
        self.lib_fns: set[str] = set()
        self.calls: dict[str, list[tuple[str, c_ast.Node]]] = {}
        self.loops = 0
        self.max_trips = 0
        self.arrays = 0
        self.fn = None                    # function being checked, for messages
        self.locals: dict[str, c_ast.Node] = {}

    def bug(self, node, msg: str):
        where = f"in function {self.fn}" if self.fn else "at file scope"
        raise CompilerBug(f"C proof: {where} ({_where(node)}): {msg}")

    # ---- declarations and types ----
    def collect(self):
        for ext in self.ast.ext:
            for n in _walk(ext):
                if isinstance(n, c_ast.Enum) and n.values is not None:
                    nxt = 0
                    for en in n.values.enumerators:
                        v = self.ev.const(en.value) if en.value is not None else nxt
                        if v is not None:
                            self.enums[en.name] = v
                            nxt = v + 1
            if isinstance(ext, c_ast.FuncDef):
                self.defined[ext.decl.name] = ext
            elif isinstance(ext, c_ast.Decl) and isinstance(ext.type, c_ast.FuncDecl):
                self.declared_fns.add(ext.name)
                if _from_fake(ext):
                    self.lib_fns.add(ext.name)

    def check_type(self, t, node, what: str, unsized_ok: bool, top_fn: bool = False):
        """Walk a declarator chain: constant array sizes, no pointers to functions."""
        first = True
        while t is not None:
            if isinstance(t, c_ast.ArrayDecl):
                self.arrays += 1
                if t.dim is None:
                    if not (first and unsized_ok):
                        self.bug(node, f"{what} is an array of unspecified size")
                else:
                    n = self.ev.const(t.dim)
                    if n is None:
                        self.bug(node, f"{what} is a variable-length array (size is not a compile-time constant)")
                    if n <= 0:
                        self.bug(node, f"{what} has array size {n}")
                t = t.type
            elif isinstance(t, c_ast.PtrDecl):
                inner = t.type
                while isinstance(inner, c_ast.PtrDecl):
                    inner = inner.type
                if isinstance(inner, c_ast.FuncDecl):
                    self.bug(node, f"{what} is a function pointer")
                t = t.type
            elif isinstance(t, c_ast.FuncDecl):
                if not (first and top_fn):
                    self.bug(node, f"{what} has a function type (a function pointer)")
                for p in (t.args.params if t.args else []):
                    if isinstance(p, c_ast.Decl):
                        self.check_type(p.type, p, f"parameter {p.name!r}", unsized_ok=True)
                t = t.type
            elif isinstance(t, c_ast.TypeDecl):
                t = t.type
            elif isinstance(t, (c_ast.Struct, c_ast.Union)):
                for d in t.decls or []:
                    self.check_type(d.type, d, f"member {d.name!r}", unsized_ok=False)
                return
            else:
                return
            first = False

    def check_decl(self, d: c_ast.Decl, is_local: bool):
        if d.name and is_local:
            self.locals[d.name] = d
        unsized_ok = "extern" in (d.storage or []) or d.init is not None
        self.check_type(d.type, d, f"{d.name!r}" if d.name else "declaration", unsized_ok,
                        top_fn=isinstance(d.type, c_ast.FuncDecl))
        if d.name in ALLOCATORS and not _from_fake(d):
            self.bug(d, f"declares allocator {d.name}")

    # ---- the walk over function bodies ----
    def run(self):
        self.collect()
        for ext in self.ast.ext:
            if _from_fake(ext):
                continue
            if isinstance(ext, c_ast.FuncDef):
                self.check_function(ext)
            elif isinstance(ext, c_ast.Decl):
                self.fn = None
                self.check_decl(ext, is_local=False)
                if ext.init is not None:
                    self.visit(ext.init, {})
            elif isinstance(ext, c_ast.Typedef):
                self.fn = None
                self.check_type(ext.type, ext, f"typedef {ext.name!r}", unsized_ok=False)

    def check_function(self, fd: c_ast.FuncDef):
        self.fn = fd.decl.name
        self.locals = {}
        self.calls[self.fn] = []
        self.check_type(fd.decl.type, fd.decl, f"function {self.fn!r}", False, top_fn=True)
        ft = fd.decl.type
        for p in (ft.args.params if ft.args else []):
            if isinstance(p, c_ast.Decl) and p.name:
                self.locals[p.name] = p
        self.visit(fd.body, {})
        self.fn = None

    def visit(self, n, env: dict[str, tuple[int, int]], callee_pos: bool = False):
        if n is None:
            return
        if isinstance(n, c_ast.Decl):
            if n.name in env:
                self.bug(n, f"declaration of {n.name!r} shadows an enclosing loop variable")
            self.check_decl(n, is_local=True)
            self.visit(n.init, env)
            if n.bitsize is not None:
                self.visit(n.bitsize, env)
            # A const integer local keeps the value range of its initialiser for the rest of
            # its block, so loops may be bounded by it (e.g. a pooling window clipped at the
            # borders: `const int fy_hi = H - iy0 < FH ? H - iy0 : FH;`).
            tn = _type_name(n)
            if n.init is not None and tn in _INT_RANGES and "const" in (n.quals or []):
                r = self.ev.interval(n.init, env)
                lo, hi = _INT_RANGES[tn]
                if r is not None and lo <= r[0] and r[1] <= hi:
                    env[n.name] = r
            return
        if isinstance(n, c_ast.Compound):
            block_env = dict(env)   # declarations extend it for the rest of this block only
            for item in n.block_items or []:
                self.visit(item, block_env)
            return
        if isinstance(n, c_ast.Typedef):
            self.check_type(n.type, n, f"typedef {n.name!r}", unsized_ok=False)
            return
        if isinstance(n, c_ast.Typename):
            self.check_type(n.type, n, "type name", unsized_ok=False)
            return
        if isinstance(n, c_ast.FuncCall):
            if not isinstance(n.name, c_ast.ID):
                self.bug(n, "call through an expression (a function pointer), not a named function")
            name = n.name.name
            if name in self.locals:
                self.bug(n, f"call through the variable {name!r} (a function pointer)")
            self.check_name(n, name)
            self.calls[self.fn].append((name, n))
            self.visit(n.args, env)
            return
        if isinstance(n, c_ast.ID):
            if n.name not in self.locals:
                self.check_name(n, n.name)
                if n.name in self.defined or n.name in self.declared_fns:
                    self.bug(n, f"uses function {n.name} as a value (a function pointer)")
            return
        if isinstance(n, c_ast.Goto):
            self.bug(n, f"goto {n.name}")
        if isinstance(n, (c_ast.While, c_ast.DoWhile)):
            if isinstance(n, c_ast.DoWhile) and self.ev.const(n.cond) == 0:
                self.visit(n.stmt, env)
                return
            kind = "while" if isinstance(n, c_ast.While) else "do-while"
            self.bug(n, f"{kind} loop has no compile-time maximum trip count (emit "
                        "`for (trip = 0; trip < MAX_TRIPS && (cond); ++trip)` instead)")
        if isinstance(n, c_ast.For):
            self.check_for(n, env)
            return
        for _, child in n.children():
            self.visit(child, env)

    def check_name(self, node, name: str):
        if name in ALLOCATORS:
            self.bug(node, f"calls allocator {name} (model code must not allocate memory)")
        if name in FORBIDDEN_CALLS:
            self.bug(node, f"calls {name} (non-local control flow or callbacks are not allowed)")

    # ---- loops ----
    def check_for(self, n: c_ast.For, env):
        cands = []
        for c in _and_chain(n.cond):
            if isinstance(c, c_ast.BinaryOp) and c.op in ("<", "<=", ">", ">="):
                flip = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
                if isinstance(c.left, c_ast.ID) and not _mentions(c.right, c.left.name):
                    cands.append((c.left.name, c.op, c.right))
                elif isinstance(c.right, c_ast.ID) and not _mentions(c.left, c.right.name):
                    cands.append((c.right.name, flip[c.op], c.left))
        if n.cond is None or not cands:
            self.bug(n, "for loop condition is not a comparison of the loop variable with a "
                        "compile-time bound (`i < N`, `i >= N`, ...)")
        # The for-init declaration (C99) is a local of the loop.
        if isinstance(n.init, c_ast.DeclList):
            for d in n.init.decls:
                self.check_decl(d, is_local=True)
                self.visit(d.init, env)
        elif n.init is not None:
            self.visit(n.init, env)
        reasons = []
        for var, op, bound_e in cands:
            r = self.try_bound(n, var, op, bound_e, env)
            if isinstance(r, str):
                reasons.append(r)
                continue
            body_range, trips = r
            self.loops += 1
            self.max_trips = max(self.max_trips, trips)
            self.visit(n.cond, env)
            self.visit(n.next, env)
            self.visit(n.stmt, {**env, var: body_range})
            return
        self.bug(n, "for loop is not bounded by compile-time constants: " + "; ".join(reasons))

    def try_bound(self, n: c_ast.For, var: str, op: str, bound_e, env):
        inc = op in ("<", "<=")
        d = self.locals.get(var)
        if d is None:
            return f"loop variable {var!r} is not a local variable"
        tname = _type_name(d)
        if tname not in _INT_RANGES:
            return f"loop variable {var!r} does not have an integer type"
        tlo, thi = _INT_RANGES[tname]
        bound = self.ev.interval(bound_e, env)
        if bound is None:
            return f"bound `{_src(bound_e)}` of {var!r} is not a compile-time constant"
        init_e = _find_init(n.init, var)
        if init_e is None:
            return f"loop variable {var!r} is not initialised in the for statement"
        init = self.ev.interval(init_e, env)
        if init is None:
            return f"initial value `{_src(init_e)}` of {var!r} is not a compile-time constant"
        step, step_node = _find_step(n.next, var, self.ev)
        if step is None:
            return f"step of {var!r} is not `++{var}`, `{var} += K` or the like with a constant K"
        if (step > 0) != inc:
            return f"step of {var!r} goes the wrong way for `{var} {op} ...`"
        k = abs(step)
        if tname not in _UNSIGNED_TYPES and (_maybe_unsigned(bound_e) or _maybe_unsigned(init_e)) \
                and min(init[0], bound[0]) - k < 0:
            return f"comparison of {var!r} may be unsigned while {var!r} can be negative"
        if not (tlo <= init[0] and init[1] <= thi and tlo <= bound[0] and bound[1] <= thi):
            return f"initial value or bound does not fit the type {tname} of {var!r}"
        if inc:
            top = bound[1] if op == "<=" else bound[1] - 1
            trips = max(0, -(-(top + 1 - init[0]) // k))
            if top + k > thi:
                return f"{var!r} ({tname}) would overflow on its last step"
            body = (init[0], max(init[0], top))
        else:
            bot = bound[0] if op == ">=" else bound[0] + 1
            trips = max(0, -(-(init[1] + 1 - bot) // k))
            if bot - k < tlo:
                return f"{var!r} ({tname}) would wrap below its minimum on its last step"
            body = (min(init[1], bot), init[1])
        for part, where in ((n.cond, "condition"), (n.stmt, "body")):
            m = _modifies(part, var)
            if m is not None:
                self.bug(m, f"loop variable {var!r} is modified in the loop {where}")
        for e in (n.next.exprs if isinstance(n.next, c_ast.ExprList) else [n.next]):
            if e is not step_node:
                m = _modifies(e, var)
                if m is not None:
                    self.bug(m, f"loop variable {var!r} is modified twice in the loop step")
        return body, trips

    # ---- call graph ----
    def check_calls(self, entry: str):
        for fn, calls in self.calls.items():
            self.fn = fn
            for name, node in calls:
                if name in self.defined or name in self.lib_fns:
                    continue
                if name.startswith("__builtin_"):
                    continue
                self.bug(node, f"calls {name}, which is neither defined in the model C nor a known "
                               f"library function (see {FAKE_INCLUDE.name}/)")
        self.fn = None
        graph = {fn: [c for c, _ in calls if c in self.defined] for fn, calls in self.calls.items()}
        cycle = _find_cycle(graph)
        if cycle:
            first = cycle[0]
            node = next(nd for c, nd in self.calls[first] if c == cycle[1])
            self.fn = first
            if len(cycle) == 2:
                self.bug(node, f"recursion: {first} calls itself")
            self.bug(node, "indirect recursion: " + " -> ".join(cycle))
        if entry not in self.defined:
            raise CompilerBug(f"C proof: entry function {entry} is not defined in {self.fname}")
        reach, depth = _reach(graph, entry)
        ext = sorted({c for fn in reach for c, _ in self.calls[fn] if c not in self.defined})
        return reach, depth, ext


def _walk(n):
    yield n
    for _, c in n.children():
        yield from _walk(c)


def _src(e) -> str:
    from pycparser import c_generator
    try:
        return c_generator.CGenerator().visit(e)
    except Exception:
        return type(e).__name__


def _and_chain(e):
    if isinstance(e, c_ast.BinaryOp) and e.op == "&&":
        return _and_chain(e.left) + _and_chain(e.right)
    return [e] if e is not None else []


def _mentions(e, var: str) -> bool:
    return any(isinstance(n, c_ast.ID) and n.name == var for n in _walk(e))


def _find_init(init, var: str):
    items = []
    if isinstance(init, c_ast.DeclList):
        items = init.decls
    elif isinstance(init, c_ast.ExprList):
        items = init.exprs
    elif init is not None:
        items = [init]
    for it in items:
        if isinstance(it, c_ast.Decl) and it.name == var and it.init is not None:
            return it.init
        if isinstance(it, c_ast.Assignment) and it.op == "=" and isinstance(it.lvalue, c_ast.ID) \
                and it.lvalue.name == var:
            return it.rvalue
    return None


def _find_step(nxt, var: str, ev: _Eval):
    items = nxt.exprs if isinstance(nxt, c_ast.ExprList) else ([nxt] if nxt is not None else [])
    for e in items:
        if isinstance(e, c_ast.UnaryOp) and isinstance(e.expr, c_ast.ID) and e.expr.name == var:
            if e.op in ("++", "p++"):
                return 1, e
            if e.op in ("--", "p--"):
                return -1, e
        if isinstance(e, c_ast.Assignment) and isinstance(e.lvalue, c_ast.ID) and e.lvalue.name == var:
            k = None
            if e.op in ("+=", "-="):
                k = ev.const(e.rvalue)
                k = None if k is None else (k if e.op == "+=" else -k)
            elif e.op == "=" and isinstance(e.rvalue, c_ast.BinaryOp) and e.rvalue.op in ("+", "-"):
                r = e.rvalue
                if isinstance(r.left, c_ast.ID) and r.left.name == var:
                    k = ev.const(r.right)
                    k = None if k is None else (k if r.op == "+" else -k)
                elif r.op == "+" and isinstance(r.right, c_ast.ID) and r.right.name == var:
                    k = ev.const(r.left)
            if k is not None and k != 0:
                return k, e
            return None, None
    return None, None


def _modifies(e, var: str):
    """The first node in `e` that assigns `var`, steps it or takes its address."""
    if e is None:
        return None
    for n in _walk(e):
        if isinstance(n, c_ast.Assignment) and isinstance(n.lvalue, c_ast.ID) and n.lvalue.name == var:
            return n
        if isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--", "&") \
                and isinstance(n.expr, c_ast.ID) and n.expr.name == var:
            return n
    return None


def _find_cycle(graph: dict[str, list[str]]) -> list[str] | None:
    """A cycle as [f, g, ..., f], or None. Iterative DFS, deterministic order."""
    color: dict[str, int] = {}
    for root in sorted(graph):
        if color.get(root):
            continue
        stack = [(root, iter(graph.get(root, [])))]
        path = [root]
        color[root] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                color[node] = 2
                stack.pop()
                path.pop()
                continue
            if color.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if not color.get(nxt):
                color[nxt] = 1
                stack.append((nxt, iter(graph.get(nxt, []))))
                path.append(nxt)
    return None


def _reach(graph, entry):
    depth: dict[str, int] = {}

    def d(f):   # acyclic, proved above
        if f not in depth:
            depth[f] = 1 + max((d(c) for c in graph.get(f, [])), default=0)
        return depth[f]

    d(entry)
    seen, todo = {entry}, [entry]
    while todo:
        for c in graph.get(todo.pop(), []):
            if c not in seen:
                seen.add(c)
                todo.append(c)
    return sorted(seen), depth[entry]


def prove_c(c_path: Path, include_dirs: list[Path], entry: str, defines: list[str] | None = None,
            cpp: str = "gcc") -> dict:
    """Prove the generated C file free of heap use, VLAs, recursion, function pointers and
    unbounded loops. Raises CompilerBug on the first violation; returns a report dict."""
    c_path = Path(c_path)
    text = preprocess(c_path, [Path(d) for d in include_dirs], defines, cpp)
    text, n_asm = _strip_asm(text, c_path.name)
    ast = parse(text, c_path)
    ch = _Checker(ast, c_path.name)
    ch.run()
    reach, depth, ext = ch.check_calls(entry)
    return {"check": "c_ast", "ok": True, "entry": entry, "functions": len(ch.defined),
            "reachable_functions": len(reach), "call_depth": depth, "loops": ch.loops,
            "max_loop_trips": ch.max_trips, "arrays": ch.arrays, "asm_statements": n_asm,
            "externals": ext}
