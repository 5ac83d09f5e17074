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


def target_advice(r: dict, numbers: bool = False) -> str | None:
    """One sentence for the generic --target cortex-m (report["core_specific"], estimate.py):
    which cores it suits and what the core-specific target saves on this model; numbers: with
    both estimates (report.md)."""
    cs = r.get("core_specific")
    if r.get("target") != "cortex-m" or cs is None:
        return None
    est = (f" (~{int(cs['est_instructions']):,} against ~{int(r['est_instructions']):,})"
           if numbers else "")
    return ("generic Cortex-M (ARMv7-M, no DSP, soft float; runs on any M3 or later): for a "
            "Cortex-M4/M7/M33 use --target cortex-m4/m7/m33: estimated "
            f"{cs['times_fewer']:.1f} times fewer instructions for this model{est}; "
            "for an M55, --target cortex-m55")
