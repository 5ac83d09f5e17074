"""report.md's measurement section and per-layer table (report.py assembles the page)."""
from __future__ import annotations

from .report import _b, _cell, _shape

EST_NOTE = ("est. instructions: a compile-time estimate (eerie_c/estimate.py: MACs and tensor "
            "elements times per-kernel costs fitted to per-layer QEMU counts of this target's "
            "kernel family; cortex-m0 scaled from cortex-m3), not a measurement; '-' for the host target.")


def measurement_lines(r: dict) -> list[str]:
    """What `eerie-c run --board` measured in QEMU, beside the compile-time figures."""
    if r.get("instructions") is None:
        return []
    per = r.get("instructions_per_inference") or [r["instructions"]]
    out = ["", f"## Measured on {_cell(r.get('board', '?'))} (QEMU)", "",
           f"Measured instructions per inference: {int(r['instructions']):,} (worst of {len(per)}; "
           f"QEMU -icount, SysTick)"]
    if len(per) > 1:
        out.append(f"- each inference: {', '.join(f'{int(n):,}' for n in per)}")
    if r.get("est_instructions"):
        out.append(f"- compile-time estimate: {int(r['est_instructions']):,} "
                   f"({r['est_instructions'] / max(int(r['instructions']), 1):.2f}x the measurement)")
    for key, label in (("invoke_stack_bytes", "stack used by NAME_invoke"),
                       ("stack_high_water_bytes", "stack high-water of the whole firmware"),
                       ("stack_reserve_bytes", "stack reserve (linker script)")):
        if r.get(key) is not None:
            out.append(f"- {label}: {_b(r[key])}")
    if r.get("stack_bound_bytes") is not None and r.get("invoke_stack_bytes") is not None:
        ok = int(r["invoke_stack_bytes"]) <= int(r["stack_bound_bytes"])
        out.append(f"- proven stack bound {_b(r['stack_bound_bytes'])} "
                   + ("covers the measurement" if ok else "is BELOW the measurement"))
    return out


def layer_rows(r: dict) -> list[str]:
    out = ["| # | layer | op | input shapes | output shape | MACs | weight bytes | activation bytes "
           "| est. instructions |",
           "|---:|---|---|---|---|---:|---:|---:|---:|"]
    for op in r.get("ops", []):
        act = sum(t["bytes"] for t in op["inputs"] + op["outputs"])
        ins = ", ".join(_shape(t["shape"]) for t in op["inputs"]) or "-"
        outs = ", ".join(_shape(t["shape"]) for t in op["outputs"])
        est = op.get("est_instructions")
        name = _cell(op.get("name") or op["function"])
        out.append(f"| {op['index']} | {name} | {op['kind']} | {ins} | {outs} | {op['macs']:,} | "
                   f"{op.get('weight_bytes', 0):,} | {act:,} | {'-' if est is None else f'{int(est):,}'} |")
    total = r.get("est_instructions")
    out += ["", f"Estimated instructions per inference: {'-' if total is None else f'{int(total):,}'}. "
            + EST_NOTE]
    return out
