"""Numbers (and short names) on the rectangles of memory.svg without overlaps.

Every rectangle gets its key number. A label goes inside when it fits there (measured with
scene.py's text widths, rotated for tall narrow boxes, the name dropped before the number
is); otherwise the number sits outside beside the box with a thin leader, at the first nearby
place that covers no other label, rectangle or the plot's edge. Rectangles never overlap one
another (the plan proves it), so labels kept inside their own box never collide.

Boxes are (x0, y0, x1, y1) in points, y down, as in scene.py.
"""
from __future__ import annotations

from .scene import Line, Text

FS_IN = 6.5     # in-box label size (points)
FS_OUT = 6.0    # outside number size
# a hatched (scratch) box's label gets a light ground so the hatching does not cross it
HATCHED = ("#ffffff", 0.75)


def _overlaps(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _inside(a, frame) -> bool:
    return frame[0] <= a[0] and frame[1] <= a[1] and a[2] <= frame[2] and a[3] <= frame[3]


def place_numbers(scene, bufs: list[dict], boxes: dict[int, tuple], short, frame, avoid=()) -> None:
    """boxes: buffer id -> its rectangle; frame: the plot's; avoid: boxes already covered by
    text (the arena label) that no number may cover."""
    outside = [r for r in bufs if not _label_inside(scene, r, boxes[r["id"]], short(r))]
    taken = list(avoid)
    for r in sorted(outside, key=lambda r: (r["start"], -r["offset"])):
        _label_outside(scene, r, boxes, taken, frame)


def _label_inside(scene, r: dict, box, name: str) -> bool:
    x0, y0, x1, y1 = box
    w, h = x1 - x0 - 2, y1 - y0 - 1.5
    k = r["id"]
    texts = [[f"{k} {name}", f"{r['size']:,} B"], [f"{k} {name}"]]
    if ".." in name:   # a shared buffer's first..last layer: one per line
        first, last = name.split("..", 1)
        texts += [[f"{k} {first}..", last, f"{r['size']:,} B"], [f"{k} {first}..", last]]
    texts.append([str(k)])
    for rot in (0, 90):
        for lines in texts:
            t = Text((x0 + x1) / 2, (y0 + y1) / 2, lines, FS_IN, ha="center", va="center", rotate=rot,
                     bg=HATCHED if r["kind"] == "scratch" else None, id=f"num-{k}")
            bx = t.box()
            # a scratch label's ground leaves some of the box's hatching in sight
            pad = 4 if r["kind"] == "scratch" else 0
            if bx[2] - bx[0] <= w - pad and bx[3] - bx[1] <= h:
                scene.add(t)
                return True
        if h <= w:
            break   # a wide box: a rotated label fits no better
    return False


def _candidates():
    """(anchor, offset in points (y down), ha, va): beside the box first, then stepping away."""
    yield "right", (4, 0), "left", "center"
    yield "top", (0, -3), "center", "bottom"
    yield "bottom", (0, 3), "center", "top"
    yield "left", (-4, 0), "right", "center"
    for k in range(1, 16):
        yield "right", (4, -8 * k), "left", "center"
        yield "top", (0, -3 - 8 * k), "center", "bottom"
        yield "right", (4, 8 * k), "left", "center"
        yield "top", (-12 * k, -3 - 8 * k), "center", "bottom"
        yield "left", (-4, -8 * k), "right", "center"


def _label_outside(scene, r, boxes, taken, frame) -> None:
    x0, y0, x1, y1 = boxes[r["id"]]
    anchors = {"right": (x1, (y0 + y1) / 2), "top": ((x0 + x1) / 2, y0),
               "bottom": ((x0 + x1) / 2, y1), "left": (x0, (y0 + y1) / 2)}
    probe = Text(0, 0, [str(r["id"])], FS_OUT).box()
    w, h = probe[2] + 3, probe[3] + 2
    others = [b for k, b in boxes.items() if k != r["id"]]
    # Strictest first: clear of other labels, other boxes and the frame; then only of labels
    # and the frame; then only inside the frame.
    for level in (2, 1, 0):
        for where, (dx, dy), ha, va in _candidates():
            ax, ay = anchors[where]
            x, y = ax + dx, ay + dy
            bx0 = x - {"left": 0, "center": w / 2, "right": w}[ha]
            by0 = y - {"top": 0, "center": h / 2, "bottom": h}[va]
            box = (bx0, by0, bx0 + w, by0 + h)
            ok = _inside(box, frame) and (level < 1 or not any(_overlaps(box, b) for b in taken)) \
                and (level < 2 or not any(_overlaps(box, b) for b in others))
            if ok:
                taken.append(box)
                _number(scene, r, (ax, ay), (x, y), ha, va)
                return
    # Nowhere inside the plot (a box at its very corner): beside it anyway; the key names it.
    ax, ay = anchors["top"]
    _number(scene, r, (ax, ay), (ax, ay - 3), "center", "bottom")


def _number(scene, r, anchor, at, ha, va) -> None:
    """The number at `at` and a thin leader from the box's edge to it."""
    if anchor != at:
        scene.add(Line([anchor, at], stroke="#4d4d4d", width=0.4))
    # Placed by its box edge nearest the box (ha/va), a small margin inside the white ground.
    x = at[0] + {"left": 1.5, "center": 0, "right": -1.5}[ha]
    y = at[1] + {"top": 1, "center": 0, "bottom": -1}[va]
    scene.add(Text(x, y, [str(r["id"])], FS_OUT, ha=ha, va=va, bg=("#ffffff", 0.85), id=f"num-{r['id']}"))
