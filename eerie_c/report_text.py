"""Formatting shared by the human-readable reports (report.py, report_sections.py): byte counts,
shapes, and model-supplied text made safe for Markdown and SVG."""
from __future__ import annotations


def printable(text: str, limit: int = 60) -> str:
    """Model-supplied text (layer names, paths: any bytes) made safe for a human-readable view:
    control and format characters become '?', so a name can neither end a Markdown table row
    nor put a character XML 1.0 forbids into memory.svg."""
    return "".join(ch if ch.isprintable() else "?" for ch in str(text))[:limit]


def _cell(text: str, limit: int = 60) -> str:
    """printable() for a Markdown table cell or inline code: no column breaks, no code fences."""
    return printable(text, limit).replace("|", "/").replace("`", "'")


def _b(n) -> str:
    return "-" if n is None else f"{int(n):,} B"


def _shape(s) -> str:
    return "x".join(map(str, s)) or "scalar"
