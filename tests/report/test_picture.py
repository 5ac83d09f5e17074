"""memory.svg shows what report.json says, for every shared model: one rectangle per arena
buffer at its offset and size and over its steps (read back through the SVG's own axis ticks),
every rectangle numbered and named in the key, the arena size and the peak marked. And the
buffers themselves are checked against the per-layer tensor offsets in report.json (not
against the drawing code's input), so a plan the picture invents or misplaces fails."""
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from eerie_c.api import compile_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from svg_plan import read_plan  # noqa: E402

MODELS = ["kws_ref_model", "vww_96_int8", "pretrainedResnet_quant", "ad01_int8", "pretrainedResnet", "ad01_fp32"]
# a board: inputs in the arena; vww there also has storage groups drawn in several parts
# (widening 1x1 convs run with their input at the output's tail)
CASES = [(m, None) for m in MODELS] + [("kws_ref_model", "mps2-an386"), ("vww_96_int8", "mps2-an386"),
                                       ("kws_ref_model", "riscv-virt")]


def _names(op: dict) -> set[str]:
    """Every scope component of a layer's name and of the tensors it touches."""
    parts = {op["kind"]}
    for text in [op["name"]] + [t["tensor"] for t in op["inputs"] + op["outputs"]]:
        parts |= {p for seg in text.split(";") for p in seg.split("/") if p}
    return parts


def check_buffers_against_ops(r: dict):
    """report.json's memory_plan agrees with where each layer's tensors are (op offsets)."""
    mp, ops = r["memory_plan"], r["ops"]
    bufs = mp["buffers"]
    assert [b["id"] for b in bufs] == list(range(1, len(bufs) + 1))
    touching = {b["id"]: [] for b in bufs}
    for op in ops:
        for t in op["inputs"] + op["outputs"]:
            if t["storage"] != "arena":
                continue
            home = [b for b in bufs if b["kind"] != "scratch" and b["start"] <= op["step"] <= b["end"]
                    and b["offset"] <= t["offset"] and t["offset"] + t["bytes"] <= b["offset"] + b["size"]]
            assert len(home) == 1, (op["index"], t["tensor"], home)
            touching[home[0]["id"]].append(op)
        if op["scratch_bytes"]:
            s = [b for b in bufs if b["kind"] == "scratch" and b["start"] == b["end"] == op["step"]]
            assert [(b["offset"], b["size"]) for b in s] == [(op["scratch_offset"], op["scratch_bytes"])]
            touching[s[0]["id"]].append(op)
    for b in bufs:
        users = touching[b["id"]]
        assert users, f"buffer {b['id']} holds no tensor of any layer"
        first = -1 if b["kind"] == "input" else min(op["step"] for op in users)
        assert (b["start"], b["end"]) == (first, max(op["step"] for op in users)), b
        if b["kind"] == "input":
            assert b["label"] in {t["name"] for t in r["inputs"]}
        # The name in the key is a layer (or tensor) that lives in this buffer.
        label = b["label"].removeprefix("scratch of ").split(" (")[0]
        for name in label.split(".."):
            assert any(name in _names(op) for op in users) or b["kind"] == "input", (name, b)
    live = [sum(b["size"] for b in bufs if b["start"] <= s <= b["end"]) for s in range(mp["steps"])]
    assert (mp["peak_bytes"], mp["peak_step"]) == (max(live), live.index(max(live)))
    assert mp["peak_bytes"] <= mp["arena_bytes"] == r["arena_bytes"]


def check_svg(svg: str, r: dict):
    mp = r["memory_plan"]
    pic = read_plan(svg)
    tol_bytes = 1.0 * pic["bytes_per_unit"] + 1   # one SVG unit (1/72 in) of slack
    assert set(pic["rects"]) == {b["id"] for b in mp["buffers"]}, "one rectangle per buffer, no more"
    for b in mp["buffers"]:
        g = pic["rects"][b["id"]]
        assert g["x0"] == pytest.approx(b["start"] - 0.45, abs=0.02), b
        assert g["x1"] == pytest.approx(b["end"] + 0.45, abs=0.02), b
        assert g["y0"] == pytest.approx(b["offset"], abs=tol_bytes), b
        assert g["y1"] == pytest.approx(b["offset"] + b["size"], abs=tol_bytes), b
        # numbered on the plot (inside with a short name, or beside it), named in the key
        lines = pic["nums"][b["id"]].split("\n")
        if len(lines) > 1 and lines[-1].endswith(" B"):   # a size line: the buffer's size
            assert lines.pop() == f"{b['size']:,} B"
        head = "".join(lines).split(" ", 1)   # a long name may be split over lines at ".."
        assert head[0] == str(b["id"])
        if len(head) > 1:
            short = head[1].removesuffix("...")
            assert short == "scratch" if b["kind"] == "scratch" else b["label"].startswith(short), (head, b)
        key = pic["key"][b["id"]]
        steps = str(b["start"]) if b["start"] == b["end"] else f"{b['start']}..{b['end']}"
        assert (key["id"], key["steps"], key["bytes"], key["offset"]) == \
               (str(b["id"]), steps, f"{b['size']:,}", f"{b['offset']:,}")
        assert key["label"] == b["label"]   # ASCII names: shown unchanged
    assert pic["texts"]["arena-label"] == f"arena {r['arena_bytes']:,} B"
    assert pic["texts"]["peak-label"] == f"peak: step {mp['peak_step']}, {mp['peak_bytes']:,} B live"


@pytest.mark.parametrize("model,board", CASES)
def test_picture_shows_the_plan(models_dir, tmp_path, model, board):
    out = tmp_path / "o"
    kw = {"board": board} if board else {"target": "cortex-m4"}
    # layer by layer: check_buffers_against_ops matches each buffer to the layers' tensors and
    # scratch, which a patch stage's buffers are not (tests/patch/test_patch_picture.py draws
    # and checks those)
    compile_model(models_dir / f"{model}.tflite", out, patch="off", **kw)
    r = json.loads((out / "report.json").read_text())
    check_buffers_against_ops(r)
    check_svg((out / "memory.svg").read_text(), r)
    assert (out / "memory.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if board:
        assert any(b["kind"] == "input" and b["start"] == -1 for b in r["memory_plan"]["buffers"])
    if model == "vww_96_int8":
        parts = [b for b in r["memory_plan"]["buffers"] if b.get("part", 0) > 0]
        assert parts, "a group whose bytes in use change at an in-place op is drawn in parts"
        for p in parts:   # each part follows on from the part before it, in time
            prev = [b for b in r["memory_plan"]["buffers"]
                    if b.get("group") == p["group"] and b["part"] == p["part"] - 1]
            assert len(prev) == 1 and prev[0]["end"] + 1 >= p["start"] >= prev[0]["start"]


def test_a_wrong_picture_fails_the_check(models_dir, tmp_path):
    """The check can fail: a rectangle moved by 64 bytes, or a missing key row, is caught."""
    out = tmp_path / "o"
    compile_model(models_dir / "ad01_int8.tflite", out, target="cortex-m4")
    r = json.loads((out / "report.json").read_text())
    svg = (out / "memory.svg").read_text()
    moved = json.loads(json.dumps(r))
    moved["memory_plan"]["buffers"][0]["offset"] += 64
    with pytest.raises(AssertionError):
        check_svg(svg, moved)
    with pytest.raises(AssertionError):
        check_buffers_against_ops(moved)
    cut = svg.replace('id="key-2-label"', 'id="other"')
    with pytest.raises((AssertionError, KeyError)):
        check_svg(cut, r)


def check_png(png: bytes, svg: str, r: dict):
    """memory.png is the SVG's picture: its size is the SVG's at 110 dpi, and inside each
    buffer's rectangle (read from the SVG) near its bottom-left corner, clear of the centred
    label, the PNG has that rectangle's fill colour (on a hatched scratch buffer, its colour or
    its hatching somewhere inside)."""
    from PIL import Image
    import xml.etree.ElementTree as ET
    img = Image.open(io.BytesIO(png)).convert("RGB")
    root = ET.fromstring(svg)
    s = 110 / 72
    assert img.size == (round(float(root.get("width").removesuffix("pt")) * s),
                        round(float(root.get("height").removesuffix("pt")) * s))
    checked = 0
    for el in root.iter("{http://www.w3.org/2000/svg}rect"):
        m = re.fullmatch(r"buf-(\d+)", el.get("id") or "")
        if not m:
            continue
        x, y, w, h = (float(el.get(k)) * s for k in ("x", "y", "width", "height"))
        if w < 8 or h < 8:
            continue
        fill = el.get("fill")
        hatched = fill.startswith("url(#hatch-")
        want = tuple(int(fill.removeprefix("url(#hatch-").rstrip(")").lstrip("#")[i:i + 2], 16) for i in (0, 2, 4))
        if hatched:   # its label's light ground may cover most of it: fill or hatching seen
            inner = img.crop((round(x) + 2, round(y) + 2, round(x + w) - 2, round(y + h) - 2))
            seen = {c for _, c in inner.getcolors(1 << 20)}
            assert want in seen or (115, 115, 115) in seen, (m[1], want)
        else:
            px = [img.getpixel((round(x + dx), round(y + h - dy))) for dx in (3, 4, 5) for dy in (3, 4, 5)]
            assert all(p == want for p in px), (m[1], want, px)
        checked += 1
    assert checked >= 1


@pytest.mark.parametrize("model", ["kws_ref_model", "vww_96_int8"])
def test_png_shows_the_svg(models_dir, tmp_path, model):
    out = tmp_path / "o"
    compile_model(models_dir / f"{model}.tflite", out, target="cortex-m4")
    check_png((out / "memory.png").read_bytes(), (out / "memory.svg").read_text(),
              json.loads((out / "report.json").read_text()))


def test_a_wrong_png_fails_the_check(models_dir, tmp_path):
    from PIL import Image, ImageDraw
    out = tmp_path / "o"
    compile_model(models_dir / "kws_ref_model.tflite", out, target="cortex-m4")
    img = Image.open(out / "memory.png").convert("RGB")
    ImageDraw.Draw(img).rectangle([0, 0, img.size[0] // 2, img.size[1]], fill=(255, 255, 255))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    with pytest.raises(AssertionError):
        check_png(buf.getvalue(), (out / "memory.svg").read_text(), {})


def test_drawing_is_deterministic_without_a_plotting_library(models_dir, tmp_path):
    """The same model gives byte-identical pictures, and compiling imports no plotting library
    (the picture is written as SVG text and rasterised with Pillow)."""
    code = f"""
import sys
from eerie_c.api import compile_model
for d in ("a", "b"):
    compile_model({str(models_dir / 'ad01_int8.tflite')!r}, {str(tmp_path)!r} + "/" + d)
assert "matplotlib" not in sys.modules
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    for f in ("memory.svg", "memory.png"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()


def test_markup_in_names_and_an_empty_plan():
    """A name with XML's special characters is text in the SVG (it parses, the key shows the
    name unchanged); a plan with no buffers still gives a picture with its axes."""
    from eerie_c.memory_picture import memory_files
    buf = {"id": 1, "kind": "tensor", "label": 'a<b>&"c"', "offset": 0, "size": 300, "start": 0, "end": 1}
    mp = {"arena_bytes": 300, "steps": 2, "buffers": [buf], "peak_step": 0, "peak_bytes": 300}
    pic = read_plan(memory_files(mp, "m<&>")["memory.svg"].decode())
    assert pic["key"][1]["label"] == 'a<b>&"c"' and set(pic["rects"]) == {1}
    assert any(t.startswith("m<&>: ") for t in pic["all_text"])
    empty = {"arena_bytes": 0, "steps": 0, "buffers": [], "peak_step": 0, "peak_bytes": 0}
    files = memory_files(empty, "empty")
    assert read_plan(files["memory.svg"].decode())["rects"] == {}
    assert files["memory.png"][:8] == b"\x89PNG\r\n\x1a\n"
