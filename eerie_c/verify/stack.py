"""Worst-case stack depth of the model's entry function, from the real toolchain's own numbers.

The model C file is compiled (not linked) with the target's compiler and flags plus
`-fstack-usage -fcallgraph-info=su` (gcc >= 10). gcc then writes, next to the object, a `.ci`
file in VCG format: one node per function it emitted, labelled with its frame size and
qualifier (`static`, `dynamic`, `dynamic,bounded`), one ellipse node per external callee
(library functions, libgcc helpers such as __aeabi_ldivmod, `__indirect_call` for calls
through pointers) and one edge per call. Because this is the compiler's view after inlining
and optimisation, frames are exact for the code that will run.

Rules:
* any frame that is not `static` (a VLA or alloca survived, or the frame size depends on
  run-time values) is a CompilerBug naming the function and its source line;
* an indirect call or a cycle in the call graph is a CompilerBug;
* so is any call to an external allocator (malloc, _malloc_r, alloca, ...) or other
  forbidden function (setjmp, longjmp, exit, ...; see c_checker.py), whether the compiler's
  call graph has it as an edge or only the object's undefined symbols show it: the C-source
  proof rejects these by name, and this is the same rule on the code the compiler emitted
  (a firmware image, program_stack_bound, is held to the allocator part);
* the bound is the maximum, over call paths from `entry`, of the sum of the frames along
  the path, plus the allowance of an external function called at the end of it.

What the bound covers: everything `entry` and its callees push, measured from the stack
pointer at the moment the caller executes its call instruction. gcc's frame sizes include
the saved registers, so on Arm the return address (LR, pushed by the callee) is inside the
callee's frame; on x86-64 the frame includes the 8-byte return address pushed by `call`.
It does not cover the caller's own frame, nor exception/interrupt frames stacked on top of
it by hardware (32 bytes on Cortex-M, 104 with lazy FP state, per nesting level), nor the
dynamic linker's lazy binding on hosted targets.

External callees: their code is not in the file, so each gets a fixed allowance. For Arm the
table below was measured from newlib and libgcc as shipped with arm-none-eabi-gcc 12.2
(newlib 4.3): each function was linked into a small program for cortex-m0, m0plus, m3, m4
(soft-fp and hard), m7, m33 and m55, its disassembly was walked (push/vpush/stmdb/sub sp,
following bl and tail calls through its own callees) and the largest depth over those
multilibs, rounded up to 8 bytes, is the entry. Names not in the table get
ARM_DEFAULT_ALLOWANCE, which is above every soft-float/libgcc helper measured (max 112 B).
On x86-64 hosts a leaf function may also use the 128-byte red zone below the stack pointer,
which gcc leaves out of its frame size: each leaf's depth gets those 128 bytes added.
With the toolchain the tables were made with, a function measured for the compile's own
multilib (lib_stack.py, from the library's machine code) is charged that figure instead: the
all-multilib maximum is the soft-float one, over twice what a core with an FPU uses.
Hosted targets (glibc) get HOST_ALLOWANCE per external callee: the host bound is only a
sanity figure, the promise is made for the Arm targets.
Symbols the object references that the .ci does not attribute to a caller (seen with `nm
-u`) are charged once, at the deepest point, with their allowance.

`program_stack_bound` applies the same rules to a whole firmware image: the .ci files of all
its sources merged, from the reset handler, plus one exception frame and interrupt handler.
"""
from __future__ import annotations

import functools
import re
import shlex
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..errors import CompilerBug, EerieError
from . import ci_cache
from .c_checker import ALLOCATORS, FORBIDDEN_CALLS
from .folded import local_function, resolve_folded
from .lib_stack import ARM_EXTERNAL_STACK

ARM_DEFAULT_ALLOWANCE = 128
HOST_ALLOWANCE = 1024

_NODE = re.compile(r'node:\s*\{\s*title:\s*"((?:[^"\\]|\\.)*)"\s*label:\s*"((?:[^"\\]|\\.)*)"([^}]*)\}')
_EDGE = re.compile(r'edge:\s*\{\s*sourcename:\s*"((?:[^"\\]|\\.)*)"\s*targetname:\s*"((?:[^"\\]|\\.)*)"(?:\s*label:\s*"((?:[^"\\]|\\.)*)")?')
_FRAME = re.compile(r"(\d+) bytes \(([^)]*)\)")


def _display(title: str) -> str:
    """gcc titles static functions `path/file.c:name`; clones carry suffixes
    (l0_conv.constprop.0): keep the function part, suffix included."""
    return title.rsplit(":", 1)[-1] if ".c:" in title or ".h:" in title else title


def _base(title: str) -> str:
    """The source function of a title: l0_conv.constprop.0 -> l0_conv."""
    return _display(title).split(".")[0]


def parse_ci(text: str) -> tuple[dict[str, dict], dict[str, list[tuple[str, str]]]]:
    """-> (nodes, edges). nodes: title -> {"frame", "kind", "where"} for functions defined in
    the file, or {"external": True} for callees outside it; edges: source -> [(target, where)]."""
    nodes: dict[str, dict] = {}
    edges: dict[str, list[tuple[str, str]]] = {}
    for m in _NODE.finditer(text):
        title, label = m.group(1), m.group(2).replace("\\n", "\n")
        lines = label.split("\n")
        fm = _FRAME.search(label)
        if fm:
            nodes[title] = {"frame": int(fm.group(1)), "kind": fm.group(2),
                            "where": Path(lines[1]).name if len(lines) > 1 else "?"}
        else:
            nodes[title] = {"external": True}
    for m in _EDGE.finditer(text):
        edges.setdefault(m.group(1), []).append((m.group(2), m.group(3) or ""))
    return nodes, edges


def _is_arm(cc: str, cflags: list[str]) -> bool:
    return "arm" in Path(cc).name or any(f.startswith(("-mcpu=cortex-m", "-mthumb")) for f in cflags)


def _is_riscv(cc: str) -> bool:
    return Path(cc).name.startswith("riscv")


def _red_zone(cc: str, flags: list[str]) -> int:
    """x86-64 SysV leaf functions may use 128 bytes below the stack pointer (the red zone)
    without counting it in their frame; -fstack-usage leaves it out."""
    if "-mno-red-zone" in flags:
        return 0
    p = subprocess.run([cc, *[f for f in flags if f.startswith("-m")], "-dumpmachine"],
                       capture_output=True, text=True)
    return 128 if p.stdout.startswith(("x86_64", "amd64")) and "-m32" not in flags else 0


@functools.lru_cache(maxsize=None)
def _nm_tool(cc: str) -> str:
    try:
        return subprocess.run([cc, "-print-prog-name=nm"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


def _nm_undefined(cc: str, obj: Path) -> set[str] | None:
    nm = _nm_tool(cc)
    if not nm or (shutil.which(nm) is None and not Path(nm).exists()):
        return None
    p = subprocess.run([nm, "-u", str(obj)], capture_output=True, text=True)
    if p.returncode != 0:
        return None
    return {ln.split()[-1] for ln in p.stdout.splitlines() if ln.strip()}


def object_sizes(cc: str, obj: Path) -> dict | None:
    """Berkeley sizes of the compiled model (text includes read-only data) from the size
    tool beside the compiler (arm-none-eabi-size for arm-none-eabi-gcc, size for cc)."""
    tool = cc[: -len("gcc")] + "size" if cc.endswith("gcc") and cc != "gcc" else "size"
    if shutil.which(tool) is None:
        return None
    p = subprocess.run([tool, "-B", str(obj)], capture_output=True, text=True)
    m = re.search(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s", p.stdout, re.M)
    if p.returncode != 0 or not m:
        return None
    text, data, bss = map(int, m.groups())
    return {"text": text, "data": data, "bss": bss}


def _compile_ci(c_path: Path, include_dirs: list[Path], cc: str, flags: list[str], out_dir: Path):
    """Compile one C file with -fstack-usage -fcallgraph-info=su; -> (nodes, edges, undefined
    symbols, object sizes)."""
    obj = Path(out_dir) / (Path(c_path).stem + ".o")
    cmd = [cc, *flags, *[f"-I{d}" for d in include_dirs], "-fstack-usage",
           "-fcallgraph-info=su", "-c", str(c_path), "-o", str(obj)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise CompilerBug(f"stack bound: compiling {Path(c_path).name} failed "
                          f"({shlex.join(cmd)}):\n{p.stdout}{p.stderr}")
    ci = obj.with_suffix(".ci")
    if not ci.exists():
        raise EerieError(f"stack bound: {cc} wrote no call-graph file (needs gcc >= 10 for "
                         "-fcallgraph-info)")
    text = resolve_folded(ci.read_text(), obj, cc)
    ci_cache.remember(cmd, c_path, text)   # the firmware's `make stack` builds the same again
    with ThreadPoolExecutor(max_workers=1) as pool:   # nm and size at once: both only read
        sizes = pool.submit(object_sizes, cc, obj)
        undefined = _nm_undefined(cc, obj)
        nodes, edges = parse_ci(text)
        return nodes, edges, undefined, sizes.result()


def _check_frames(funcs: dict, edges: dict) -> None:
    for t, n in funcs.items():
        if n["kind"] != "static":
            raise CompilerBug(f"stack bound: function {_base(t)} ({n['where']}) has a "
                              f"{n['kind']} stack frame of {n['frame']}+ bytes: a variable-length "
                              f"array or alloca survived into the generated code, or a call pushes "
                              f"its arguments")
    for src, outs in edges.items():
        for dst, where in outs:
            if dst == "__indirect_call":
                raise CompilerBug(f"stack bound: function {_base(src)} makes an indirect call "
                                  f"({where or funcs.get(src, {}).get('where', '?')})")


def _allowance_for(arm: bool, own: dict[str, int] | None = None, family: str | None = None):
    """`own`: the compile's multilib figures (multilib_stack); a name without one gets the
    all-multilib table's figure, or the default. family "riscv": RISC-V's tables
    (lib_stack_riscv.py) instead of Arm's."""
    if family == "riscv":
        from .lib_stack_riscv import riscv_allowance
        return riscv_allowance(own)

    def allowance(name: str) -> int:
        if not arm:
            return HOST_ALLOWANCE
        return (own or {}).get(name, ARM_EXTERNAL_STACK.get(name, ARM_DEFAULT_ALLOWANCE))
    return allowance


_LIB_FLAGS = ("-mcpu", "-march", "-mthumb", "-mfloat-abi", "-mfpu")


def multilib_stack(cc: str, flags: list[str]) -> dict[str, int]:
    """Library stack depths measured for the multilib these flags link against
    (lib_stack_table.py, made by lib_stack.py), if `cc` is the toolchain they were measured
    with; else {} (the all-multilib table applies)."""
    return dict(_multilib_stack(cc, tuple(f for f in flags if f.startswith(_LIB_FLAGS))))


@functools.lru_cache(maxsize=None)
def _multilib_stack(cc: str, flags: tuple[str, ...]) -> tuple:
    from .lib_stack_table import MULTILIB_STACK, TOOLCHAIN
    try:
        version = subprocess.run([cc, "-dumpfullversion"], capture_output=True, text=True, check=True)
        lib = subprocess.run([cc, *flags, "-print-multi-directory"], capture_output=True, text=True,
                             check=True)
    except (OSError, subprocess.CalledProcessError):
        return ()
    if version.stdout.strip() != TOOLCHAIN:
        return ()
    return tuple(MULTILIB_STACK.get(lib.stdout.strip(), {}).items())


def _deepest(funcs: dict, edges: dict, entry: str, allowance, red_zone: int,
             forbidden: frozenset = ALLOCATORS | FORBIDDEN_CALLS):
    """Worst-case depth of `entry` over the call graph: (bytes, path, depth per function,
    externals charged). Raises CompilerBug on recursion or a call to a `forbidden` external."""
    externals: dict[str, int] = {}
    depth: dict[str, tuple[int, list[str]]] = {}
    state: dict[str, int] = {}

    def walk(f: str) -> tuple[int, list[str]]:
        if state.get(f) == 2:
            return depth[f]
        if state.get(f) == 1:
            raise CompilerBug(f"stack bound: recursion through {_base(f)} ({funcs[f]['where']})")
        state[f] = 1
        best, best_path = 0, []
        for dst, where in edges.get(f, []):
            if dst in funcs:
                d, path = walk(dst)
            elif local_function(dst):   # folded.py resolves gcc's aliases; never guess a frame
                raise CompilerBug(f"stack bound: function {_base(f)} calls {_base(dst)}, which "
                                  f"has no frame in gcc's call graph")
            elif dst in forbidden:
                raise CompilerBug(f"stack bound: function {_base(f)} calls {dst} "
                                  f"({where or funcs[f]['where']}): an allocator or forbidden "
                                  f"function is in the compiled code")
            else:
                externals[dst] = allowance(dst)
                d, path = externals[dst], [dst]
            if d > best:
                best, best_path = d, path
        state[f] = 2
        if not edges.get(f):
            best = red_zone   # a leaf may use the red zone below its frame
        depth[f] = (funcs[f]["frame"] + best, [f] + best_path)
        return depth[f]

    bound, path = walk(entry)
    return bound, path, depth, externals


def _toolchain_facts(cc: str, flags: list[str], arm: bool, riscv: bool) -> tuple[int, dict[str, int]]:
    """(red zone bytes, the library stack figures measured for this multilib)."""
    if riscv:
        from .lib_stack_riscv import riscv_multilib_stack
        own = riscv_multilib_stack(cc, flags)
    else:
        own = multilib_stack(cc, flags) if arm else {}
    return _red_zone(cc, flags), own


def stack_bound(c_path: Path, include_dirs: list[Path], cc: str, cflags: list[str] | str,
                entry: str) -> dict:
    """Compile `c_path` with `cc cflags` and bound the stack depth of `entry`.

    Returns {"stack_bound_bytes", "entry", "functions": {name: {"frame", "kind", "where",
    "calls", "depth"}}, "path": [entry, ..., deepest callee], "externals": {name: allowance},
    "allowance": how externals were charged, "includes": what the figure covers}.
    Raises CompilerBug on a dynamic frame, an indirect call or recursion."""
    c_path = Path(c_path)
    flags = shlex.split(cflags) if isinstance(cflags, str) else list(cflags)
    if shutil.which(cc) is None:
        raise EerieError(f"stack bound: compiler '{cc}' is not installed")
    arm = _is_arm(cc, flags)
    riscv = _is_riscv(cc)
    with tempfile.TemporaryDirectory(prefix="eerie_stack_") as tmp, \
            ThreadPoolExecutor(max_workers=1) as side:
        # What the bound needs to know of the toolchain does not depend on the compile: the
        # queries (small processes each) run while it compiles, not one after another after it.
        facts = side.submit(_toolchain_facts, cc, flags, arm, riscv)
        nodes, edges, undefined, sizes = _compile_ci(c_path, include_dirs, cc, flags, Path(tmp))
        red_zone, own = facts.result()
    funcs = {t: n for t, n in nodes.items() if not n.get("external")}
    _check_frames(funcs, edges)
    allowance = _allowance_for(arm, own, "riscv" if riscv else None)
    if entry not in funcs:
        raise CompilerBug(f"stack bound: entry function {entry} is not in {c_path.name}'s call graph")
    bound, path, depth, externals = _deepest(funcs, edges, entry, allowance, red_zone)
    # Externals the object needs but that no .ci edge attributes (defensive): charge the
    # largest once on top of the deepest path, since any function on it may call it.
    attributed = {d for outs in edges.values() for d, _ in outs} | set(funcs)
    unattributed = sorted((undefined or set()) - attributed)
    bad = [n for n in unattributed if n in ALLOCATORS | FORBIDDEN_CALLS]
    if bad:
        raise CompilerBug(f"stack bound: {c_path.name} references {', '.join(bad)} (an allocator "
                          f"or forbidden function) in the compiled code")
    extra = max((allowance(n) for n in unattributed), default=0)
    for n in unattributed:
        externals[n] = allowance(n)
    reach = set()
    todo = [entry]
    while todo:
        f = todo.pop()
        if f in reach:
            continue
        reach.add(f)
        todo.extend(d for d, _ in edges.get(f, []) if d in funcs)
    return {
        "check": "stack",
        "ok": True,
        "stack_bound_bytes": bound + extra,
        "entry": entry,
        "compiler": shlex.join([cc, *flags]),
        "functions": {_display(t): {"frame": funcs[t]["frame"], "kind": funcs[t]["kind"],
                          "where": funcs[t]["where"], "depth": depth[t][0],
                          "calls": sorted({d for d, _ in edges.get(t, [])})}
                      for t in sorted(reach)},
        "path": [_display(t) for t in path] + ([f"<unattributed: {', '.join(unattributed)}>"] if unattributed else []),
        "externals": dict(sorted(externals.items())),
        "allowance": (_RISCV_ALLOWANCE_TEXT if riscv else
                      "per external callee: its depth measured for this multilib "
                      "(lib_stack_table.py) if known, else the largest over all multilibs "
                      "(arm-none-eabi-gcc 12.2), " f"{ARM_DEFAULT_ALLOWANCE} B if not listed"
                      if arm else
                      f"{HOST_ALLOWANCE} B per external callee (hosted libc, not measured)"),
        "red_zone_bytes": red_zone,
        "object_sizes": sizes,
        "includes": ("frames of the entry function and everything it calls, from the caller's "
                     "call instruction (return address included)"
                     + (f", plus the {red_zone}-byte red zone of the deepest leaf" if red_zone else "")
                     + "; not the caller's frame nor interrupt/exception stacking"),
    }


_RISCV_ALLOWANCE_TEXT = ("per external callee: its depth measured from picolibc/libgcc machine "
                         "code for this multilib (lib_stack_table_riscv.py) if known, else the "
                         "largest over all RV32 multilibs, or the RISC-V default if not listed")


def program_stack_bound(ci_files: list[Path], entry: str, handlers: list[str],
                        exception_frame: int, arm: bool = True, family: str | None = None) -> dict:
    """The stack of a whole program (a firmware image: start-up, harness, runtime and model),
    from the call graphs gcc wrote for each of its source files (`make stack` in a firmware
    project), merged: the deepest path from `entry` (the reset handler), plus one exception
    frame stacked by the hardware and the deepest of `handlers` on top of it (the eerie
    runtime's interrupts share one priority level, so they do not nest)."""
    funcs: dict[str, dict] = {}
    edges: dict[str, list[tuple[str, str]]] = {}
    for ci in ci_files:
        nodes, e = parse_ci(resolve_folded(Path(ci).read_text(), Path(ci).with_suffix(".o")))
        funcs.update({t: n for t, n in nodes.items() if not n.get("external")})
        for src, outs in e.items():
            edges.setdefault(src, []).extend(outs)
    _check_frames(funcs, edges)
    allowance = _allowance_for(arm, family=family)
    for f in [entry, *handlers]:
        if f not in funcs:
            raise CompilerBug(f"stack bound: {f} is not in the firmware's call graph")
    thread, path, _, externals = _deepest(funcs, edges, entry, allowance, 0, ALLOCATORS)
    handler, handler_path = 0, []
    for h in handlers:
        d, hp, _, ext = _deepest(funcs, edges, h, allowance, 0, ALLOCATORS)
        externals.update(ext)
        if d > handler:
            handler, handler_path = d, hp
    return {"stack_bound_bytes": thread + exception_frame + handler,
            "thread_bytes": thread, "exception_frame_bytes": exception_frame,
            "handler_bytes": handler,
            "path": [_display(t) for t in path],
            "handler_path": [_display(t) for t in handler_path],
            "externals": dict(sorted(externals.items()))}
