"""Hand-written C snippets through the generated-C proof (verify/ast_proof.py): the tests of
its rules, of its inline-assembly rules and of its soundness fixes all write a snippet, prove
it, and check that a bad one is rejected with a message naming the rule, function and line."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from eerie_c.errors import CompilerBug
from eerie_c.verify.ast_proof import prove_c

HEAD = "#include <stdint.h>\n#include <string.h>\n"


def prove_snippet(tmp_path: Path, body: str, entry: str = "entry", name: str = "snippet",
                  head: str = HEAD, **kw) -> dict:
    """Write head + body to NAME.c and prove it with `entry` as the entry point."""
    c = tmp_path / f"{name}.c"
    c.write_text(head + body)
    return prove_c(c, [tmp_path], entry, **kw)


def line_of(body: str, needle: str, head: str = HEAD) -> int:
    """1-based line of `needle` in the file prove_snippet writes."""
    text = head + body
    return text[:text.index(needle)].count("\n") + 1


def assert_rejected(tmp_path: Path, body: str, pattern: str, needle: str, fn: str = "entry",
                    entry: str = "entry", head: str = HEAD) -> str:
    """The proof rejects the snippet with a message matching `pattern` that names function
    `fn` and the line holding `needle`; -> the message."""
    with pytest.raises(CompilerBug) as e:
        prove_snippet(tmp_path, body, entry, head=head)
    msg = str(e.value)
    assert re.search(pattern, msg), msg
    assert f"in function {fn} (snippet.c:{line_of(body, needle, head)})" in msg, msg
    return msg
