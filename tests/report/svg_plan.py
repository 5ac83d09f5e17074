"""Read memory.svg back as data: each buffer rectangle (`buf-N`) in plot coordinates (steps,
bytes), found through the axes' own tick marks and labels, so the check does not trust the
drawing code's transforms; and the texts of the numbers (`num-N`) and key cells (`key-N-col`)."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"


def _numbers(d: str) -> list[float]:
    return [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", d)]


def _text(g) -> str:
    return "\n".join((t.text or "") for t in g.iter(f"{NS}text"))


def _axis(root, axis: str, tick: str, coord: str):
    """value -> SVG coordinate, a least-squares line through every tick (mark position, label)."""
    group = next(g for g in root.iter(f"{NS}g") if g.get("id") == f"matplotlib.{axis}")
    pts = []
    for g in group.iter(f"{NS}g"):
        if not (g.get("id") or "").startswith(tick):
            continue
        use = next(g.iter(f"{NS}use"))
        label = _text(g).replace(",", "").replace("\u2212", "-")
        pts.append((float(label), float(use.get(coord))))
    assert len(pts) >= 2, f"{axis}: fewer than two ticks"
    n = len(pts)
    mv, mp = sum(v for v, _ in pts) / n, sum(p for _, p in pts) / n
    a = sum((v - mv) * (p - mp) for v, p in pts) / sum((v - mv) ** 2 for v, _ in pts)
    b = mp - a * mv
    for v, p in pts:
        assert abs(a * v + b - p) < 0.05, f"{axis}: ticks are not on one linear scale"
    return a, b


def read_plan(svg_text: str) -> dict:
    root = ET.fromstring(svg_text)
    ax, bx = _axis(root, "axis_1", "xtick_", "x")
    ay, by = _axis(root, "axis_2", "ytick_", "y")
    rects, nums, key = {}, {}, {}
    for g in root.iter(f"{NS}g"):
        gid = g.get("id") or ""
        if m := re.fullmatch(r"buf-(\d+)", gid):
            paths = list(g.iter(f"{NS}path"))
            assert len(paths) == 1, gid
            v = _numbers(paths[0].get("d"))
            xs, ys = v[0::2], v[1::2]
            steps = sorted((x - bx) / ax for x in (min(xs), max(xs)))
            offs = sorted((y - by) / ay for y in (min(ys), max(ys)))
            rects[int(m[1])] = {"x0": steps[0], "x1": steps[1], "y0": offs[0], "y1": offs[1]}
        elif m := re.fullmatch(r"num-(\d+)", gid):
            nums[int(m[1])] = _text(g)
        elif m := re.fullmatch(r"key-(\d+)-(\w+)", gid):
            key.setdefault(int(m[1]), {})[m[2]] = _text(g)
    texts = {g.get("id"): _text(g) for g in root.iter(f"{NS}g") if g.get("id") in ("arena-label", "peak-label")}
    return {"rects": rects, "nums": nums, "key": key, "texts": texts,
            "bytes_per_unit": abs(1 / ay), "all_text": [t.text or "" for t in root.iter(f"{NS}text")]}
