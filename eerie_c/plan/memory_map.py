"""The arena plan as data for people: one entry per arena buffer (what lives there, at which
offset, for which steps), the peak, and names a person recognises. It goes into report.json
as "memory_plan", and memory.svg / memory.png are drawn from that entry alone, so the picture
can only show what the report says.

It stays in plan/ while the picture moved to memory_picture/: this is planning data (offsets,
live steps, the peak, read straight from the Plan and the graph, the way the planner sees them),
what report.json and any other reader take; the picture is one reader of it.
"""
from __future__ import annotations

from ..ir import Graph
from .arena import Plan


def layer_name(op_name: str, fallback: str = "") -> str:
    """"model/layer/Relu;model/other/..." -> "layer": the most specific scope of the first
    name TFLite joined with ';' (the op's own output)."""
    parts = [p for p in str(op_name).split(";")[0].split("/") if p]
    return (parts[-2] if len(parts) >= 2 else (parts[0] if parts else "")) or fallback


def _producers(g: Graph) -> dict[str, tuple[int, object]]:
    return {tid: (step, op) for step, op in enumerate(g.ops) for tid in op.outputs if tid is not None}


def _group_label(g: Graph, members: list[str], made_by: dict) -> tuple[str, list[str]]:
    """A shared buffer names the first and last layer writing it and why it is shared: an
    in-place kernel overwrote its input, or an aliasing op (RESHAPE) only renamed it."""
    order = sorted(members, key=lambda t: (made_by[t][0] if t in made_by else -1, t))
    names: list[str] = []
    how = "reshaped"
    for tid in order:
        if tid in made_by:
            op = made_by[tid][1]
            name = layer_name(op.name, op.kind)
            if op.attrs.get("inplace_of_input"):
                how = "in place"
        else:   # a graph input: no producing layer
            name = g.t(tid).label or tid
        if name not in names:
            names.append(name)
    if len(order) == 1 or len(names) == 1:
        label = names[0] + ("" if len(order) == 1 else f" ({how}, {len(order)} tensors)")
    else:
        label = f"{names[0]}..{names[-1]} ({how}, {len(order)} tensors)"
    return label, names


def _parts(b) -> list[tuple[int, int, int, int, list[str]]]:
    """A storage group as rectangles: (first step, last step, low byte, high byte, members)
    for each run of steps over which the bytes its live members cover stay the same, one per
    contiguous range of them. Usually one (a tensor, its RESHAPE views, or an equal-size
    in-place chain); more when an in-place op changes the size (the group's bytes in use
    grow or shrink there), so the picture shows what the placer used, not the group's hull."""
    rects = list(b.rects.items())
    out, run = [], None
    for step in range(b.start, b.end + 1):
        ranges = _merge([(off, off + n) for _, (off, n, s, e) in rects if s <= step <= e])
        if run is not None and run[2] == ranges:
            run[1] = step
            continue
        if run is not None:
            out += _emit(run, rects)
        run = [step, step, ranges] if ranges else None
    if run is not None:
        out += _emit(run, rects)
    return out


def _merge(spans):
    """Byte ranges [lo, hi) -> the sorted tuple of their contiguous unions."""
    out = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


def _emit(run, rects):
    """One part per contiguous byte range of a run, naming the members that lie in it."""
    start, end, ranges = run
    res = []
    for lo, hi in ranges:
        members = [tid for tid, (off, n, s, e) in rects
                   if s <= end and start <= e and off < hi and lo < off + n]
        res.append((start, end, lo, hi, members))
    return res


def _tile_loop(st) -> dict:
    """A patch stage's loop for the picture: how many tiles, and the per-tile buffers (and the
    ring of input rows with --input-rows) inside its scratch block, offsets within the block."""
    parts = []
    rows = getattr(st, "rows", None)
    if rows is not None:
        parts.append({"label": f"ring: {rows.ring_rows} input rows", "offset": 0, "size": rows.ring_bytes})
    cache = getattr(st, "cache", None)
    for k, (off, size) in enumerate(zip(st.buf_offsets, st.buf_bytes)):
        if cache is None:
            parts.append({"label": f"layer {k} tile", "offset": off, "size": size})
        else:   # patch/cache.py: a buffer keeps its halo rows between steps, or none
            kept = cache.kept_rows[k]
            label = f"layer {k}: keeps {kept} row{'s' if kept > 1 else ''}" if kept else f"layer {k}: per step"
            readers = [m for m, s in enumerate(st.skips or []) if s == k + 1]
            if readers:   # a skip buffer: bytes of its own, read again by a later layer
                label += f", skip of layer {', '.join(map(str, readers))}"
            parts.append({"label": label, "offset": off, "size": size})
    if cache is not None and st.kernel_scratch:
        off, size = max(st.kernel_scratch, key=lambda t: t[1])
        if size:
            parts.append({"label": "kernel scratch", "offset": off, "size": size})
    return {"tiles": len(st.tiles), "grid": list(st.grid), "parts": parts}


def memory_map(g: Graph, plan: Plan) -> dict:
    """report.json's "memory_plan": steps are positions in the op list (the order the C runs
    them; aliasing ops such as RESHAPE take a step but no time); a graph input planned in the
    arena is live from step -1, before the first op."""
    made_by = _producers(g)
    out = []
    for b in plan.buffers:
        if b.user is not None or b.size == 0:
            continue   # caller-owned input/output buffers are not in the arena
        if b.key.startswith("scratch:"):
            fn = b.key[len("scratch:"):]
            op = g.ops[b.start]
            layer = layer_name(op.name, op.kind)
            label = f"scratch of {layer}"
            if op.kind == "PATCH_STAGE":   # patch/stage.py: the per-tile buffers of the stage
                st = op.attrs["patch"]
                label = (f"patch buffers: {len(st.ops)} layers run in {st.grid[0]}x{st.grid[1]} "
                         f"tiles ({', '.join(layer_name(o.name, o.kind) for o in st.ops)})")
                if getattr(st, "cache", None) is not None:
                    label = (f"patch buffers: {len(st.ops)} layers run in {st.grid[0]} steps of rows, "
                             f"halos cached ({', '.join(layer_name(o.name, o.kind) for o in st.ops)})")
            entry = {"kind": "scratch", "label": label, "layers": [layer],
                     "function": fn, "tensors": 0, "offset": plan.scratch[fn].offset,
                     "size": b.size, "start": b.start, "end": b.end}
            if op.kind == "PATCH_STAGE":
                entry["loop"] = _tile_loop(op.attrs["patch"])
            out.append(entry)
            continue
        base = plan.tensors[b.key].offset - b.member_offset.get(b.key, 0)
        for part, (start, end, lo, hi, members) in enumerate(_parts(b)):
            label, names = _group_label(g, members, made_by)
            out.append({"kind": "input" if start < 0 else "tensor", "label": label, "layers": names,
                        "tensors": len(members), "offset": base + lo, "size": hi - lo,
                        "start": start, "end": end, "group": b.key, "part": part})
    # Numbered in the order a reader scans the picture: by first step, then bottom to top.
    out.sort(key=lambda r: (r["start"], r["offset"], r["kind"]))
    for k, r in enumerate(out, 1):
        r["id"] = k
    step, live = peak(out, len(g.ops))
    return {"arena_bytes": plan.arena_bytes, "steps": len(g.ops), "buffers": out,
            "peak_step": step, "peak_bytes": live}


def peak(buffers: list[dict], steps: int) -> tuple[int, int]:
    """The first step with the most live arena bytes, and that many bytes (step -1, before
    the first op, holds only inputs, which op 0 reads: it never beats step 0)."""
    best = (0, 0)
    for s in range(max(steps, 1)):
        live = sum(r["size"] for r in buffers if r["start"] <= s <= r["end"])
        if live > best[1]:
            best = (s, live)
    return best
