"""The walk over the generated C's AST for the C-source proof, with the checks made on each
declaration and function body: no allocator or forbidden call, no variable-length array,
every array size a positive compile-time constant, no function pointers, no goto, no
`while`/`do` loop other than `do { ... } while (0)`.  `for` loops are handed to
loop_bounds.py, inline-assembly markers to asm_check.py and the call graph it records to
call_graph.py; each violation raises CompilerBug naming the function and line.

Local names are resolved with C's block scopes (a stack of scopes: function parameters,
each compound statement, each `for` with its C99 declaration), so an inner declaration
never stands for an outer variable of the same name.  A local may not reuse the name of an
enum constant: bounds and array sizes read enum constants by name.
"""
from __future__ import annotations

from pathlib import Path

from pycparser import c_ast

from ..errors import CompilerBug
from .c_intervals import INT_RANGES, IntervalEval, type_name
from .asm_check import LOOP_MARKER, MARKER, AsmChecks
from .c_parse import from_fake_include, walk
from .call_graph import CallGraphChecks
from .loop_bounds import ForLoopBounds

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


def _where(node) -> str:
    c = getattr(node, "coord", None)
    return f"{Path(c.file).name}:{c.line}" if c is not None and c.file else "?"


class CSourceChecker(ForLoopBounds, CallGraphChecks, AsmChecks):
    """One pass over the AST: `run()` checks every declaration and function body and
    records the call graph; `check_calls(entry)` then checks the graph.  `asm` is the
    list of inline-assembly statements the markers in the AST refer to (asm_check.py)."""

    def __init__(self, ast: c_ast.FileAST, fname: str, asm: list | None = None):
        self.ast = ast
        self.fname = fname
        self.enums: dict[str, int] = {}
        self.ev = IntervalEval(self.enums)
        self.defined: dict[str, c_ast.FuncDef] = {}
        self.declared_fns: set[str] = set()
        self.lib_fns: set[str] = set()
        self.calls: dict[str, list[tuple[str, c_ast.Node]]] = {}
        self.loops = 0
        self.max_trips = 0
        self.arrays = 0
        self.fn = None                    # function being checked, for messages
        self.scopes: list[dict[str, c_ast.Node]] = []   # innermost last
        self.addr_taken: set[str] = set()  # names whose address the function takes
        self.asm = asm or []
        self.asm_guards: dict[int, tuple[str, int]] = {}
        self.asm_statements = 0
        self.asm_loops = 0

    def lookup_local(self, name: str):
        """The declaration `name` refers to at this point of the current function, or None."""
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def bug(self, node, msg: str):
        where = f"in function {self.fn}" if self.fn else "at file scope"
        c = getattr(node, "coord", None)
        if (c is None or not c.line) and getattr(self, "last_placed", None) is not None:
            node = self.last_placed   # pycparser 2.x gives a cast's type name line 0
        raise CompilerBug(f"C proof: {where} ({_where(node)}): {msg}")

    # ---- declarations and types ----
    def collect(self):
        for ext in self.ast.ext:
            for n in walk(ext):
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
                if from_fake_include(ext):
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
            if d.name in self.enums:
                self.bug(d, f"local {d.name!r} has the name of an enum constant")
            self.scopes[-1][d.name] = d
        unsized_ok = "extern" in (d.storage or []) or d.init is not None
        self.check_type(d.type, d, f"{d.name!r}" if d.name else "declaration", unsized_ok,
                        top_fn=isinstance(d.type, c_ast.FuncDecl))
        if d.name in ALLOCATORS and not from_fake_include(d):
            self.bug(d, f"declares allocator {d.name}")

    # ---- the walk over function bodies ----
    def run(self):
        self.collect()
        for ext in self.ast.ext:
            if from_fake_include(ext):
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
        self.scopes = [{}]
        self.calls[self.fn] = []
        self.check_type(fd.decl.type, fd.decl, f"function {self.fn!r}", False, top_fn=True)
        ft = fd.decl.type
        for p in (ft.args.params if ft.args else []):
            if isinstance(p, c_ast.Decl) and p.name:
                if p.name in self.enums:
                    self.bug(p, f"parameter {p.name!r} has the name of an enum constant")
                self.scopes[0][p.name] = p
        self.addr_taken = _addresses_taken(fd.body)
        self.visit(fd.body, {})
        self.scopes = []
        self.fn = None

    def visit(self, n, env: dict[str, tuple[int, int]], callee_pos: bool = False):
        """Check the subtree at `n`; `env` holds the value intervals of the enclosing loop
        variables and of the const integer locals in scope."""
        if n is None:
            return
        c = getattr(n, "coord", None)
        if c is not None and c.line:
            self.last_placed = n   # the nearest node with a line, for bug() messages
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
            tn = type_name(n)
            if n.init is not None and tn in INT_RANGES and "const" in (n.quals or []):
                r = self.ev.interval(n.init, env)
                lo, hi = INT_RANGES[tn]
                if r is not None and lo <= r[0] and r[1] <= hi:
                    env[n.name] = r
            return
        if isinstance(n, c_ast.Compound):
            block_env = dict(env)   # declarations extend it for the rest of this block only
            self.scopes.append({})
            for item in n.block_items or []:
                self.visit(item, block_env)
            self.scopes.pop()
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
            if self.fn is None:
                self.bug(n, f"calls {name} outside any function")
            if name in (MARKER, LOOP_MARKER):
                self.check_asm_call(n)
                self.visit(n.args, env)
                return
            if self.lookup_local(name) is not None:
                self.bug(n, f"call through the variable {name!r} (a function pointer)")
            self.check_name(n, name)
            self.calls[self.fn].append((name, n))
            self.visit(n.args, env)
            return
        if isinstance(n, c_ast.ID):
            if self.lookup_local(n.name) is None:
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
            self.scopes.append({})   # the C99 declaration in the init is the loop's own
            self.check_for(n, env)
            self.scopes.pop()
            return
        if isinstance(n, c_ast.If):
            self.note_asm_guard(n, env)
        for _, child in n.children():
            self.visit(child, env)

    def check_name(self, node, name: str):
        if name in ALLOCATORS:
            self.bug(node, f"calls allocator {name} (model code must not allocate memory)")
        if name in FORBIDDEN_CALLS:
            self.bug(node, f"calls {name} (non-local control flow or callbacks are not allowed)")


def _addresses_taken(body) -> set[str]:
    """Names `&name` is applied to anywhere in `body` (by name, whatever the scope: a loop
    counter with one could be changed through a pointer)."""
    return {n.expr.name for n in walk(body)
            if isinstance(n, c_ast.UnaryOp) and n.op == "&" and isinstance(n.expr, c_ast.ID)}
