"""The memory-plan picture draws a patch stage as a loop: its per-tile buffers (and, with
--input-rows, the ring of input rows) outlined inside the stage's scratch rectangle, and a
bracket beside it labelled with the number of tiles and the grid."""
import re

import pytest

from patch_models import MOBILENET, chain_model

from eerie_c.api import compile_model


def _rect(svg: str, rid: str) -> tuple[float, float, float, float]:
    m = re.search(r'<rect id="%s" x="([-\d.]+)" y="([-\d.]+)" width="([-\d.]+)" height="([-\d.]+)"' % re.escape(rid), svg)
    assert m, rid
    x, y, w, h = map(float, m.groups())
    return x, y, x + w, y + h


@pytest.mark.parametrize("rows", [False, True])
def test_stage_is_drawn_as_a_loop(tmp_path, rows):
    shape = (1, 19, 23, 3)
    p = tmp_path / "m.tflite"
    p.write_bytes(chain_model(shape, MOBILENET, seed=3))
    res = compile_model(p, out_dir=tmp_path / "out", name="m", patch=(4, (3, 2)),
                        input_mode="rows" if rows else "whole")
    svg = (tmp_path / "out" / "memory.svg").read_text()
    stage = [b for b in res.report["memory_plan"]["buffers"] if b.get("loop")]
    assert len(stage) == 1
    n = stage[0]["id"]
    assert f'id="patch-loop-{n}"' in svg
    label = re.search(r'id="patch-loop-%d-label".*?<text[^>]*>([^<]*)</text>' % n, svg, re.S)
    assert label and label.group(1) == "x 6 tiles (3x2)"
    outer = _rect(svg, f"buf-{n}")
    parts = re.findall(r'id="(patch-loop-%d-part-\d+)"' % n, svg)
    assert len(parts) == 3 + rows   # three patch buffers (layers 0-2), the ring first with rows
    for pid in parts:   # each per-tile buffer lies inside the stage's scratch rectangle
        x0, y0, x1, y1 = _rect(svg, pid)
        assert outer[0] <= x0 < x1 <= outer[2] and outer[1] - 0.01 <= y0 < y1 <= outer[3] + 0.01, (pid, outer)
    if rows:
        assert stage[0]["loop"]["parts"][0]["label"].startswith("ring: ")


def test_no_loop_without_a_stage(tmp_path):
    p = tmp_path / "m.tflite"
    p.write_bytes(chain_model((1, 19, 23, 3), MOBILENET, seed=3))
    compile_model(p, out_dir=tmp_path / "out", name="m", patch="off")
    assert "patch-loop" not in (tmp_path / "out" / "memory.svg").read_text()
