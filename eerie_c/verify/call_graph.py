"""Call-graph checks for the C-source proof: every called function is defined in the file
or declared by the verifier's stand-in headers (fake_include/), and the call graph over the
functions defined in the file has no cycle, so there is no recursion (a cycle is reported as
`f -> g -> f`).

Compiler builtins are not a loophole: only the few in ALLOWED_BUILTINS may be called, each
a pure function of its arguments that compiles to a handful of instructions (or a libgcc
helper the stack bound sees in gcc's call graph).  __builtin_alloca, __builtin_stack_save,
__builtin_frame_address, __builtin_apply, __builtin_longjmp and the rest are rejected.
"""
from __future__ import annotations

from ..errors import CompilerBug
from .c_parse import FAKE_INCLUDE

ALLOWED_BUILTINS = frozenset({
    "__builtin_expect", "__builtin_clz", "__builtin_ctz", "__builtin_clrsb",
    "__builtin_popcount", "__builtin_bswap16", "__builtin_bswap32",
})


class CallGraphChecks:
    """The call-graph checks of the C-source checker (c_checker.CSourceChecker), kept here as a mixin.

    The host class provides: `bug(node, msg)` (raises, naming the function in `fn`), `fn`,
    `fname`, `defined` (name -> FuncDef), `lib_fns` (names declared by fake_include/) and
    `calls` (caller -> [(callee name, call node)], filled while walking the bodies).
    """

    def check_calls(self, entry: str):
        """Check every callee is known and the graph acyclic; return (functions reachable
        from `entry`, the longest call chain from it, the external functions they call)."""
        for fn, calls in self.calls.items():
            self.fn = fn
            for name, node in calls:
                if name in self.defined or name in self.lib_fns:
                    continue
                if name in ALLOWED_BUILTINS:
                    continue
                if name.startswith("__builtin_"):
                    self.bug(node, f"calls {name}, a compiler builtin outside the allow-list "
                                   f"({', '.join(sorted(ALLOWED_BUILTINS))})")
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
    """(functions reachable from `entry`, sorted; length of its longest call chain)."""
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
