"""The call graph of one compile, reused by an identical compile.

A board compile builds the model's C with `-fstack-usage -fcallgraph-info=su` twice: once in
verify_generated (stack.py: the bound of NAME_invoke) and once more inside the firmware
project's `make stack` (toolchain/firmware.py: the whole firmware's bound). On vww_96_int8 the
second build is 1.3-1.9 s of a 5 s compile, and yields the same call graph: same compiler, same
options, same source. So stack.py's compile remembers its .ci text here (the last few, keyed
by the exact text of the C file and of the headers it includes by quotes) and the firmware's
stack bound takes the model's graph from here when `make -n stack` shows the model compiled

* by the same compiler, on a file and quoted headers of the same text,
* with the same options once include directories, macros the sources never mention and
  repeats are set aside, no option being given two ways (so their order cannot matter),
* with no extra include directory holding a header the sources include with <...>
  (which would shadow the system header the first compile saw).

Anything else (a different compiler or option, a source edited in between) compiles again.
"""
from __future__ import annotations

import re
import shlex
import threading
from collections import OrderedDict
from pathlib import Path

_KEEP = 8   # a compile session verifies one model at a time; tests run a few in one process
_lock = threading.Lock()
_recent: OrderedDict[tuple, list[tuple[str, list[str], str]]] = OrderedDict()

_INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]', re.M)


def _sources(c_path: Path) -> tuple[tuple[str, str], ...] | None:
    """(name, text) of the C file and the quoted headers beside it that it includes; None if
    one of them is missing (the include resolves elsewhere: not a compile we can match)."""
    c_path = Path(c_path)
    out = [(c_path.name, c_path.read_text(errors="surrogateescape"))]
    for _, text in out:   # grows as headers are found: their own quoted includes too
        for kind, name in _INCLUDE.findall(text):
            if kind == '"' and name not in {n for n, _ in out}:
                h = c_path.parent / name
                if not h.is_file():
                    return None
                out.append((name, h.read_text(errors="surrogateescape")))
    return tuple(out)


def _system_includes(sources) -> set[str]:
    return {name for _, text in sources for kind, name in _INCLUDE.findall(text) if kind == "<"}


def _options(cmd: list[str], sources) -> tuple[set[str], list[str]] | None:
    """The options of a compile command that can change its result, as a set, and its
    include directories. None if a -D/-U names a macro the sources mention, or an option is
    given two ways (-O2 and -O0, -fX and -fno-X), where order would matter."""
    texts = "\n".join(text for _, text in sources)
    opts, incs, files = set(), [], []
    it = iter(cmd[1:])
    for a in it:
        if not a.startswith("-"):
            files.append(a)   # the source file; any other is an option's argument we do not know
        elif a == "-c":
            continue
        elif a == "-o":
            next(it, None)
        elif a.startswith("-I"):
            incs.append(a[2:] or next(it, ""))
        elif a.startswith(("-D", "-U")):
            macro = re.split(r"[=(]", (a[2:] or next(it, "")), maxsplit=1)[0]
            if re.search(rf"\b{re.escape(macro)}\b", texts):
                return None
        else:
            opts.add(a)
    keys = [_key(o) for o in opts]
    if len(files) != 1 or not files[0].endswith(".c") or len(keys) != len(set(keys)):
        return None
    return opts, incs


def _shadowed(incs: list[str], cwd: Path | None, sources) -> bool:
    """Does one of these include directories hold a header the sources include with <...>
    (searched before the system's own)?"""
    system = _system_includes(sources)
    return any((Path(cwd or ".") / d / name).exists() for d in incs for name in system)


def _key(option: str) -> str:
    """What an option sets: -O2/-Os -> -O; -fno-x -> -fx; -mcpu=a -> -mcpu."""
    if option.startswith("-O"):
        return "-O"
    option = option.split("=", 1)[0]
    for p in ("-fno-", "-mno-", "-Wno-"):
        if option.startswith(p):
            return option[:2] + option[len(p):]
    return option


def remember(cmd: list[str], c_path: Path, ci_text: str) -> None:
    """Record the .ci a successful compile `cmd` of `c_path` wrote (paths in `cmd` absolute
    or relative to the working directory)."""
    sources = _sources(c_path)
    opts = sources and _options(cmd, sources)
    if not opts or _shadowed(opts[1], None, sources):
        return
    with _lock:
        _recent.setdefault(sources, []).append((cmd[0], list(cmd), ci_text))
        _recent.move_to_end(sources)
        while len(_recent) > _KEEP:
            _recent.popitem(last=False)


def recall(cmd: list[str], c_path: Path, cwd: Path) -> str | None:
    """The .ci text of a remembered compile equivalent to `cmd` (run in `cwd`) on `c_path`,
    else None."""
    sources = _sources(c_path)
    if sources is None:
        return None
    with _lock:
        candidates = list(_recent.get(sources, ()))
    mine = _options(cmd, sources)
    if mine is None or _shadowed(mine[1], cwd, sources):
        return None
    for cc, old_cmd, ci_text in candidates:
        theirs = _options(old_cmd, sources)
        if cc == cmd[0] and theirs is not None and theirs[0] == mine[0]:
            return ci_text
    return None


def split_commands(dry_run: str) -> list[list[str]]:
    """The commands of `make -n` output (one recipe line may chain several with &&)."""
    out: list[list[str]] = []
    for line in dry_run.splitlines():
        cur: list[str] = []
        for tok in shlex.split(line):
            if tok in ("&&", ";"):
                out.append(cur)
                cur = []
            else:
                cur.append(tok)
        out.append(cur)
    return [c for c in out if c]
