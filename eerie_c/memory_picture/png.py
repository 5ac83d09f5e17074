"""memory.png: a scene.Scene rasterised with Pillow at 110 dpi.

Text uses Pillow's own embedded font (ImageFont.load_default at a size), so the pixels do not
depend on the fonts a machine has installed; the layout was measured with scene.py's
widths, which are wider than that font's, so labels that fit in the SVG fit here too. That font has no bold face: the key's column
titles are bold in the SVG only.
"""
from __future__ import annotations

import io
from functools import lru_cache

from .scene import Line, Polygon, Rect, Scene, Text, walk

DPI = 110
S = DPI / 72        # pixels per point


def _rgb(c: str) -> tuple[int, int, int]:
    return tuple(int(c[i:i + 2], 16) for i in (1, 3, 5))


@lru_cache(maxsize=None)
def _font(px: int):
    from PIL import ImageFont
    return ImageFont.load_default(px)


def _p(x: float, y: float) -> tuple[float, float]:
    return (x * S, y * S)


def _hatch(draw, r: Rect) -> None:
    """Grey diagonal lines (/) across the rectangle, every 4 points, clipped to it."""
    x0, y0, x1, y1 = r.x * S, r.y * S, (r.x + r.w) * S, (r.y + r.h) * S
    step = 4 * S
    c = x0 + y0 + step   # lines x + y = c, from the top-left corner on
    while c < x1 + y1:
        # the segment of x + y = c inside the box
        xa, ya = max(x0, c - y1), min(y1, c - x0)
        xb, yb = min(x1, c - y0), max(y0, c - x1)
        if xa < xb:
            draw.line([(xa, ya), (xb, yb)], fill=(115, 115, 115), width=1)
        c += step


def _rect(draw, r: Rect) -> None:
    box = [r.x * S, r.y * S, (r.x + r.w) * S, (r.y + r.h) * S]
    if r.fill:
        fill = _rgb(r.fill) + (round(255 * r.opacity),)
        draw.rectangle(box, fill=fill)
        if r.hatch:
            _hatch(draw, r)
    if r.stroke:
        draw.rectangle(box, outline=_rgb(r.stroke), width=max(1, round(r.width * S)))


def _line(draw, ln: Line) -> None:
    width = max(1, round(ln.width * S))
    pts = [_p(x, y) for x, y in ln.points]
    if not ln.dash:
        draw.line(pts, fill=_rgb(ln.stroke), width=width)
        return
    on, off = ln.dash[0] * S, ln.dash[1] * S
    for (xa, ya), (xb, yb) in zip(pts, pts[1:]):
        length = ((xb - xa) ** 2 + (yb - ya) ** 2) ** 0.5
        t = 0.0
        while t < length:
            e = min(t + on, length)
            draw.line([(xa + (xb - xa) * t / length, ya + (yb - ya) * t / length),
                       (xa + (xb - xa) * e / length, ya + (yb - ya) * e / length)], fill=_rgb(ln.stroke), width=width)
            t += on + off


def _text(img, draw, t: Text) -> None:
    from PIL import Image, ImageDraw
    if t.bg:
        x0, y0, x1, y1 = t.box()
        draw.rectangle([(x0 - 1) * S, (y0 - 0.5) * S, (x1 + 1) * S, (y1 + 0.5) * S],
                       fill=_rgb(t.bg[0]) + (round(255 * t.bg[1]),))
    font = _font(max(6, round(t.size * S)))
    anchor = {"left": "ls", "center": "ms", "right": "rs"}[t.ha if not t.rotate else "center"]
    if not t.rotate:
        for (x, y), line in zip(t.baselines(), t.lines):
            draw.text(_p(x, y), line, font=font, fill=_rgb(t.color), anchor=anchor)
        return
    # Rotated: drawn upright on a transparent tile centred on (x, y), turned, pasted.
    w, h = t.box()[2] - t.box()[0], t.box()[3] - t.box()[1]
    side = round(max(w, h) * S) + 4
    tile = Image.new("RGBA", (side, side), (0, 0, 0, 0))
    tdraw = ImageDraw.Draw(tile)
    for (x, y), line in zip(t.baselines(), t.lines):
        tdraw.text(((x - t.x) * S + side / 2, (y - t.y) * S + side / 2), line, font=font,
                   fill=_rgb(t.color) + (255,), anchor=anchor)
    tile = tile.rotate(t.rotate)
    img.paste(tile, (round(t.x * S - side / 2), round(t.y * S - side / 2)), tile)


def to_png(scene: Scene) -> bytes:
    from PIL import Image, ImageDraw, PngImagePlugin
    img = Image.new("RGB", (round(scene.width * S), round(scene.height * S)), (255, 255, 255))
    draw = ImageDraw.Draw(img, "RGBA")   # an RGB image drawn in RGBA: fills blend by their alpha
    for it in walk(scene.items):
        if isinstance(it, Rect):
            _rect(draw, it)
        elif isinstance(it, Line):
            _line(draw, it)
        elif isinstance(it, Polygon):
            draw.polygon([_p(x, y) for x, y in it.points], fill=_rgb(it.fill))
        elif isinstance(it, Text):
            _text(img, draw, it)
    info = PngImagePlugin.PngInfo()
    info.add_text("Software", "eerie-c")
    buf = io.BytesIO()
    img.save(buf, format="PNG", pnginfo=info)
    return buf.getvalue()
