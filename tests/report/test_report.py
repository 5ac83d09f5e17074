"""report.md and the memory-plan picture: the markdown's numbers are report.json's, and the
picture exists for every shared model and shows what it claims (one rectangle per arena
buffer, at its planned offset, the arena size and the peak marked)."""
import json
import re
import xml.etree.ElementTree as ET

import pytest

from eerie_c.api import compile_model
from eerie_c.plan.picture import arena_rectangles, peak_step

MODELS = ["kws_ref_model", "vww_96_int8", "pretrainedResnet_quant", "ad01_int8", "pretrainedResnet", "ad01_fp32"]


def _num(text: str) -> int:
    return int(text.replace(",", "").replace(" B", ""))


@pytest.mark.parametrize("model", MODELS)
def test_report_md_matches_json_and_picture_exists(models_dir, tmp_path, model):
    out = tmp_path / "o"
    res = compile_model(models_dir / f"{model}.tflite", out, target="cortex-m4")
    r = json.loads((out / "report.json").read_text())
    md = (out / "report.md").read_text()
    rows = dict(re.findall(r"^\| ([^|]+?) \| ([\d,]+) \|$", md, re.M))
    assert _num(rows["activation arena"]) == r["arena_bytes"]
    assert _num(rows["constants (weights, requantization)"]) == r["constant_bytes"]
    assert _num(rows["flash total"]) == r["flash_bytes"]
    assert _num(rows["stack bound (proven)"]) == r["stack_bound_bytes"]
    assert _num(rows["RAM total (arena + static + stack bound)"]) == r["ram_bytes"]
    layer_rows = re.findall(r"^\| (\d+) \| [^|]* \| ([A-Z_0-9]+) \| [^|]* \| ([\d,]+) \| ([\d,]+) \|", md, re.M)
    assert len(layer_rows) == len(r["ops"])
    for (idx, kind, macs, wbytes), op in zip(layer_rows, r["ops"]):
        assert (int(idx), kind, _num(macs), _num(wbytes)) == (op["index"], op["kind"], op["macs"], op["weight_bytes"])
    assert sum(op["macs"] for op in r["ops"]) == r["macs"]
    for v in r["verified"]:
        assert f"PASS `{v['check']}`" in md

    # The picture: one rectangle per arena buffer plus the frame, labelled, peak and arena marked.
    svg = (out / "memory.svg").read_text()
    root = ET.fromstring(svg)
    texts = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
    assert f"arena {r['arena_bytes']} B" in texts and "peak: step" in texts
    rects = arena_rectangles(res.graph, res.extra["plan"])
    assert rects and max(x["offset"] + x["size"] for x in rects) <= r["arena_bytes"]
    step, live = peak_step(rects, len(res.graph.ops))
    assert f"{live} B live" in texts and live <= r["arena_bytes"]
    assert (out / "memory.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    patches = [p for p in root.iter("{http://www.w3.org/2000/svg}path")]
    assert len(patches) >= len(rects)
