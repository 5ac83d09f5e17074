"""Read memory.svg back as data: each buffer rectangle (`buf-N`) in plot coordinates (steps,
bytes), found through the axes' own tick marks and labels, so the check does not trust the
drawing code's transforms; and the texts of the numbers (`num-N`) and key cells (`key-N-col`)."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"


def _text(g) -> str:
    return "\n".join((t.text or "") for t in g.iter(f"{NS}text"))


def _axis(root, axis: str, coord: int):
    """value -> SVG coordinate, a least-squares line through every tick (mark position, label)."""
    group = next(g for g in root.iter(f"{NS}g") if g.get("id") == f"{axis}-axis")
    pts = []
    for g in group.iter(f"{NS}g"):
        if not re.fullmatch(rf"{axis}-tick-\d+", g.get("id") or ""):
            continue
        mark = [float(v) for v in next(g.iter(f"{NS}polyline")).get("points").replace(",", " ").split()]
        assert mark[coord] == mark[coord + 2], f"{axis}: a tick mark that is not square to its axis"
        label = _text(g).replace(",", "").replace("\u2212", "-")
        pts.append((float(label), mark[coord]))
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
    ax, bx = _axis(root, "x", 0)
    ay, by = _axis(root, "y", 1)
    rects, nums, key = {}, {}, {}
    for el in root.iter():
        gid = el.get("id") or ""
        if m := re.fullmatch(r"buf-(\d+)", gid):
            assert el.tag == f"{NS}rect", gid
            x, y = float(el.get("x")), float(el.get("y"))
            xs, ys = (x, x + float(el.get("width"))), (y, y + float(el.get("height")))
            steps = sorted((v - bx) / ax for v in xs)
            offs = sorted((v - by) / ay for v in ys)
            rects[int(m[1])] = {"x0": steps[0], "x1": steps[1], "y0": offs[0], "y1": offs[1]}
        elif m := re.fullmatch(r"num-(\d+)", gid):
            nums[int(m[1])] = _text(el)
        elif m := re.fullmatch(r"key-(\d+)-(\w+)", gid):
            key.setdefault(int(m[1]), {})[m[2]] = _text(el)
    texts = {el.get("id"): _text(el) for el in root.iter() if el.get("id") in ("arena-label", "peak-label")}
    return {"rects": rects, "nums": nums, "key": key, "texts": texts,
            "bytes_per_unit": abs(1 / ay), "all_text": [t.text or "" for t in root.iter(f"{NS}text")]}
