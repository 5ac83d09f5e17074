"""Every example in examples/ runs in CI, as a user would run it (a subprocess), and prints
what it claims: the keyword-spotting model bit-exact with TFLM on an emulated board, the
torch control-flow model equal to its own PyTorch outputs, the committed models reproducible
from their scripts.

examples/run_on_board.sh (the README's main job after set-up) is run by
tests/boards/test_boards.py::test_example_script_runs_the_bundled_model_on_a_board, which
also checks its outputs against TFLM; here only the set-up wrapper run_example.sh is checked
(with stubs, so the test does not reinstall packages).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import require_board_tools

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

# Every runnable example and the test that runs it (test_every_example_is_run keeps this honest).
COVERED = {
    "run_on_board.sh": "tests/boards/test_boards.py::test_example_script_runs_the_bundled_model_on_a_board",
    "run_example.sh": "test_run_example_sets_up_then_runs_the_board_example",
    "make_example_model.py": "test_committed_models_are_reproducible",
    "kws/make_model.py": "test_committed_models_are_reproducible",
    "kws/run.py": "test_kws_example",
    "torch_cond/run.py": "test_torch_cond_example",
    "torch_int8/run.py": "test_torch_int8_example",
    "micro_speech/run.py": "test_micro_speech_example",
    "validate/mlperf_kws_stm32.py": "test_validate_mlperf_on_stm32_example",
    "validate/pt2e_int8_host.py": "test_validate_pt2e_int8_example",
}


def _run(args, cwd, timeout=300, env=None):
    p = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, **(env or {})})
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p.stdout


def test_every_example_is_run():
    scripts = {str(p.relative_to(EXAMPLES)) for p in EXAMPLES.rglob("*")
               if p.suffix in (".sh", ".py") and "__pycache__" not in p.parts}
    assert scripts == set(COVERED), f"examples without a test (add one and list it in COVERED): " \
                                    f"{sorted(scripts - set(COVERED))}; listed but gone: {sorted(set(COVERED) - scripts)}"


@pytest.mark.parametrize("script,model", [("make_example_model.py", "tiny_conv.tflite"),
                                          ("kws/make_model.py", "kws/kws_dscnn.tflite")])
def test_committed_models_are_reproducible(tmp_path, script, model):
    """The script rebuilds the committed model's content: every op, tensor, quantization
    parameter and buffer byte. Not the file's bytes: how a flatbuffers release lays the same
    content out differs between releases (flatbuffers 25.2.10 writes a 2,712-byte
    tiny_conv.tflite where an earlier one wrote 2,728)."""
    out = tmp_path / "m.tflite"
    _run([sys.executable, str(EXAMPLES / script), str(out)], cwd=tmp_path, timeout=120)
    assert _content(out.read_bytes()) == _content((EXAMPLES / model).read_bytes()), \
        f"{script} no longer builds {model}"


def _content(data: bytes):
    """A .tflite model as plain Python values (the schema's object API, unpacked)."""
    import numpy as np
    from ai_edge_litert import schema_py_generated as fb

    def plain(v):
        if isinstance(v, np.ndarray):
            return plain(v.tolist())
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if isinstance(v, bytes):
            return v.hex()
        if hasattr(v, "__dict__"):
            return {k: plain(x) for k, x in sorted(vars(v).items())}
        return v
    return plain(fb.ModelT.InitFromPackedBuf(data, 0))


def test_kws_model_is_the_described_ds_cnn():
    from eerie_c.frontend import load_model
    g = load_model(EXAMPLES / "kws" / "kws_dscnn.tflite", "kws")
    assert [op.kind for op in g.ops] == ["CONV_2D", "DEPTHWISE_CONV_2D", "CONV_2D", "DEPTHWISE_CONV_2D",
                                         "CONV_2D", "AVERAGE_POOL_2D", "RESHAPE", "FULLY_CONNECTED",
                                         "SOFTMAX"]
    assert g.t(g.inputs[0]).shape == (1, 49, 10, 1) and g.t(g.outputs[0]).shape == (1, 12)
    assert (EXAMPLES / "kws" / "kws_dscnn.tflite").stat().st_size < 20_000


def test_kws_example(board_tools, tmp_path):
    out = tmp_path / "kws"
    text = _run([sys.executable, str(EXAMPLES / "kws" / "run.py"), "--out", str(out)], cwd=tmp_path)
    # One line per synthetic input with its top keyword; the fitted last layer recognises
    # (nearly) all of the synthetic keywords.
    lines = re.findall(r"^input \d+: synthetic '(\w+)' -> top keyword '(\w+)' \(p = [0-9.]+\)", text, re.M)
    assert len(lines) == 6, text
    assert sum(s == t for s, t in lines) >= 5, text
    assert "bit-exact with TFLM (tflite-micro runtime) on 6/6 inputs" in text, text
    # The printed measurements are the report's.
    report = json.loads((out / "report.json").read_text())
    assert report["board"] == "mps2-an386" and len(report["instructions_per_inference"]) == 6
    assert f"instructions per inference: {report['instructions']:,} " in text
    assert f"flash: {report['flash_bytes']:,} B" in text
    assert (f"stack: proven bound {report['stack_bound_bytes']:,} B for kws_dscnn_invoke, "
            f"measured {report['invoke_stack_bytes']:,} B in QEMU") in text
    # The firmware project, report.md (with the board's measurements) and the memory picture.
    for f in ("Makefile", "main.c", "kws_dscnn.c", "kws_dscnn.h", "kws_dscnn.mk", "kws_dscnn.elf"):
        assert (out / f).is_file(), f
    md = (out / "report.md").read_text()
    assert f"Measured instructions per inference: {report['instructions']:,}" in md
    svg = (out / "memory.svg").read_text()
    assert "<svg" in svg and "</svg>" in svg


def test_torch_cond_example(board_tools, tmp_path):
    import torch  # noqa: F401  (CI installs torch: a missing one errors, never skips)
    out = tmp_path / "tc"
    text = _run([sys.executable, str(EXAMPLES / "torch_cond" / "run.py"), "--out", str(out)], cwd=tmp_path)
    rows = re.findall(r"^input \d+: +(\d+) loop steps, (early exit \(small head\)|big head) +-> class \d "
                      r"\(p = [0-9.]+\), ([0-9,]+) instructions", text, re.M)
    assert len(rows) == 6, text
    # Both branches of torch.cond ran on the board, and the loop ran a varying number of steps.
    assert {b for _, b, _ in rows} == {"early exit (small head)", "big head"}, text
    assert len({int(n) for n, _, _ in rows}) > 1, text
    assert "outputs match the PyTorch module: same loop step counts" in text, text
    report = json.loads((out / "report.json").read_text())
    assert [int(i.replace(",", "")) for _, _, i in rows] == report["instructions_per_inference"]
    assert (out / "Makefile").is_file()


def test_torch_int8_example(board_tools, tmp_path):
    import torchao  # noqa: F401  (CI installs torchao: a missing one errors, never skips)
    out = tmp_path / "ti8"
    text = _run([sys.executable, str(EXAMPLES / "torch_int8" / "run.py"), "--out", str(out)], cwd=tmp_path)
    m = re.search(r"int8 ops (\d+), float ops (\d+), float islands (\d+)", text)
    assert m and int(m.group(1)) > 0 and m.group(3) == "0", text
    m = re.search(r"max \|diff\| \S+ = ([0-9.]+) output steps .*?, ([0-9.]+)% exactly equal, argmax same", text)
    assert m and float(m.group(1)) <= 1.001 and float(m.group(2)) > 50, text
    assert "accuracy contract: met" in text, text
    report = json.loads((out / "report.json").read_text())
    assert report["quantization"]["float_islands"] == []
    assert f"{report['instructions']:,}" in text
    assert "## Quantization" in (out / "report.md").read_text()


def test_micro_speech_example(board_tools, tmp_path):
    """Raw audio -> TFLM's signal-op front end -> keyword model, two models in one firmware
    in QEMU: each committed clip is recognised, features and scores bit-exact with TFLM."""
    text = _run([sys.executable, str(EXAMPLES / "micro_speech" / "run.py"), "--out", str(tmp_path / "ms")],
                cwd=tmp_path)
    tops = re.findall(r"^clip \d+: (\w+)_1000ms\.wav -> '(\w+)'", text, re.M)
    assert tops == [("yes", "yes"), ("no", "no")], text
    assert "bit-exact with TFLM (tflite-micro runtime) on 2/2 clips" in text, text
    assert re.search(r"front end [0-9,]+ \([0-9,]+ per 30 ms frame\), keyword model [0-9,]+", text), text


def test_run_example_sets_up_then_runs_the_board_example(tmp_path):
    """run_example.sh = .ci/setup, then run_on_board.sh mps2-an386 (which the board tests run
    for real). Stubs stand in for both so nothing is reinstalled."""
    (tmp_path / "examples").mkdir()
    (tmp_path / ".ci").mkdir()
    shutil.copy(EXAMPLES / "run_example.sh", tmp_path / "examples" / "run_example.sh")
    (tmp_path / ".ci" / "setup").write_text('echo "setup in $(pwd)"\n')
    (tmp_path / "examples" / "run_on_board.sh").write_text('echo "run_on_board $*"\n')
    text = _run(["bash", str(tmp_path / "examples" / "run_example.sh")], cwd="/", timeout=30)
    assert text.splitlines() == [f"setup in {tmp_path.resolve()}", "run_on_board mps2-an386"]


def test_validate_mlperf_on_stm32_example(tmp_path):
    """`eerie-c validate` of the MLPerf kws model on netduinoplus2 with its .npz inputs: 50
    inputs in one boot, every one bit-exact with TFLM, the validation in report.json."""
    require_board_tools("netduinoplus2")
    out = tmp_path / "vk"
    text = _run([sys.executable, str(EXAMPLES / "validate" / "mlperf_kws_stm32.py"), "--out", str(out)],
                cwd=tmp_path)
    assert "within contract    50 / 50  (bit-exact)" in text and "PASS" in text, text
    report = json.loads((out / "validate" / "report.json").read_text())
    assert report["board"] == "netduinoplus2" and len(report["instructions_per_inference"]) == 50
    assert report["validation"]["ok"] and report["validation"]["outputs"][0]["bit_exact"] == 50


def test_validate_pt2e_int8_example(tmp_path):
    """The PT2E int8 program validated on the host: 50 random inputs within one output step."""
    import torchao  # noqa: F401  (CI installs torchao: a missing one errors, never skips)
    out = tmp_path / "vp"
    text = _run([sys.executable, str(EXAMPLES / "validate" / "pt2e_int8_host.py"), "--out", str(out)],
                cwd=tmp_path)
    assert re.search(r"within contract    50 / 50  \(\|err\| <= 1 output step \([0-9.e-]+\)\)", text), text
    v = json.loads((out / "validate" / "report.json").read_text())["validation"]
    assert v["ok"] and v["reference"] == "PyTorch eager" and v["outputs"][0]["top1_agreement"] >= 0.9
