"""The command line: files written, run with .npy in and out, and clean one-line errors
(exit status 2, no traceback, nothing written) for bad input."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import have_tool, tflm_run
from eerie_c.cli import COMMANDS as CLI_COMMANDS
from tflite_builder import ModelBuilder

sys.path.insert(0, str(Path(__file__).resolve().parent / "report"))   # report_md: report.md's tables


@pytest.fixture(scope="module")
def board_tools():
    """Like the board tests: FAIL (never skip) without the cross toolchain and QEMU."""
    missing = [t for t in ("arm-none-eabi-gcc", "qemu-system-arm", "make") if not have_tool(t)]
    if missing:
        pytest.fail(f"these tests need {', '.join(missing)} on PATH (.ci/setup installs them)")


def eerie(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "eerie_c.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def assert_clean_error(p, *needles):
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def test_compile_writes_files(models_dir, tmp_path):
    out = tmp_path / "ad"
    p = eerie(models_dir / "ad01_int8.tflite", "-o", out, "--name", "ad")
    assert p.returncode == 0, p.stderr
    assert sorted(x.name for x in out.iterdir()) == ["ad.c", "ad.h", "ad.mk", "memory.png", "memory.svg",
                                                     "report.json", "report.md"]
    rep = json.loads((out / "report.json").read_text())
    assert rep["arena_bytes"] > 0 and rep["flash_bytes"] > 200_000
    assert all("macs" in op and op["outputs"] for op in rep["ops"])
    h = (out / "ad.h").read_text()
    assert "int ad_invoke(const int8_t *input0, int8_t *output0);" in h
    assert "#define AD_INPUT0_SHAPE { 1, 640 }" in h and "AD_ARENA_BYTES" in h


def test_run_npy_round_trip(models_dir, tmp_path):
    x = np.random.default_rng(5).integers(-128, 128, size=(1, 640), dtype=np.int8)
    np.save(tmp_path / "x.npy", x)
    p = eerie("run", models_dir / "ad01_int8.tflite", "--input", tmp_path / "x.npy",
              "--output", tmp_path / "y.npy")
    assert p.returncode == 0, p.stderr
    y = np.load(tmp_path / "y.npy")
    ref = tflm_run(models_dir / "ad01_int8.tflite", [x[None]])[0][0]
    np.testing.assert_array_equal(y, ref)


def test_not_a_model(tmp_path):
    bad = tmp_path / "junk.tflite"
    bad.write_bytes(b"hello world, not a flatbuffer")
    out = tmp_path / "out"
    assert_clean_error(eerie(bad, "-o", out), "not a TFLite model")
    assert not out.exists()


def test_truncated_model(models_dir, tmp_path):
    bad = tmp_path / "cut.tflite"
    bad.write_bytes((models_dir / "kws_ref_model.tflite").read_bytes()[:3000])
    out = tmp_path / "out"
    assert_clean_error(eerie(bad, "-o", out), "malformed")
    assert not out.exists()


def test_unsupported_op_names_each_and_counts(tmp_path):
    mb = ModelBuilder()
    x = mb.input([1, 8], "float32")
    y = mb.tensor([1, 8], "float32")
    z = mb.tensor([1, 8], "float32")
    w = mb.tensor([1, 8], "float32")
    mb.op("COS", [x], [y])
    mb.op("COS", [y], [z])
    mb.op("SIN", [z], [w])
    mb.output(w)
    path = tmp_path / "trig.tflite"
    path.write_bytes(mb.build())
    out = tmp_path / "out"
    p = eerie(path, "-o", out)
    assert_clean_error(p, "unsupported operator", "COS x2 (ops 0, 1)", "SIN x1 (op 2)")
    assert not out.exists()


def test_failed_compile_leaves_previous_output_untouched(models_dir, tmp_path):
    out = tmp_path / "out"
    assert eerie(models_dir / "ad01_int8.tflite", "-o", out, "--name", "m").returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    bad = tmp_path / "m.tflite"
    bad.write_bytes(b"\0" * 64)
    assert_clean_error(eerie(bad, "-o", out, "--name", "m"))
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


@pytest.mark.parametrize("name", ["1abc", "a-b", "int", "x y"])
def test_bad_name(models_dir, tmp_path, name):
    assert_clean_error(eerie(models_dir / "ad01_int8.tflite", "-o", tmp_path / "o", "--name", name),
                       "not a valid C identifier")


def test_run_wrong_input_shape(models_dir, tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((1, 641), np.int8))
    assert_clean_error(eerie("run", models_dir / "ad01_int8.tflite", "--input", tmp_path / "x.npy"),
                       "input 0: shape")


def test_missing_file(tmp_path):
    assert_clean_error(eerie(tmp_path / "nope.tflite"), "no such file")


def test_ops_lists_matrix():
    p = eerie("ops")
    assert p.returncode == 0
    assert "FULLY_CONNECTED" in p.stdout and "int8" in p.stdout
    rows = {ln.split()[0]: ln.split()[1:] for ln in p.stdout.split("\n\n")[0].splitlines()}
    header = rows.pop("op")
    assert len(rows) > 80 and all(len(cells) == len(header) for cells in rows.values())
    assert rows["FULLY_CONNECTED"][header.index("int16")] == "yes"
    assert rows["EXP"][header.index("int8")] == "-"
    assert set(rows["WHILE"]) == {"any"}
    # Internal kinds are named below the table, not as ops a model could contain.
    assert "CF_LOOP" not in rows and "CONV_2D_ADD" not in rows
    assert "CF_LOOP" in p.stdout and "CONV_2D_ADD" in p.stdout


def eerie_tty(*args, cwd=None):
    """Run with stderr on a pseudo-terminal (progress is on by default only on a terminal);
    returns (exit status, what reached the terminal)."""
    import os
    import pty
    master, slave = pty.openpty()
    try:
        p = subprocess.run([sys.executable, "-m", "eerie_c.cli", *map(str, args)], cwd=cwd,
                           stdout=subprocess.PIPE, stderr=slave, timeout=600)
    finally:
        os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:   # EIO: the terminal's other side is closed and drained
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return p.returncode, b"".join(chunks).decode().replace("\r\n", "\n")


COMPILE_STAGES = ("frontend", "kernel lowering", "memory plan and its proof", "C emission",
                  "verification", "report.md and the memory-plan picture")


def _stages(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("eerie-c: ") and ln.endswith(" s)")]


def test_progress_default_quiet_verbose_on_a_terminal(models_dir, tmp_path):
    """On a terminal the default prints one timed line per stage, -q nothing, -v the stages
    and details; off a terminal (a pipe, CI logs) the default prints nothing."""
    model = models_dir / "ad01_int8.tflite"
    runs = {flag: eerie_tty(*([flag] if flag else []), model, "-o", tmp_path / (flag or "default"))
            for flag in ("", "-q", "-v")}
    assert all(code == 0 for code, _ in runs.values()), runs
    default, quiet, verbose = runs[""][1], runs["-q"][1], runs["-v"][1]
    for what in COMPILE_STAGES:
        assert any(what in ln for ln in _stages(default)), (what, default)
    assert "memory plan: arena" not in default            # a detail: -v only
    assert quiet == ""
    assert _stages(verbose) and "eerie-c: memory plan: arena" in verbose
    assert len(verbose.splitlines()) > len(default.splitlines())
    piped = eerie(model, "-o", tmp_path / "piped")
    assert piped.returncode == 0 and piped.stderr == ""


def test_progress_of_a_board_run(board_tools, models_dir, tmp_path):
    """`run --board` reports the firmware build and the QEMU run too (and -v the measurement)."""
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((1, 640), np.int8))
    args = ("run", models_dir / "ad01_int8.tflite", "--board", "mps2-an386", "--input", x)
    code, default = eerie_tty(*args)
    assert code == 0, default
    lines = _stages(default)
    assert any("firmware build (make, arm-none-eabi-gcc) for mps2-an386" in ln for ln in lines), default
    assert any("QEMU run on mps2-an386" in ln and "1 inference(s)" in ln for ln in lines), default
    code, verbose = eerie_tty("-v", *args)
    assert code == 0 and "instructions per inference (worst of 1)" in verbose, verbose
    code, quiet = eerie_tty("-q", *args)
    assert code == 0 and quiet == ""


@pytest.mark.parametrize("cmd,example", [([], "eerie-c model.tflite -o"), (["run"], "eerie-c run model.tflite"),
                                         (["ops"], "eerie-c ops --markdown"), (["boards"], "eerie-c boards"),
                                         (["check"], "eerie-c check model.py:Net")])
def test_help_has_examples_for_every_command(cmd, example):
    h = eerie(*cmd, "--help")
    assert h.returncode == 0 and "examples:" in h.stdout and example in h.stdout, h.stdout
    assert set(CLI_COMMANDS) == {"run", "ops", "boards", "check"}   # a new command needs a case here


def test_version():
    from eerie_c import __version__
    v = eerie("--version")
    assert v.returncode == 0 and v.stdout.strip() == f"eerie-c {__version__}"


def test_run_on_board_writes_report_md_with_the_measurements(board_tools, models_dir, tmp_path):
    """`run --board -o DIR` leaves report.json, report.md and the picture, and report.md's
    figures are the measured ones in report.json."""
    from report_md import memory_rows, num
    x = tmp_path / "x.npy"
    np.save(x, np.random.default_rng(2).integers(-128, 128, size=(3, 1, 640), dtype=np.int8))
    out = tmp_path / "fw"
    p = eerie("run", models_dir / "ad01_int8.tflite", "--board", "mps2-an386", "--input", x, "-o", out)
    assert p.returncode == 0, p.stderr
    for f in ("report.json", "report.md", "memory.svg", "memory.png", "ad01_int8.elf"):
        assert (out / f).is_file(), f
    r = json.loads((out / "report.json").read_text())
    md = (out / "report.md").read_text()
    rows = memory_rows(md)
    assert num(rows["flash: whole firmware ELF (model + runtime + harness, measured)"]) == r["flash_bytes"]
    assert num(rows["flash: model (code + constants)"]) == r["model_flash_bytes"] < r["flash_bytes"]
    assert num(rows["firmware data + bss (measured)"]) == r["ram_static_bytes"]
    assert num(rows["stack used by NAME_invoke (measured in QEMU)"]) == r["invoke_stack_bytes"]
    assert num(rows["stack high-water of the whole firmware (measured)"]) == r["stack_high_water_bytes"]
    per = r["instructions_per_inference"]
    assert len(per) == 3 and r["instructions"] == max(per)
    assert f"Measured instructions per inference: {r['instructions']:,} (worst of 3;" in md
    assert f"- each inference: {', '.join(f'{n:,}' for n in per)}" in md
    assert (f"- compile-time estimate: {r['est_instructions']:,} "
            f"({r['est_instructions'] / r['instructions']:.2f}x the measurement)") in md


def test_host_run_writes_report_files(models_dir, tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((1, 640), np.int8))
    out = tmp_path / "h"
    p = eerie("run", models_dir / "ad01_int8.tflite", "--input", tmp_path / "x.npy", "-o", out)
    assert p.returncode == 0, p.stderr
    for f in ("report.json", "report.md", "memory.svg", "memory.png"):
        assert (out / f).is_file(), f
