"""memory.svg / memory.png: the arena plan of report.json's "memory_plan" as a picture.

x = execution step, y = arena offset, one numbered rectangle per buffer, a key beside the plot
(number -> what lives there, bytes, offset, steps) so even a 12-byte buffer is identified, the
arena size and the peak marked above the plot. The SVG carries ids a test (or a script) can
use: rectangle `buf-N`, its number `num-N`, a patch stage's loop `patch-loop-N` (its per-tile
buffers `patch-loop-N-part-K` and the bracket's label `patch-loop-N-label`, "x T tiles"), key cells `key-N-steps|bytes|offset|label`, the
axes `x-axis` / `y-axis` with one `x-tick-N` / `y-tick-N` group (mark and label) per tick.

The picture is a list of primitives (scene.py) built here, then written as SVG text
(svg.py) and rasterised with Pillow (png.py): no plotting library, a few tens of
milliseconds, so it is drawn in the compiling process. Each band of the drawing (plot, marks,
labels, key) is its own function over the same Geometry, so another band (per-tile buffers
of a patch stage, say) is one more function.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..report_text import printable
from .labels import place_numbers
from .scene import PALETTE, Group, Line, Polygon, Rect, Scene, Text

KEY_CHARS = 56          # label characters in the key
PT = 72                 # points per inch


def ascii_label(text: str, limit: int = 60) -> str:
    """Model text made safe for a picture: printable (report.printable), and every non-ASCII
    character written as a \\uXXXX escape: the picture's fonts (DejaVu in the SVG, Pillow's
    own in the PNG) lack CJK and emoji glyphs and would draw empty boxes."""
    out = "".join(ch if ord(ch) < 128 else (f"\\u{ord(ch):04x}" if ord(ch) < 0x10000 else f"\\U{ord(ch):08x}")
                  for ch in printable(text, 4 * limit + 8))
    return out if len(out) <= limit else out[:limit - 3] + "..."


def _short(r: dict) -> str:
    """The in-box name: the first (..last) layer, without the sharing note the key gives."""
    if r["kind"] == "scratch":
        return "scratch"
    names = r.get("layers") or [r["label"]]
    return ascii_label(names[0] + (f"..{names[-1]}" if len(names) > 1 else ""), 40)


@dataclass
class Geometry:
    """Where things go, in points (y down): the figure, the plot frame, the key, and the
    data -> point transform of the plot (x = step, y = arena byte)."""
    width: float
    height: float
    frame: tuple[float, float, float, float]   # plot x0, y0 (top), x1, y1 (bottom)
    xlim: tuple[float, float]
    ylim: tuple[float, float]
    key_x: float
    key_top: float
    row: float

    def x(self, step: float) -> float:
        x0, _, x1, _ = self.frame
        return x0 + (step - self.xlim[0]) / (self.xlim[1] - self.xlim[0]) * (x1 - x0)

    def y(self, byte: float) -> float:
        _, y0, _, y1 = self.frame
        return y1 - (byte - self.ylim[0]) / (self.ylim[1] - self.ylim[0]) * (y1 - y0)

    def box(self, r: dict) -> tuple[float, float, float, float]:
        """A buffer's rectangle: its steps widened by 0.45 each side, its bytes."""
        return (self.x(r["start"] - 0.45), self.y(r["offset"] + r["size"]),
                self.x(r["end"] + 0.45), self.y(r["offset"]))


def _layout(mp: dict) -> Geometry:
    """The plot widens with the steps, the figure grows with the key (sizes in inches)."""
    rows = len(mp["buffers"]) + 1
    plot_w = max(5.5, min(13.0, 0.42 * mp["steps"] + 2.5))
    longest = max([len(ascii_label(r["label"], KEY_CHARS)) for r in mp["buffers"]] + [10])
    key_w = 1.93 + 0.056 * longest    # the label column starts 1.68 in into the key
    left, gap, right, bottom, top = 0.9, 0.35, 0.15, 0.6, 0.6
    plot_h = max(4.2, 0.13 * rows + 0.4)
    w, h = left + plot_w + gap + key_w + right, bottom + plot_h + top
    first = min([r["start"] for r in mp["buffers"]] + [0])
    return Geometry(w * PT, h * PT, (left * PT, top * PT, (left + plot_w) * PT, (top + plot_h) * PT),
                    (first - 0.7, max(mp["steps"], 2) - 0.3), (0, max(mp["arena_bytes"], 1) * 1.1),
                    (left + plot_w + gap) * PT, top * PT, 0.13 * PT)


def _nice_step(span: float, most: int, integer: bool) -> float:
    """The smallest 1-2-2.5-5 x 10^k tick step giving at most `most` intervals over span."""
    k = 1
    while True:
        for m in ((1, 2, 5) if integer else (1, 2, 2.5, 5)):
            if span / (m * k) <= most and (not integer or m * k >= 1):
                return m * k
        k *= 10


def _axes(scene: Scene, g: Geometry, steps: int) -> None:
    """Frame, ticks with their labels (a reader can map the SVG back to steps and bytes with
    them), axis titles."""
    x0, y0, x1, y1 = g.frame
    xs = _nice_step(g.xlim[1] - g.xlim[0], min(max(steps, 2) + 1, 24), True)
    ys = _nice_step(g.ylim[1] - g.ylim[0], 8, True)
    for axis, step, lim in (("x", xs, g.xlim), ("y", ys, g.ylim)):
        group = Group(f"{axis}-axis")
        v, n = -(-lim[0] // step) * step, 0
        while v <= lim[1]:
            if axis == "x":
                px = g.x(v)
                items = [Line([(px, y1), (px, y1 + 3.5)], width=0.8),
                         Text(px, y1 + 5, [f"{round(v):,}"], 7, ha="center", va="top")]
            else:
                py = g.y(v)
                items = [Line([(x0 - 3.5, py), (x0, py)], width=0.8),
                         Text(x0 - 5, py, [f"{round(v):,}"], 7, ha="right", va="center")]
            group.items.append(Group(f"{axis}-tick-{n}", items))
            v, n = v + step, n + 1
        scene.add(group)
    scene.add(Text((x0 + x1) / 2, y1 + 17, ["execution step (position in the op list)"], 8, ha="center"))
    scene.add(Text(x0 - 48, (y0 + y1) / 2, ["arena offset (bytes)"], 8, ha="center", va="center", rotate=90))


def _buffers(scene: Scene, g: Geometry, bufs: list[dict]) -> None:
    for r in bufs:
        bx0, by0, bx1, by1 = g.box(r)
        scene.add(Rect(bx0, by0, bx1 - bx0, by1 - by0, fill=PALETTE[(r["id"] - 1) % 20], stroke="#000000",
                       width=0.5, hatch=r["kind"] == "scratch", id=f"buf-{r['id']}"))


def _tile_loops(scene: Scene, g: Geometry, bufs: list[dict]) -> list:
    """A patch stage drawn as a loop: its per-tile buffers (and ring of input rows) outlined
    inside its scratch rectangle, and a bracket beside it labelled with the trip count
    ("x 48 tiles, 6x8"), ids `patch-loop-N`, `patch-loop-N-label`, `patch-loop-N-part-K`.
    Returns the label boxes, which no buffer number may cover."""
    boxes = []
    for r in bufs:
        loop = r.get("loop")
        if not loop:
            continue
        bx0, by0, bx1, by1 = g.box(r)
        group = Group(f"patch-loop-{r['id']}")
        for k, part in enumerate(loop["parts"]):
            top, bottom = g.y(r["offset"] + part["offset"] + part["size"]), g.y(r["offset"] + part["offset"])
            group.items.append(Rect(bx0 + 1.5, top, bx1 - bx0 - 3, bottom - top, stroke="#000000", width=0.6,
                                    id=f"patch-loop-{r['id']}-part-{k}"))
        # the bracket: from the block's top to its bottom, just right of the rectangle
        bx = bx1 + 3
        group.items.append(Line([(bx - 2.5, by0), (bx, by0), (bx, by1), (bx - 2.5, by1)], width=0.9))
        gy, gx = loop["grid"]
        label = Text(bx + 2, (by0 + by1) / 2, [f"x {loop['tiles']} tiles ({gy}x{gx})"], 6.5, va="center",
                     bg=("#ffffff", 0.8), id=f"patch-loop-{r['id']}-label")
        group.items.append(label)
        scene.add(group)
        boxes.append(label.box())
    return boxes


def _marks(scene: Scene, g: Geometry, mp: dict) -> tuple:
    """The arena size (dashed line, label above every rectangle) and the peak (shaded step,
    named above the plot). Returns the arena label's box, which no number may cover."""
    arena, step, live = mp["arena_bytes"], mp["peak_step"], mp["peak_bytes"]
    x0, y0, x1, y1 = g.frame
    ya = g.y(arena)
    scene.add(Line([(x0, ya), (x1, ya)], stroke="#ff0000", width=1, dash=(3.7, 1.6)))
    label = scene.add(Text(g.x(g.xlim[0] + 0.1), ya - 1, [f"arena {arena:,} B"], 7, va="bottom",
                           color="#ff0000", id="arena-label"))
    px = g.x(step)
    scene.add(Line([(px, y0 - 12), (px, y0 - 4)], stroke="#8b0000", width=0.8))
    scene.add(Polygon([(px - 2.5, y0 - 4.5), (px + 2.5, y0 - 4.5), (px, y0)], fill="#8b0000"))
    scene.add(Text(px, y0 - 13, [f"peak: step {step}, {live:,} B live"], 7, ha="center", va="bottom",
                   color="#8b0000", id="peak-label"))
    return label.box()


def _key(scene: Scene, g: Geometry, bufs: list[dict]) -> None:
    """The key: one row per rectangle, colour swatch, number, steps, bytes, offset, what."""
    x0, y, row = g.key_x, g.key_top, g.row
    cols = [("#", 0.16, "right"), ("steps", 0.3, "left"), ("bytes", 1.12, "right"),
            ("offset", 1.57, "right"), ("what", 1.68, "left")]
    for title, dx, ha in cols:
        scene.add(Text(x0 + dx * PT, y, [title], 6.5, ha=ha, bold=True, mono=True))
    for r in bufs:
        y += row
        scene.add(Rect(x0 - 0.1 * PT, y + 0.15 * row, 0.1 * PT, 0.65 * row, fill=PALETTE[(r["id"] - 1) % 20],
                       stroke="#000000", width=0.3, hatch=r["kind"] == "scratch"))
        steps = str(r["start"]) if r["start"] == r["end"] else f"{r['start']}..{r['end']}"
        cells = [("id", str(r["id"])), ("steps", steps), ("bytes", f"{r['size']:,}"),
                 ("offset", f"{r['offset']:,}"), ("label", ascii_label(r["label"], KEY_CHARS))]
        for (_, dx, ha), (what, text) in zip(cols, cells):
            scene.add(Text(x0 + dx * PT, y, [text], 6.5, ha=ha, mono=True, id=f"key-{r['id']}-{what}"))


def memory_scene(mp: dict, name: str) -> Scene:
    """The whole picture of report.json's memory_plan, back to front."""
    g = _layout(mp)
    bufs = mp["buffers"]
    scene = Scene(g.width, g.height)
    x0, y0, x1, y1 = g.frame
    step = mp["peak_step"]   # the peak's step, shaded under everything
    scene.add(Rect(g.x(step - 0.5), y0, g.x(step + 0.5) - g.x(step - 0.5), y1 - y0, fill="#ff0000", opacity=0.08))
    _buffers(scene, g, bufs)
    loops = _tile_loops(scene, g, bufs)
    arena_label = _marks(scene, g, mp)
    place_numbers(scene, bufs, {r["id"]: g.box(r) for r in bufs}, _short, g.frame, avoid=[arena_label] + loops)
    scene.add(Rect(x0, y0, x1 - x0, y1 - y0, stroke="#000000", width=0.8))
    _axes(scene, g, mp["steps"])
    scene.add(Text(g.width / 2, 0.08 * PT, [f"{ascii_label(name)}: activation arena plan ({mp['arena_bytes']:,} B, "
                                             f"{len(bufs)} buffers)"], 10, ha="center"))
    _key(scene, g, bufs)
    return scene


def memory_files(mp: dict, name: str, stem: str = "memory") -> dict[str, bytes]:
    """{STEM.svg: ..., STEM.png: ...} from report.json's "memory_plan"."""
    from .png import to_png
    from .svg import to_svg
    scene = memory_scene(mp, name)
    return {f"{stem}.svg": to_svg(scene).encode(), f"{stem}.png": to_png(scene)}


def draw_memory_plan(mp: dict, name: str, out_dir: Path, stem: str = "memory") -> list[Path]:
    """Write STEM.svg and STEM.png into out_dir from report.json's "memory_plan"."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for fname, data in memory_files(mp, name, stem).items():
        paths.append(out_dir / fname)
        paths[-1].write_bytes(data)
    return paths
