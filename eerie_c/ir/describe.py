"""How a message names a tensor or an op of the IR: model-supplied names escaped and
shortened, so that a hostile name cannot break the one-line error it appears in."""
from __future__ import annotations


def quote(name: str, limit: int = 48) -> str:
    """A model-supplied name made safe for a one-line message (escaped, shortened)."""
    s = name if len(name) <= limit else name[:limit] + "..."
    return repr(s)


def tensor_where(t) -> str:
    return f"tensor {t.id[1:] if t.id.startswith('t') else t.id} ({quote(t.label)})"


def op_where(op) -> str:
    return f"op {op.index} ({op.kind} {quote(op.name)})"
