"""memory.svg: a scene.Scene written as SVG text, one element per line (readable and
diffable; the same scene always gives the same bytes). Element ids are kept: `buf-N` is a
<rect>, texts with an id are a <g> holding one <text> per line."""
from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from .scene import Group, Line, Polygon, Rect, Scene, Text, walk

FONT = "'DejaVu Sans', Verdana, Arial, sans-serif"
MONO = "'DejaVu Sans Mono', Menlo, Consolas, monospace"


def _n(v: float) -> str:
    s = f"{v:.2f}".rstrip("0").rstrip(".")
    return "0" if s == "-0" else s


def _rect(r: Rect) -> str:
    attrs = [f'x="{_n(r.x)}" y="{_n(r.y)}" width="{_n(r.w)}" height="{_n(r.h)}"']
    if r.id:
        attrs.insert(0, f'id="{r.id}"')
    fill = f"url(#hatch-{r.fill[1:]})" if r.hatch and r.fill else r.fill
    attrs.append(f'fill="{fill or "none"}"')
    if r.opacity != 1.0:
        attrs.append(f'fill-opacity="{_n(r.opacity)}"')
    if r.stroke:
        attrs.append(f'stroke="{r.stroke}" stroke-width="{_n(r.width)}"')
    return f"<rect {' '.join(attrs)}/>"


def _line(ln: Line) -> str:
    pts = " ".join(f"{_n(x)},{_n(y)}" for x, y in ln.points)
    dash = f' stroke-dasharray="{_n(ln.dash[0])},{_n(ln.dash[1])}"' if ln.dash else ""
    return f'<polyline points="{pts}" fill="none" stroke="{ln.stroke}" stroke-width="{_n(ln.width)}"{dash}/>'


def _text(t: Text) -> list[str]:
    out = []
    if t.bg:
        x0, y0, x1, y1 = t.box()
        out.append(_rect(Rect(x0 - 1, y0 - 0.5, x1 - x0 + 2, y1 - y0 + 1, fill=t.bg[0], opacity=t.bg[1])))
    anchor = {"left": "start", "center": "middle", "right": "end"}[t.ha if not t.rotate else "center"]
    style = (f'class="{"m" if t.mono else "t"}" font-size="{_n(t.size)}" text-anchor="{anchor}"'
             + (' font-weight="bold"' if t.bold else "") + (f' fill="{t.color}"' if t.color != "#000000" else ""))
    if t.rotate:
        style += f' transform="rotate({-t.rotate} {_n(t.x)} {_n(t.y)})"'
    for (x, y), line in zip(t.baselines(), t.lines):
        out.append(f'<text x="{_n(x)}" y="{_n(y)}" {style}>{escape(line)}</text>')
    return out


def _item(it) -> list[str]:
    if isinstance(it, Rect):
        return [_rect(it)]
    if isinstance(it, Line):
        return [_line(it)]
    if isinstance(it, Group):
        return [f"<g id={quoteattr(it.id)}>"] + [ln for sub in it.items for ln in _item(sub)] + ["</g>"]
    if isinstance(it, Polygon):
        pts = " ".join(f"{_n(x)},{_n(y)}" for x, y in it.points)
        return [f'<polygon points="{pts}" fill="{it.fill}"/>']
    lines = _text(it)
    if it.id:
        return [f"<g id={quoteattr(it.id)}>"] + lines + ["</g>"]
    return lines


def _hatches(scene: Scene) -> list[str]:
    """One pattern per hatched fill colour: the colour under grey diagonal lines."""
    colours = sorted({r.fill for r in walk(scene.items) if isinstance(r, Rect) and r.hatch and r.fill})
    out = []
    for c in colours:
        out += [f'<pattern id="hatch-{c[1:]}" patternUnits="userSpaceOnUse" width="4" height="4">',
                f'<rect width="4" height="4" fill="{c}"/>',
                '<path d="M-1,1 L1,-1 M0,4 L4,0 M3,5 L5,3" stroke="#737373" stroke-width="0.5"/>',
                "</pattern>"]
    return out


def to_svg(scene: Scene) -> str:
    w, h = _n(scene.width), _n(scene.height)
    out = ['<?xml version="1.0" encoding="utf-8"?>',
           f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}pt" height="{h}pt" viewBox="0 0 {w} {h}">',
           "<!-- eerie-c memory plan: x = execution step, y = arena offset -->",
           f"<style>.t {{font-family: {FONT}}} .m {{font-family: {MONO}}}</style>"]
    defs = _hatches(scene)
    if defs:
        out += ["<defs>"] + defs + ["</defs>"]
    out.append(f'<rect width="{w}" height="{h}" fill="white"/>')
    for it in scene.items:
        out += _item(it)
    out.append("</svg>")
    return "\n".join(out) + "\n"
