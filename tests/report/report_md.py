"""Read report.md's tables back (the tests compare them with report.json)."""
from __future__ import annotations


def num(text: str) -> int:
    return int(text.replace(",", "").replace(" B", ""))


def _table(md: str, header_start: str) -> list[dict]:
    lines = md.splitlines()
    k = next(i for i, ln in enumerate(lines) if ln.startswith(header_start))
    head = [c.strip() for c in lines[k].strip("|").split("|")]
    rows = []
    for ln in lines[k + 2:]:
        if not ln.startswith("|"):
            break
        cells = [c.strip() for c in ln.strip("|").split("|")]
        assert len(cells) == len(head), ln
        rows.append(dict(zip(head, cells)))
    return rows


def memory_rows(md: str) -> dict[str, str]:
    return {row["item"]: row["bytes"] for row in _table(md, "| item | bytes |")}


def layer_rows(md: str) -> list[dict]:
    return _table(md, "| # | layer | op |")
