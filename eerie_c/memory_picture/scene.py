"""The drawing primitives memory.svg and memory.png are made of, and the text metrics the layout
uses (draw.py builds a list of these; svg.py and png.py render the same list,
so the two files always show the same thing).

Coordinates are points (1/72 inch, the SVG's unit), y down. Text is measured with fixed advance
widths close to DejaVu Sans's (the font the SVG asks for first) and rounded up, so a label
that is measured to fit a box fits it in the fonts a viewer may substitute too.
"""
from __future__ import annotations

from dataclasses import dataclass, field

# tab20's colours: neighbouring buffer numbers get clearly different fills.
PALETTE = ["#1f77b4", "#aec7e8", "#ff7f0e", "#ffbb78", "#2ca02c", "#98df8a", "#d62728", "#ff9896",
           "#9467bd", "#c5b0d5", "#8c564b", "#c49c94", "#e377c2", "#f7b6d2", "#7f7f7f", "#c7c7c7",
           "#bcbd22", "#dbdb8d", "#17becf", "#9edae5"]
LINE_SPACING = 1.2   # baseline to baseline, in font sizes
ASCENT = 0.76        # top of a line to its baseline, in font sizes
DESCENT = 0.24

# advance widths in ems (DejaVu Sans, rounded up): narrow, wide and the rest
_NARROW = set("iljI.,:;'|!()[]{} ft`")
_WIDE = set("mwMWOQGCDHNU@%#&")


def text_width(text: str, size: float, mono: bool = False) -> float:
    if mono:
        return 0.61 * size * len(text)
    return size * sum(0.34 if ch in _NARROW else 0.9 if ch in _WIDE else 0.66 if ch.isupper() or ch.isdigit()
                      else 0.62 for ch in text)


def text_size(lines: list[str], size: float, mono: bool = False) -> tuple[float, float]:
    """(width, height) of a block of lines, unrotated."""
    return (max(text_width(t, size, mono) for t in lines),
            size * (LINE_SPACING * (len(lines) - 1) + ASCENT + DESCENT))


@dataclass
class Rect:
    x: float
    y: float
    w: float
    h: float
    fill: str | None = None
    stroke: str | None = None
    width: float = 0.0          # stroke width
    opacity: float = 1.0        # of the fill
    hatch: bool = False         # diagonal lines over the fill (a kernel's scratch buffer)
    id: str | None = None


@dataclass
class Line:
    points: list[tuple[float, float]]
    stroke: str = "#000000"
    width: float = 0.5
    dash: tuple[float, float] | None = None


@dataclass
class Polygon:   # an arrow head
    points: list[tuple[float, float]]
    fill: str = "#000000"


@dataclass
class Text:
    """Lines of text at (x, y): ha left|center|right, va top|center|bottom of the block;
    rotate=90 turns it a quarter counter-clockwise, centred on (x, y) whatever ha/va say. bg: a light ground behind it
    (a colour and its opacity) so hatching or a rectangle edge does not cross the label."""
    x: float
    y: float
    lines: list[str]
    size: float
    ha: str = "left"
    va: str = "top"
    color: str = "#000000"
    bold: bool = False
    mono: bool = False
    rotate: int = 0
    bg: tuple[str, float] | None = None
    id: str | None = None

    def box(self) -> tuple[float, float, float, float]:
        """(x0, y0, x1, y1) it covers."""
        w, h = text_size(self.lines, self.size, self.mono)
        ha, va = (self.ha, self.va) if not self.rotate else ("center", "center")
        if self.rotate:
            w, h = h, w
        x0 = self.x - {"left": 0, "center": w / 2, "right": w}[ha]
        y0 = self.y - {"top": 0, "center": h / 2, "bottom": h}[va]
        return (x0, y0, x0 + w, y0 + h)

    def baselines(self) -> list[tuple[float, float]]:
        """Each line's anchor (x, baseline y) before rotation, the block placed by va (a rotated
        block: centred on (x, y)); the renderer aligns each line on x by ha."""
        _, h = text_size(self.lines, self.size, self.mono)
        top = self.y - {"top": 0, "center": h / 2, "bottom": h}[self.va if not self.rotate else "center"]
        return [(self.x, top + self.size * (ASCENT + LINE_SPACING * i)) for i in range(len(self.lines))]


@dataclass
class Scene:
    width: float
    height: float
    items: list = field(default_factory=list)

    def add(self, item):
        self.items.append(item)
        return item


@dataclass
class Group:
    """Items under one id (an axis and its ticks): a <g> in the SVG, nothing in the PNG."""
    id: str
    items: list = field(default_factory=list)


def walk(items):
    """Every item, groups opened, in drawing order."""
    for it in items:
        if isinstance(it, Group):
            yield from walk(it.items)
        else:
            yield it
