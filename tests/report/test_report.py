"""report.md's numbers are report.json's (memory, layers with input and output shapes, the
instruction estimate, the board budget and headroom)."""
import json
import re
import sys
from pathlib import Path

import pytest

from eerie_c.api import compile_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report_md import layer_rows, memory_rows, num  # noqa: E402

MODELS = ["kws_ref_model", "vww_96_int8", "pretrainedResnet_quant", "ad01_int8", "pretrainedResnet", "ad01_fp32"]


def _shape(s):
    return "x".join(map(str, s)) or "scalar"


# every model for the Cortex-M4; one int8 model (hard-float target) and one float model (soft
# float) for RISC-V (issue 18)
CASES = [(m, "cortex-m4") for m in MODELS] + [("kws_ref_model", "riscv32imafc"), ("ad01_fp32", "riscv32imac")]


@pytest.mark.parametrize("model,target", CASES)
def test_report_md_matches_json(models_dir, tmp_path, model, target):
    out = tmp_path / "o"
    compile_model(models_dir / f"{model}.tflite", out, target=target)
    r = json.loads((out / "report.json").read_text())
    md = (out / "report.md").read_text()
    rows = memory_rows(md)
    assert num(rows["activation arena"]) == r["arena_bytes"]
    assert num(rows["constants (weights, requantization)"]) == r["constant_bytes"]
    assert num(rows["flash: model (code + constants)"]) == r["model_flash_bytes"] == r["flash_bytes"]
    assert num(rows["stack bound (proven)"]) == r["stack_bound_bytes"]
    assert num(rows["RAM: model (arena + static data + stack bound)"]) == r["ram_bytes"]
    assert "budget" not in md.lower()   # no board, no budget table

    layers = layer_rows(md)
    assert len(layers) == len(r["ops"])
    for row, op in zip(layers, r["ops"]):
        assert (int(row["#"]), row["op"], num(row["MACs"]), num(row["weight bytes"])) == \
               (op["index"], op["kind"], op["macs"], op["weight_bytes"])
        assert row["input shapes"] == ", ".join(_shape(t["shape"]) for t in op["inputs"])
        assert row["output shape"] == ", ".join(_shape(t["shape"]) for t in op["outputs"])
        assert num(row["activation bytes"]) == sum(t["bytes"] for t in op["inputs"] + op["outputs"])
        # the estimate is filled for a Cortex-M or RISC-V target, and only with positive numbers
        assert num(row["est. instructions"]) == op["est_instructions"] > 0
    assert sum(op["macs"] for op in r["ops"]) == r["macs"]
    assert sum(op["est_instructions"] for op in r["ops"]) == r["est_instructions"]
    assert f"Estimated instructions per inference: {r['est_instructions']:,}." in md
    assert "compile-time estimate" in md and "not a measurement" in md
    for v in r["verified"]:
        assert f"PASS `{v['check']}`" in md


def test_host_target_has_no_estimate(models_dir, tmp_path):
    """An x86/arm64 host has no calibration: the column says '-', not a made-up number."""
    out = tmp_path / "o"
    compile_model(models_dir / "ad01_int8.tflite", out)
    r = json.loads((out / "report.json").read_text())
    assert r["est_instructions"] is None and all(op["est_instructions"] is None for op in r["ops"])
    assert {row["est. instructions"] for row in layer_rows((out / "report.md").read_text())} == {"-"}


@pytest.mark.parametrize("board", ["mps2-an386", "riscv-virt"])
def test_board_budget_rows_and_headroom(models_dir, tmp_path, board):
    out = tmp_path / "fw"
    compile_model(models_dir / "kws_ref_model.tflite", out, board=board)
    r = json.loads((out / "report.json").read_text())
    md = (out / "report.md").read_text()
    b = r["budget"]
    rows = {m[0]: m[1:] for m in re.findall(r"^\| (firmware [^|]+?) \| ([\d,]+) B \| ([\d,]+) B \| "
                                             r"([\d,]+) B \(([\d.]+)%\) \|$", md, re.M)}
    assert set(rows) == {"firmware flash (model + runtime + harness, compile-time figure)",
                         "firmware RAM (arena + static data + I/O buffers + stack reserve)"}
    for label, used, cap in (("firmware flash", b["flash_bytes"], b["board_flash_bytes"]),
                             ("firmware RAM", b["ram_bytes"], b["board_ram_bytes"])):
        (u, c, head, pct), = [v for k, v in rows.items() if k.startswith(label)]
        assert (num(u), num(c), num(head)) == (used, cap, cap - used)
        assert pct == f"{100.0 * (cap - used) / cap:.1f}"
    # The model's own flash is labelled as such and is less than the firmware's budget figure.
    model_flash = num(memory_rows(md)["flash: model (code + constants)"])
    assert model_flash == r["model_flash_bytes"] < b["flash_bytes"]
