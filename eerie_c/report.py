"""Human-readable views of report.json: report.md beside it, and the `--report` summary.

Everything here reads the report dict only, so the markdown can never disagree with the JSON.
"""
from __future__ import annotations

from .report_text import _b, _cell, _shape, printable, target_advice  # noqa: F401 (printable: API)


MEMORY_ROWS = (
    ("arena_bytes", "activation arena"),
    ("state_bytes", "state (variable tensors, persist across calls)"),
    ("constant_bytes", "constants (weights, requantization)"),
    ("code_bytes", "code (model object)"),
    ("model_flash_bytes", "flash: model (code + constants)"),
    ("static_data_bytes", "model static data (besides the arena)"),
    ("stack_bound_bytes", "stack bound (proven)"),
    ("ram_bytes", "RAM: model (arena + static data + stack bound)"),
)
# After `eerie-c run --board`: the built firmware, measured.
MEASURED_ROWS = (
    ("flash_bytes", "flash: whole firmware ELF (model + runtime + harness, measured)"),
    ("ram_static_bytes", "firmware data + bss (measured)"),
    ("invoke_stack_bytes", "stack used by NAME_invoke (measured in QEMU)"),
    ("stack_high_water_bytes", "stack high-water of the whole firmware (measured)"),
    ("firmware_stack_bound_bytes", "stack bound of the whole firmware (proven: start-up, harness, model, one interrupt)"),
)
BUDGET_LABELS = {"flash": "firmware flash (model + runtime + harness, compile-time figure)",
                 "RAM": "firmware RAM (arena + static data + I/O buffers + stack reserve)"}


def _budget_rows(r: dict) -> list[tuple[str, str, str, str]]:
    """Board budgets (the firmware's needs: model + runtime + I/O buffers) with headroom;
    none without a board."""
    b = r.get("budget") or {}
    rows = []
    for what, used, cap in (("flash", b.get("flash_bytes"), b.get("board_flash_bytes")),
                            ("RAM", b.get("ram_bytes"), b.get("board_ram_bytes"))):
        if used is None or cap is None:
            continue
        head = f"{int(cap) - int(used):,} B ({100.0 * (int(cap) - int(used)) / int(cap):.1f}%)"
        rows.append((what, _b(used), _b(cap), head))
    return rows


def _measured(r: dict) -> bool:
    return r.get("instructions") is not None


def note_lines(r: dict) -> list[str]:
    """What the TFLite frontend normalised in the file rather than refuse it (as TFLM reads
    it: frontend/validate.py; hybrid weights dequantized: passes/dequantize_hybrid.py), one
    line each."""
    notes = r.get("notes", [])
    if not notes:
        return []
    return ["", "## Normalised on load", "",
            "The file has these irregularities; eerie-c reads them as TFLM does, or (hybrid "
            "weights, which TFLM refuses) as the line says:",
            ""] + [f"- {_cell(n, 300)}" for n in notes]


def render_markdown(r: dict) -> str:
    from .report_sections import layer_rows, measurement_lines, patch_lines, quantization_lines
    out = [f"# {r['name']}: eerie-c compile report", ""]
    out += [f"- model: `{_cell(r.get('model', '?'), 200)}`", f"- target: `{r.get('target', '?')}`"
            + (f", board `{r['board']}`" if r.get("board") else ""),
            f"- layers: {len(r.get('ops', []))}, MACs per inference: {r.get('macs', 0):,}"]
    if target_advice(r):
        out.append(f"- {target_advice(r, numbers=True)}")
    for kind in ("inputs", "outputs"):
        for k, t in enumerate(r.get(kind, [])):
            q = f", scale {t['scale']:.6g}, zero point {t['zero_point']}" if t.get("scale") is not None else ""
            out.append(f"- {kind[:-1]} {k}: {t['dtype']} {_shape(t['shape'])} ({t['bytes']} B){q}")
    out += ["", "## Memory", "", "| item | bytes |", "|---|---:|"]
    rows = MEMORY_ROWS + (MEASURED_ROWS if _measured(r) else MEASURED_ROWS[-1:])
    for key, label in rows:
        value = r.get(key, r.get("flash_bytes") if key == "model_flash_bytes" else None)
        if value is not None:
            out.append(f"| {label} | {int(value):,} |")
    budget = _budget_rows(r)
    if budget:
        out += ["", f"Board budget ({_cell(r.get('board', '?'))}): what the whole firmware needs, "
                "so more than the model's figures above.", "",
                "| budget | used | available | headroom |", "|---|---:|---:|---:|"]
        out += [f"| {BUDGET_LABELS[a]} | {b} | {c} | {d} |" for a, b, c, d in budget]
    out += patch_lines(r)
    out += measurement_lines(r)
    out += quantization_lines(r)
    out += note_lines(r)
    out += ["", "## Layers", ""] + layer_rows(r)
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
    for key, label in (("stack_bound_bytes", "stack bound"), ("ram_bytes", "RAM"),
                       ("model_flash_bytes", "flash (model)")):
        if r.get(key) is not None:
            mem.append(f"{label} {_b(r[key])}")
    lines.append("  memory: " + ", ".join(mem))
    if target_advice(r):
        lines.append(f"  target: {target_advice(r)}")
    for a, b, c, d in _budget_rows(r):
        if c != "-":
            lines.append(f"  {a}: {b} of {c}, headroom {d}")
    if r.get("est_instructions") is not None:
        lines.append(f"  instructions per inference: ~{int(r['est_instructions']):,} (compile-time estimate)"
                     + (f", {int(r['instructions']):,} measured" if _measured(r) else ""))
    from .report_sections import quantization_summary
    lines += quantization_summary(r)
    ch = (r.get("patches") or {}).get("chosen")
    if ch:
        p = r["patches"]
        lines.append(f"  patches: first {ch['layers']} layers in {ch['grid'][0]}x{ch['grid'][1]} tiles, arena "
                     f"{_b(p['arena_bytes_before'])} -> {_b(p['arena_bytes_after'])}, "
                     f"+{p.get('extra_macs_percent', 0)}% MACs")
    checks = r.get("verified", [])
    lines += [f"  normalised on load: {printable(n, 300)}" for n in r.get("notes", [])]
    lines.append("  verified: " + (", ".join(f"{v['check']} {'ok' if v.get('ok') else 'FAILED'}" for v in checks) or "-"))
    return "\n".join(lines)
