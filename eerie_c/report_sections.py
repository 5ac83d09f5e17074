"""report.md's measurement section and per-layer table (report.py assembles the page)."""
from __future__ import annotations

from .report_text import _b, _cell, _shape

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
           f"QEMU -icount, {'minstret' if str(r.get('target', '')).startswith('riscv') else 'SysTick'})"]
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
    chosen = [op for op in r.get("ops", []) if op.get("choice")]
    if chosen:   # what --optimize decided where a layer had a choice
        out += ["", f"Choices under --optimize {r.get('optimize', 'balanced')} (layers with a choice of "
                "kernel or weight format):", ""]
        out += [f"- {op['index']} {_cell(op.get('name') or op['function'])}: {_cell(op['choice'], 120)}"
                for op in chosen]
    return out


def quantization_lines(r: dict) -> list[str]:
    """report.md's section for a PT2E-quantized PyTorch program: how many ops run in int8 and
    every float island (ops left in float between a DEQUANTIZE and a QUANTIZE), with the
    source lines that made it and why it was not folded."""
    q = r.get("quantization")
    if not q:
        return []
    out = ["", "## Quantization", "",
           f"PT2E int8 program: {q['int8_ops']} ops run on int8 kernels, {q['float_ops']} in float."]
    islands = q.get("float_islands", [])
    if not islands:
        return out + ["", "No float islands: every op between the input's QUANTIZE and the "
                      "output's DEQUANTIZE runs in int8."]
    out += ["", f"{len(islands)} float island(s): these ops run in float32 between a DEQUANTIZE "
            "and a QUANTIZE.", "", "| island | ops | source | why float |", "|---|---|---|---|"]
    for k, isl in enumerate(islands, 1):
        ops = ", ".join(f"{n} ({kd})" for n, kd in zip(isl["ops"][:6], isl["kinds"][:6]))
        if len(isl["ops"]) > 6:
            ops += f", ... {len(isl['ops']) - 6} more"
        src = "<br>".join(_short_source(s) for s in isl["sources"][:3]) or "-"
        out.append(f"| {k} | {_cell(ops, 300)} | {_cell(src, 300)} | {_cell(isl['reason'], 200)} |")
    return out


def quantization_summary(r: dict) -> list[str]:
    """--report's lines for the same."""
    q = r.get("quantization")
    if not q:
        return []
    islands = q.get("float_islands", [])
    lines = [f"  quantization: PT2E int8, {q['int8_ops']} int8 ops, {q['float_ops']} float ops, "
             f"{len(islands)} float island(s)"]
    for isl in islands:
        where = _short_source(isl["sources"][0]) if isl["sources"] else "?"
        lines.append(f"    float island: {' '.join(isl['kinds'][:4])}{' ...' if len(isl['kinds']) > 4 else ''}"
                     f" at {where}: {isl['reason']}")
    return lines


def _short_source(src: str) -> str:
    """'File "/a/b/model.py", line 12, in forward' -> 'model.py:12 (forward)'."""
    import re
    m = re.match(r'File "([^"]+)", line (\d+)(?:, in (\S+))?', src)
    if not m:
        return src
    name = m.group(1).replace("\\", "/").rsplit("/", 1)[-1]
    return f"{name}:{m.group(2)}" + (f" ({m.group(3)})" if m.group(3) else "")


def describe_rows(info: dict) -> str:
    from .patch.rows import describe
    return describe(info)


def describe_halo(info: dict) -> str:
    from .patch.cache import describe
    return describe(info)


def patch_lines(r: dict) -> list[str]:
    """The planner's patch-stage choice (patch/stage.py): prefix, grid, halo, extra MACs,
    arena before and after; nothing when patches were off."""
    p = r.get("patches") or {}
    if p.get("mode") in (None, "off"):
        return []
    out = ["", "## Patch-based execution", ""]
    ch = p.get("chosen")
    if ch is None and not p.get("candidates"):
        out.append("No patch stage: the graph does not start with two or more chained int8 CONV_2D / "
                   "DEPTHWISE_CONV_2D / pooling / PAD / element-wise layers whose outputs nothing else "
                   "reads, or no grid keeps the "
                   f"stage within {_bound_text(p)}.")
        return out + _refused(p)
    bound = _bound_text(p)
    if ch is None:
        out.append(f"No patch stage: none of the {len(p.get('candidates', []))} candidates within "
                   f"{bound} made the arena smaller than {_b(p.get('arena_bytes_before'))} layer by layer.")
        return out + _refused(p)
    how = (f"in {ch['tiles']} steps of rows (each step: the first layer's next rows, then every "
           f"later layer's rows whose windows are in)" if ch.get("halo") == "cached" else
           f"tile by tile, grid {ch['grid'][0]}x{ch['grid'][1]} ({ch['tiles']} tiles) over the last layer's output")
    out += [f"- stage: the first {ch['layers']} layers (ops {', '.join(map(str, ch['ops']))}) run {how}",
            f"- patch buffers: {_b(ch['patch_buffer_bytes'])} ("
            + ("one per layer, each keeping its halo rows between bands; those that keep none share "
               "two slots; the kernels' scratch after them" if ch.get("halo") == "cached"
               else "two live at a time, at the two ends of one block")
            + (", after the ring of input rows)" if p.get("input_rows") else ")"),
            f"- stage output over its input: {_b(ch.get('output_over_input_bytes', 0))} shared (no tile "
            f"writes over input a later tile reads; proved byte by byte)",
            f"- extra MACs from recomputed halos: {ch['extra_macs']:,} "
            f"({p.get('extra_macs_percent')}% of the model's {p.get('model_macs_before', 0):,}; "
            f"bound {p.get('max_recompute_percent')}%)",
            f"- arena: {_b(p.get('arena_bytes_before'))} layer by layer, {_b(p.get('arena_bytes_after'))} with the stage",
            *([f"- {describe_halo(ch)}"] if ch.get("halo") else []),
            _instruction_line(r, p, bound),
            *([f"- {describe_rows(p['input_rows'])}"] if p.get("input_rows") else []),
            "", "| layer | kind | output | largest region per tile (halo included) | patch buffer B | offset |",
            "|---|---|---|---|---:|---:|"]
    for lay in ch["per_layer"]:
        buf = "-" if lay["buffer_bytes"] is None else f"{lay['buffer_bytes']:,}"
        off = "-" if lay["buffer_offset"] is None else str(lay["buffer_offset"])
        out.append(f"| {_cell(lay['layer'])} | {lay['kind']} | {_shape(lay['output'])} | "
                   f"{lay['max_region'][0]}x{lay['max_region'][1]} | {buf} | {off} |")
    return out + _refused(p)


def _bound_text(p: dict) -> str:
    if p.get("bound_on") == "estimated instructions":
        return (f"{p.get('max_recompute_percent')}% estimated instruction growth (and extra MACs) "
                f"of the model's {p.get('est_instructions_before') or 0:,}")
    return f"{p.get('max_recompute_percent')}% extra MACs (no instruction estimate for this target)"


def _instruction_line(r: dict, p: dict, bound: str) -> str:
    if p.get("est_growth_percent") is None:
        return f"- instructions: no estimate for this target; bound {bound}"
    line = (f"- instructions: ~{p.get('est_instructions_before', 0):,} layer by layer, "
            f"~{p.get('est_instructions_after', 0):,} with the stage (estimate, "
            f"{p.get('est_instruction_ratio')}x, +{p['est_growth_percent']}%; bound {p.get('max_recompute_percent')}%)")
    if r.get("instructions"):   # after a board run: the stage's model as measured
        line += (f"; measured with the stage: {int(r['instructions']):,} "
                 f"({int(r['instructions']) / max(p.get('est_instructions_before') or 1, 1):.2f}x the "
                 f"layer-by-layer estimate)")
    return line


def _refused(p: dict) -> list[str]:
    rows = p.get("refused") or []
    if not rows:
        return []
    out = ["", "Refused prefixes (no grid within the bound):", "",
           "| layers | cheapest grid | est. instruction growth | extra MACs | why |", "|---:|---|---:|---:|---|"]
    for x in rows:
        est = "-" if x.get("est_growth_percent") is None else f"{x['est_growth_percent']}%"
        out.append(f"| {x['layers']} | {x['grid'][0]}x{x['grid'][1]} | {est} | "
                   f"{x['extra_macs_percent']}% | {x['reason']} |")
    return out
