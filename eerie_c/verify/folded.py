"""Calls to functions gcc folded into an identical one, resolved for the stack bound.

gcc's identical code folding (-fipa-icf, on at -O2) emits one body for functions that compile
to the same code (two unrolled RNN steps' FULLY_CONNECTED on the same recurrent weights) and
makes the others aliases of it (`.set l102_fc, l96_fc`). The call graph gcc writes with
-fcallgraph-info keeps the calls to the alias but has no node for it, so the alias looks like
an external function and would be charged an external allowance instead of the frames of the
code that really runs. An alias and its body share their section and address in the object's
symbol table: each call to an alias is pointed at the node of the function defined there.
"""
from __future__ import annotations

import functools
import re
import shutil
import subprocess
from pathlib import Path

_DEFINED = re.compile(r'node:\s*\{\s*title:\s*"((?:[^"\\]|\\.)*)"\s*label:\s*"(?:[^"\\]|\\.)*\d+ bytes \(')
_TARGET = re.compile(r'(targetname:\s*")((?:[^"\\]|\\.)*)(")')


def local_function(title: str) -> bool:
    """gcc titles the file's static functions `path/file.c:name`, external callees by name."""
    return ".c:" in title


@functools.lru_cache(maxsize=None)
def _readelf(cc: str | None) -> str | None:
    own = ""
    if cc:
        try:
            own = subprocess.run([cc, "-print-prog-name=readelf"], capture_output=True,
                                 text=True).stdout.strip()
        except OSError:
            pass
    for tool in (own, "readelf"):   # readelf reads any ELF, whatever its machine
        if tool and (shutil.which(tool) or Path(tool).exists()):
            return tool
    return None


def _function_places(obj: Path, cc: str | None) -> dict[str, tuple[str, str]] | None:
    """symbol -> (section index, address) of every function symbol in the object."""
    tool = _readelf(cc)
    if tool is None:
        return None
    p = subprocess.run([tool, "-sW", str(obj)], capture_output=True, text=True)
    if p.returncode != 0:
        return None
    places = {}
    for ln in p.stdout.splitlines():
        f = ln.split()
        if len(f) >= 8 and f[3] == "FUNC":
            places[f[7]] = (f[6], f[1])
    return places


def resolve_folded(ci_text: str, obj: Path, cc: str | None = None) -> str:
    """The .ci text with every call to a folded function pointed at the function whose body it
    shares (unchanged if nothing is folded or the object cannot be read)."""
    defined = set(_DEFINED.findall(ci_text))
    missing = {m.group(2) for m in _TARGET.finditer(ci_text)
               if local_function(m.group(2)) and m.group(2) not in defined}
    if not missing or not Path(obj).exists():
        return ci_text
    places = _function_places(Path(obj), cc)
    if not places:
        return ci_text
    at = {}
    for title in sorted(defined):
        place = places.get(title.rsplit(":", 1)[-1])
        if place is not None:
            at.setdefault(place, title)
    body = {t: at[places[t.rsplit(":", 1)[-1]]] for t in missing
            if places.get(t.rsplit(":", 1)[-1]) in at}
    return _TARGET.sub(lambda m: m.group(1) + body.get(m.group(2), m.group(2)) + m.group(3), ci_text)
