"""Human-readable views of report.json: report.md beside it, and the `--report` summary.

Everything here reads the report dict only, so the markdown can never disagree with the JSON.
"""
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


def _budget_rows(r: dict) -> list[tuple[str, str, str, str]]:
    """Board budgets (the firmware's needs: model + runtime + I/O buffers) with headroom."""
    b = r.get("budget") or {}
    rows = []
    for what, used, cap in (("flash", b.get("flash_bytes", r.get("flash_bytes")), b.get("board_flash_bytes")),
                            ("RAM", b.get("ram_bytes", r.get("ram_bytes")), b.get("board_ram_bytes"))):
        if used is None:
            continue
        head = "-" if cap is None else f"{int(cap) - int(used):,} B ({100.0 * (int(cap) - int(used)) / int(cap):.1f}%)"
        rows.append((what, _b(used), _b(cap), head))
    return rows


def render_markdown(r: dict) -> str:
    out = [f"# {r['name']}: eerie-c compile report", ""]
    out += [f"- model: `{_cell(r.get('model', '?'), 200)}`", f"- target: `{r.get('target', '?')}`"
            + (f", board `{r['board']}`" if r.get("board") else ""),
            f"- layers: {len(r.get('ops', []))}, MACs per inference: {r.get('macs', 0):,}"]
    for kind in ("inputs", "outputs"):
        for k, t in enumerate(r.get(kind, [])):
            q = f", scale {t['scale']:.6g}, zero point {t['zero_point']}" if t.get("scale") is not None else ""
            out.append(f"- {kind[:-1]} {k}: {t['dtype']} {_shape(t['shape'])} ({t['bytes']} B){q}")
    out += ["", "## Memory", "", "| item | bytes |", "|---|---:|"]
    for key, label in (("arena_bytes", "activation arena"), ("state_bytes", "state (variable tensors, persist across calls)"),
                       ("constant_bytes", "constants (weights, requantization)"),
                       ("code_bytes", "code"), ("flash_bytes", "flash total"),
                       ("static_data_bytes", "model static data (besides the arena)"),
                       ("ram_static_bytes", "firmware data + bss (measured)"), ("stack_bound_bytes", "stack bound (proven)"),
                       ("ram_bytes", "RAM total (arena + static + stack bound)"),
                       ("invoke_stack_bytes", "stack used by NAME_invoke (measured in QEMU)"),
                       ("stack_high_water_bytes", "stack high-water of the whole firmware (measured)"),
                       ("firmware_stack_bound_bytes", "stack bound of the whole firmware (proven: start-up, harness, model, one interrupt)")):
        if r.get(key) is not None:
            out.append(f"| {label} | {int(r[key]):,} |")
    rows = _budget_rows(r)
    if rows:
        out += ["", "| budget | used | available | headroom |", "|---|---:|---:|---:|"]
        out += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    if r.get("instructions") is not None:
        out += ["", f"Measured instructions per inference: {int(r['instructions']):,}"]
    out += ["", "## Layers", "",
            "| # | layer | op | output shape | MACs | weight bytes | activation bytes | est. instructions |",
            "|---:|---|---|---|---:|---:|---:|---:|"]
    for op in r.get("ops", []):
        act = sum(t["bytes"] for t in op["inputs"] + op["outputs"])
        outs = ", ".join(_shape(t["shape"]) for t in op["outputs"])
        est = op.get("est_instructions")
        name = _cell(op.get("name") or op["function"])
        out.append(f"| {op['index']} | {name} | {op['kind']} | {outs} | {op['macs']:,} | "
                   f"{op.get('weight_bytes', 0):,} | {act:,} | {'-' if est is None else f'{int(est):,}'} |")
    out += ["", "## Verification", ""]
    for v in r.get("verified", []):
        details = ", ".join(f"{k} {v[k]}" for k in sorted(v) if k not in ("check", "ok") and not isinstance(v[k], (dict, list)))
        out.append(f"- {'PASS' if v.get('ok') else 'FAIL'} `{v['check']}`" + (f": {details}" if details else ""))
    return "\n".join(out) + "\n"


def summary_text(r: dict) -> str:
    lines = [f"{r['name']} ({printable(r.get('model', '?'), 200)}) for {r.get('target', '?')}"
             + (f" on {r['board']}" if r.get("board") else "")
             + f": {len(r.get('ops', []))} layers, {r.get('macs', 0):,} MACs"]
    mem = [f"arena {_b(r.get('arena_bytes'))}", f"constants {_b(r.get('constant_bytes'))}"]
    for key, label in (("stack_bound_bytes", "stack bound"), ("ram_bytes", "RAM"), ("flash_bytes", "flash")):
        if r.get(key) is not None:
            mem.append(f"{label} {_b(r[key])}")
    lines.append("  memory: " + ", ".join(mem))
    for a, b, c, d in _budget_rows(r):
        if c != "-":
            lines.append(f"  {a}: {b} of {c}, headroom {d}")
    checks = r.get("verified", [])
    lines.append("  verified: " + (", ".join(f"{v['check']} {'ok' if v.get('ok') else 'FAILED'}" for v in checks) or "-"))
    return "\n".join(lines)
