"""The memory plan as a picture: x = execution step, y = arena offset, one rectangle per
buffer labelled with the layer that produces it, the peak marked. matplotlib, headless."""
from __future__ import annotations

from pathlib import Path

from ..ir import Graph
from ..report import printable
from .arena import Plan


def _layer_of(g: Graph, tid: str) -> str:
    for op in g.ops:
        if tid in op.outputs:
            # "model/layer/Relu;..." -> "layer": the most specific scope name.
            parts = [p for p in op.name.split(";")[0].split("/") if p]
            label = parts[-2] if len(parts) >= 2 else (parts[0] if parts else "")
            return printable(label, 28) or op.kind
    return printable(g.t(tid).label, 28) or tid


def arena_rectangles(g: Graph, plan: Plan) -> list[dict]:
    """One entry per arena buffer: steps [start, end], bytes [offset, offset + size), label."""
    rects = []
    for b in plan.buffers:
        if b.user is not None or b.size == 0:
            continue
        if b.key.startswith("scratch:"):
            name = b.key[len("scratch:"):]
            rects.append({"label": printable(f"scratch {name}", 32), "start": b.start, "end": b.end,
                          "offset": plan.scratch[name].offset, "size": b.size})
        else:
            rects.append({"label": _layer_of(g, b.members[0]), "start": max(b.start, 0), "end": b.end,
                          "offset": plan.tensors[b.key].offset, "size": b.size})
    return rects


def peak_step(rects: list[dict], steps: int) -> tuple[int, int]:
    """The step with the most live arena bytes, and that many bytes."""
    best = (0, 0)
    for s in range(max(steps, 1)):
        live = sum(r["size"] for r in rects if r["start"] <= s <= r["end"])
        if live > best[1]:
            best = (s, live)
    return best


def draw_memory_plan(g: Graph, plan: Plan, out_dir: Path, stem: str = "memory") -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    # Fixed fonts and metadata: the same plan always gives the same bytes.
    matplotlib.rcParams["svg.hashsalt"] = "eerie-c"
    matplotlib.rcParams["svg.fonttype"] = "none"
    rects = arena_rectangles(g, plan)
    steps = len(g.ops)
    fig, ax = plt.subplots(figsize=(max(6.0, min(16.0, 0.45 * steps + 3)), 5.5))
    cmap = plt.get_cmap("tab20")
    for k, r in enumerate(rects):
        ax.add_patch(Rectangle((r["start"] - 0.45, r["offset"]), r["end"] - r["start"] + 0.9, r["size"],
                               facecolor=cmap(k % 20), edgecolor="black", linewidth=0.5, alpha=0.85))
        if r["size"] >= 0.04 * max(plan.arena_bytes, 1):
            ax.text((r["start"] + r["end"]) / 2, r["offset"] + r["size"] / 2,
                    f"{r['label']}\n{r['size']} B", ha="center", va="center", fontsize=6)
    step, live = peak_step(rects, steps)
    ax.axhline(plan.arena_bytes, color="red", linestyle="--", linewidth=1)
    ax.text(-0.5, plan.arena_bytes, f" arena {plan.arena_bytes} B", color="red", va="bottom", fontsize=8)
    ax.axvspan(step - 0.5, step + 0.5, color="red", alpha=0.08)
    ax.text(step, plan.arena_bytes * 0.02, f"peak: step {step}\n{live} B live", color="red",
            ha="center", va="bottom", fontsize=7)
    ax.set_xlim(-1, max(steps, 1))
    ax.set_ylim(0, max(plan.arena_bytes, 1) * 1.08)
    ax.set_xlabel("execution step (op index)")
    ax.set_ylabel("arena offset (bytes)")
    ax.set_title(f"{printable(g.name)}: activation arena plan ({plan.arena_bytes} B)")
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{stem}.svg", out_dir / f"{stem}.png"]
    fig.savefig(paths[0], metadata={"Date": None, "Creator": "eerie-c"})
    fig.savefig(paths[1], dpi=110, metadata={"Software": "eerie-c"})
    plt.close(fig)
    return paths
