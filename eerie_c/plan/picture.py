"""memory.svg / memory.png: the arena plan of report.json's "memory_plan" as a picture.

x = execution step, y = arena offset, one numbered rectangle per buffer, a key beside the plot
(number -> what lives there, bytes, offset, steps) so even a 12-byte buffer is identified, the
arena size and the peak marked above the plot. The SVG carries ids a test (or a script) can
use: rectangle `buf-N`, its number `num-N`, key cells `key-N-steps|bytes|offset|label`.

matplotlib through its object API (Figure + the Agg canvas, settings in an rc_context): no
pyplot, no global backend or rcParams change for a program that imports eerie_c.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import warnings
import weakref
from pathlib import Path

from ..report_text import printable

KEY_CHARS = 56          # label characters in the key
FONT = "DejaVu Sans"    # shipped with matplotlib: the same glyphs (and bytes) on every machine
MONO = "DejaVu Sans Mono"
RC = {"svg.hashsalt": "eerie-c", "svg.fonttype": "none", "font.family": FONT,
      "path.simplify": False, "hatch.color": "0.45", "hatch.linewidth": 0.5}


def ascii_label(text: str, limit: int = 60) -> str:
    """Model text made safe for a picture: printable (report.printable), and every non-ASCII
    character written as a \\uXXXX escape: the fonts matplotlib ships lack CJK and emoji
    glyphs and would draw empty boxes (and warn on stderr)."""
    out = "".join(ch if ord(ch) < 128 else (f"\\u{ord(ch):04x}" if ord(ch) < 0x10000 else f"\\U{ord(ch):08x}")
                  for ch in printable(text, 4 * limit + 8))
    return out if len(out) <= limit else out[:limit - 3] + "..."


def _short(r: dict) -> str:
    """The in-box name: the first (..last) layer, without the sharing note the key gives."""
    if r["kind"] == "scratch":
        return "scratch"
    names = r.get("layers") or [r["label"]]
    return ascii_label(names[0] + (f"..{names[-1]}" if len(names) > 1 else ""), 40)


def _layout(mp: dict) -> dict:
    """Figure geometry in inches: the plot widens with the steps, the figure grows with the key."""
    rows = len(mp["buffers"]) + 1
    plot_w = max(5.5, min(13.0, 0.42 * mp["steps"] + 2.5))
    longest = max([len(ascii_label(r["label"], KEY_CHARS)) for r in mp["buffers"]] + [10])
    key_w = 1.93 + 0.056 * longest    # the label column starts 1.68 in into the key
    left, gap, right, bottom, top = 0.9, 0.35, 0.15, 0.6, 0.6
    plot_h = max(4.2, 0.13 * rows + 0.4)
    w, h = left + plot_w + gap + key_w + right, bottom + plot_h + top
    return {"size": (w, h), "axes": [left / w, bottom / h, plot_w / w, plot_h / h],
            "key_x": (left + plot_w + gap) / w, "key_top": (bottom + plot_h) / h, "row": 0.13 / h}


class _Early:
    """A child process that draws the picture ahead (start_drawing). It is started before the
    plan exists (prepare_drawing) and imports matplotlib at once, the larger half of the
    picture's cost, while this process reads and lowers the model on one core; the request
    (the plan) reaches it on stdin when the plan is made."""

    def __init__(self):
        self.key: str | None = None   # the request sent, if any (_key_of)
        self.stem = "memory"
        self.dir = Path(tempfile.mkdtemp(prefix="eerie-pic-"))
        # The child imports eerie_c from the directory this one came from, whatever sys.path
        # or the working directory would give it.
        root = str(Path(__file__).resolve().parents[2])
        code = (f"import sys; sys.path.insert(0, {root!r}); "
                "from eerie_c.plan.picture import _child; _child(sys.argv[1])")
        try:
            self.proc = subprocess.Popen([sys.executable, "-c", code, str(self.dir)],
                                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL)
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise
        # Also at exit: a compile that fails meanwhile leaves no process or directory behind.
        self.stop = weakref.finalize(self, _stop, self.proc, self.dir)

    def request(self, key: str, mp: dict, name: str, stem: str) -> None:
        self.key, self.stem = key, stem
        # The plan goes in a file and only a short line through the pipe: a large plan could
        # fill the pipe while the child is still importing, and block this process.
        (self.dir / "request.json").write_text(json.dumps({"mp": mp, "name": name, "stem": stem}))
        try:
            self.proc.stdin.write(b"draw\n")
            self.proc.stdin.close()
        except OSError:   # the child is gone (BrokenPipeError): files() says so, and the
            pass          # caller draws in process

    def files(self) -> dict[str, bytes] | None:
        """The drawing's files (SVG first), or None if the child failed: the caller then
        draws in this process, which reports the error as it always did."""
        try:
            names = [f"{self.stem}.svg", f"{self.stem}.png"]
            if self.proc.wait() != 0 or not all((self.dir / n).is_file() for n in names):
                return None
            return {n: (self.dir / n).read_bytes() for n in names}
        finally:
            self.stop()


def _stop(proc: subprocess.Popen, d: Path) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    if proc.stdin is not None and not proc.stdin.closed:
        try:
            proc.stdin.close()
        except OSError:
            pass
    shutil.rmtree(d, ignore_errors=True)


def _child(d: str) -> None:
    """The child process of prepare_drawing / start_drawing: imports matplotlib, then draws
    the request in directory `d` once stdin says so (an empty stdin: nothing to draw)."""
    import matplotlib  # noqa: F401  (the slow imports, made before the request arrives)
    from matplotlib import colormaps, ticker  # noqa: F401
    from matplotlib.backends import backend_agg, backend_svg  # noqa: F401
    from matplotlib.figure import Figure  # noqa: F401
    from matplotlib.patches import Rectangle  # noqa: F401
    if sys.stdin.buffer.read().strip() == b"draw":
        req = json.loads((Path(d) / "request.json").read_text())
        _draw_files(req["mp"], req["name"], Path(d), req["stem"])


_early: _Early | None = None   # the last drawing started; a compile writes one picture


def _key_of(mp: dict, name: str, stem: str) -> str:
    return json.dumps([mp, name, stem], sort_keys=True)


def _new_child() -> _Early | None:
    global _early
    if _early is not None:
        _early.stop()
    try:
        _early = _Early()
    except (OSError, ValueError):   # no interpreter to start (embedded Python): draw later
        _early = None
    return _early


def prepare_drawing() -> None:
    """Start the drawing child before the plan exists: a compile with an output directory
    calls this first thing, so that matplotlib is imported on another core while this one
    reads and lowers the model."""
    _new_child()


def cancel_drawing() -> None:
    """Stop the drawing child, if any (the compile failed)."""
    global _early
    if _early is not None:
        _early.stop()
        _early = None


def start_drawing(mp: dict, name: str, stem: str = "memory") -> None:
    """Have the picture drawn in a child process: the one prepare_drawing started if it has
    no request yet, else a new one. A compile calls this before its verification: drawing
    (matplotlib: 0.7-0.9 s of Python) then runs on another core beside the C-source proof,
    instead of after it. draw_memory_plan with the same plan and name then writes the
    child's bytes (any other plan is drawn afresh)."""
    job = _early if _early is not None and _early.key is None else _new_child()
    if job is not None:
        job.request(_key_of(mp, name, stem), mp, name, stem)


def draw_memory_plan(mp: dict, name: str, out_dir: Path, stem: str = "memory") -> list[Path]:
    """Write STEM.svg and STEM.png into out_dir from report.json's "memory_plan"."""
    global _early
    job, _early = _early, None
    if job is not None:
        files = job.files() if job.key == _key_of(mp, name, stem) else job.stop()
        if files:
            out_dir.mkdir(parents=True, exist_ok=True)
            paths = [out_dir / fname for fname in files]
            for path, data in zip(paths, files.values()):
                path.write_bytes(data)
            return paths
    return _draw_files(mp, name, out_dir, stem)


def _draw_files(mp: dict, name: str, out_dir: Path, stem: str) -> list[Path]:
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{stem}.svg", out_dir / f"{stem}.png"]
    with matplotlib.rc_context(RC), warnings.catch_warnings():
        # Labels are ASCII already; this only keeps any other font warning off the user's stderr.
        warnings.simplefilter("ignore", UserWarning)
        lay = _layout(mp)
        fig = Figure(figsize=lay["size"])
        FigureCanvasAgg(fig)
        ax = fig.add_axes(lay["axes"])
        _draw(fig, ax, mp, name, lay)
        fig.savefig(paths[0], metadata={"Date": None, "Creator": "eerie-c"})
        fig.savefig(paths[1], dpi=110, metadata={"Software": "eerie-c"})
    return paths


def _draw(fig, ax, mp: dict, name: str, lay: dict):
    from matplotlib import colormaps
    from matplotlib.patches import Rectangle
    from matplotlib.ticker import MaxNLocator, StrMethodFormatter
    from .picture_labels import place_numbers

    arena, steps, bufs = mp["arena_bytes"], mp["steps"], mp["buffers"]
    first = min([r["start"] for r in bufs] + [0])
    ax.set_xlim(first - 0.7, max(steps, 1) - 0.3)
    ax.set_ylim(0, max(arena, 1) * 1.1)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=min(max(steps, 1) + 1, 24)))
    ax.yaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
    ax.set_xlabel("execution step (position in the op list)", fontsize=8)
    ax.set_ylabel("arena offset (bytes)", fontsize=8)
    ax.tick_params(labelsize=7)
    cmap = colormaps["tab20"]
    for r in bufs:
        ax.add_patch(Rectangle((r["start"] - 0.45, r["offset"]), r["end"] - r["start"] + 0.9, r["size"],
                               facecolor=cmap((r["id"] - 1) % 20), edgecolor="black", linewidth=0.5,
                               hatch="////" if r["kind"] == "scratch" else None, gid=f"buf-{r['id']}"))
    # Arena size and peak: above every rectangle, so no text sits on a coloured box.
    ax.axhline(arena, color="red", linestyle="--", linewidth=1)
    label = ax.text(first - 0.6, arena, f"arena {arena:,} B", color="red", va="bottom", fontsize=7,
                    parse_math=False, gid="arena-label")
    place_numbers(fig, ax, bufs, _short, avoid=[label])
    step, live = mp["peak_step"], mp["peak_bytes"]
    ax.axvspan(step - 0.5, step + 0.5, color="red", alpha=0.08, linewidth=0, zorder=0)
    ax.annotate(f"peak: step {step}, {live:,} B live", xy=(step, 1.0), xycoords=("data", "axes fraction"),
                xytext=(0, 4), textcoords="offset points", ha="center", va="bottom", fontsize=7,
                color="darkred", annotation_clip=False, gid="peak-label",
                arrowprops={"arrowstyle": "-|>", "color": "darkred", "linewidth": 0.8})
    fig.text(0.5, 1 - 0.08 / lay["size"][1], f"{ascii_label(name)}: activation arena plan ({arena:,} B, "
             f"{len(bufs)} buffers)", ha="center", va="top", fontsize=10, parse_math=False)
    _key(fig, bufs, lay, cmap)


def _key(fig, bufs: list[dict], lay: dict, cmap):
    """The key: one row per rectangle, colour swatch, number, steps, bytes, offset, what."""
    from matplotlib.patches import Rectangle
    x0, y, row = lay["key_x"], lay["key_top"], lay["row"]
    w = lay["size"][0]
    cols = [("#", 0.16, "right"), ("steps", 0.3, "left"), ("bytes", 1.12, "right"),
            ("offset", 1.57, "right"), ("what", 1.68, "left")]
    for title, dx, ha in cols:
        fig.text(x0 + dx / w, y, title, ha=ha, va="top", fontsize=6.5, fontweight="bold", family=MONO)
    for r in bufs:
        y -= row
        fig.patches.append(Rectangle((x0 - 0.1 / w, y - 0.8 * row), 0.1 / w, 0.65 * row,
                                     transform=fig.transFigure, facecolor=cmap((r["id"] - 1) % 20),
                                     edgecolor="black", linewidth=0.3,
                                     hatch="////" if r["kind"] == "scratch" else None))
        steps = str(r["start"]) if r["start"] == r["end"] else f"{r['start']}..{r['end']}"
        cells = [("id", str(r["id"])), ("steps", steps), ("bytes", f"{r['size']:,}"),
                 ("offset", f"{r['offset']:,}"), ("label", ascii_label(r["label"], KEY_CHARS))]
        for (_, dx, ha), (what, text) in zip(cols, cells):
            fig.text(x0 + dx / w, y, text, ha=ha, va="top", fontsize=6.5, family=MONO,
                     parse_math=False, gid=f"key-{r['id']}-{what}")
