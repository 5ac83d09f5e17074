"""Numbers (and short names) on the rectangles of memory.svg without overlaps.

Every rectangle gets its key number. A label goes inside when it fits there (measured with the
renderer, rotated for tall narrow boxes, the name dropped before the number is); otherwise the
number sits outside beside the box with a thin leader, at the first nearby place that covers
no other label, rectangle or the plot's edge. Rectangles never overlap one another (the plan
proves it), so labels kept inside their own box never collide.
"""
from __future__ import annotations

FS_IN = 6.5     # in-box label size (points)
FS_OUT = 6.0    # outside number size
# a hatched (scratch) box's label gets a light ground so the hatching does not cross it
HATCHED = {"boxstyle": "square,pad=0.05", "facecolor": "white", "edgecolor": "none", "alpha": 0.75}


def _overlaps(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _inside(a, frame) -> bool:
    return frame[0] <= a[0] and frame[1] <= a[1] and a[2] <= frame[2] and a[3] <= frame[3]


def place_numbers(fig, ax, bufs: list[dict], short, avoid=()) -> None:
    """`avoid`: artists already drawn (the arena label) that no number may cover."""
    renderer = fig.canvas.get_renderer()
    px = {}
    for r in bufs:
        (x0, y0), (x1, y1) = ax.transData.transform([(r["start"] - 0.45, r["offset"]),
                                                     (r["end"] + 0.45, r["offset"] + r["size"])])
        px[r["id"]] = (x0, y0, x1, y1)
    outside = []
    for r in bufs:
        if not _label_inside(ax, renderer, r, px[r["id"]], short(r)):
            outside.append(r)
    taken = [tuple(a.get_window_extent(renderer).extents) for a in avoid]
    frame = tuple(ax.bbox.extents)
    for r in sorted(outside, key=lambda r: (r["start"], -r["offset"])):
        _label_outside(fig, ax, renderer, r, px, taken, frame)


def _label_inside(ax, renderer, r: dict, box, name: str) -> bool:
    x0, y0, x1, y1 = box
    w, h = x1 - x0 - 3, y1 - y0 - 2
    k = r["id"]
    texts = [f"{k} {name}\n{r['size']:,} B", f"{k} {name}"]
    if ".." in name:   # a shared buffer's first..last layer: one per line
        first, last = name.split("..", 1)
        texts += [f"{k} {first}..\n{last}\n{r['size']:,} B", f"{k} {first}..\n{last}"]
    texts.append(str(k))
    for rot in (0, 90):
        for text in texts:
            t = ax.text((r["start"] + r["end"]) / 2, r["offset"] + r["size"] / 2, text, rotation=rot,
                        ha="center", va="center", fontsize=FS_IN, parse_math=False, gid=f"num-{k}",
                        linespacing=1.0, bbox=HATCHED if r["kind"] == "scratch" else None)
            bb = t.get_window_extent(renderer)
            if bb.width <= w and bb.height <= h:
                return True
            t.remove()
        if h <= w:
            break   # a wide box: a rotated label fits no better
    return False


def _candidates():
    """(anchor, offset in points, ha, va): beside the box first, then stepping away from it."""
    yield "right", (4, 0), "left", "center"
    yield "top", (0, 3), "center", "bottom"
    yield "bottom", (0, -3), "center", "top"
    yield "left", (-4, 0), "right", "center"
    for k in range(1, 16):
        yield "right", (4, 8 * k), "left", "center"
        yield "top", (0, 3 + 8 * k), "center", "bottom"
        yield "right", (4, -8 * k), "left", "center"
        yield "top", (-12 * k, 3 + 8 * k), "center", "bottom"
        yield "left", (-4, 8 * k), "right", "center"


def _label_outside(fig, ax, renderer, r, px, taken, frame) -> None:
    anchors = {"right": ((r["end"] + 0.45), r["offset"] + r["size"] / 2),
               "top": ((r["start"] + r["end"]) / 2, r["offset"] + r["size"]),
               "bottom": ((r["start"] + r["end"]) / 2, r["offset"]),
               "left": ((r["start"] - 0.45), r["offset"] + r["size"] / 2)}
    # The number's size once; each candidate's box is then arithmetic (an artist per
    # candidate made this the slowest part of a compile).
    probe = ax.text(0, 0, str(r["id"]), fontsize=FS_OUT)
    bb = probe.get_window_extent(renderer)
    probe.remove()
    w, h, pt = bb.width + 4, bb.height + 3, fig.dpi / 72
    others = [b for k, b in px.items() if k != r["id"]]
    # Strictest first: clear of other labels, other boxes and the frame; then only of labels
    # and the frame; then only inside the frame.
    for level in (2, 1, 0):
        for where, (dx, dy), ha, va in _candidates():
            x, y = ax.transData.transform(anchors[where])
            x, y = x + dx * pt, y + dy * pt
            x0 = x - {"left": 0, "center": w / 2, "right": w}[ha]
            y0 = y - {"bottom": 0, "center": h / 2, "top": h}[va]
            box = (x0, y0, x0 + w, y0 + h)
            ok = _inside(box, frame) and (level < 1 or not any(_overlaps(box, b) for b in taken)) \
                and (level < 2 or not any(_overlaps(box, b) for b in others))
            if ok:
                taken.append(box)
                _number(ax, r, anchors[where], (dx, dy), ha, va)
                return
    # Nowhere inside the plot (a box at its very corner): beside it anyway; the key names it.
    _number(ax, r, anchors["top"], (0, 3), "center", "bottom")


def _number(ax, r, anchor, off, ha, va):
    return ax.annotate(str(r["id"]), xy=anchor, xytext=off, textcoords="offset points", ha=ha, va=va,
                       fontsize=FS_OUT, parse_math=False, gid=f"num-{r['id']}", annotation_clip=False,
                       bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none",
                             "alpha": 0.85},
                       arrowprops={"arrowstyle": "-", "color": "0.3", "linewidth": 0.4,
                                   "shrinkA": 0, "shrinkB": 0})
