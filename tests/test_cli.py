"""The command line: files written, run with .npy in and out, and clean one-line errors
(exit status 2, no traceback, nothing written) for bad input."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import have_tool, require_board_tools, tflm_run
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
    assert sorted(x.name for x in out.iterdir()) == ["ad.c", "ad.cmake", "ad.h", "ad.mk", "memory.png", "memory.svg",
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


def test_run_with_a_relative_output_directory(models_dir, tmp_path):
    """`eerie-c run ... -o out` from the directory the user is in: the build and the run
    happen inside `out`, so a relative path must not be taken relative to it again."""
    x = np.random.default_rng(6).integers(-128, 128, size=(1, 640), dtype=np.int8)
    np.save(tmp_path / "x.npy", x)
    p = eerie("run", models_dir / "ad01_int8.tflite", "--input", "x.npy", "--output", "y.npy",
              "-o", "out", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "out" / "report.json").is_file()
    ref = tflm_run(models_dir / "ad01_int8.tflite", [x[None]])[0][0]
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), ref)


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
    mb.op("SIGN", [x], [y])
    mb.op("SIGN", [y], [z])
    mb.op("RELU_0_TO_1", [z], [w])
    mb.output(w)
    path = tmp_path / "trig.tflite"
    path.write_bytes(mb.build())
    out = tmp_path / "out"
    p = eerie(path, "-o", out)
    assert_clean_error(p, "unsupported operator", "SIGN with float32 tensors x2 (ops 0, 1)",
                       "RELU_0_TO_1 with float32 tensors x1 (op 2)")
    assert not out.exists()


def test_unsupported_op_in_a_while_body_names_its_subgraph(tmp_path):
    """TFLite numbers ops per subgraph: an op inside a WHILE body is reported with the
    subgraph its index counts in, so `op 0` is not mistaken for the main graph's WHILE."""
    mb = ModelBuilder()
    x = mb.input([4], "float32")
    i0 = mb.const(np.array(0, np.int32), "int32")
    oi, ox = mb.tensor([], "int32"), mb.tensor([4], "float32")
    cg = mb.subgraph("cond")
    ci, cx = cg.input([], "int32"), cg.input([4], "float32")
    cb = cg.tensor([], "bool")
    cg.op("LESS", [ci, cg.const(np.array(3, np.int32), "int32")], [cb])
    cg.output(cb)
    bg = mb.subgraph("body")
    bi, bx = bg.input([], "int32"), bg.input([4], "float32")
    bi2, bx2 = bg.tensor([], "int32"), bg.tensor([4], "float32")
    bg.op("ADD", [bi, bg.const(np.array(1, np.int32), "int32")], [bi2], "AddOptions")
    bg.op("SIGN", [bx], [bx2])
    bg.output(bi2)
    bg.output(bx2)
    mb.op("WHILE", [i0, x], [oi, ox], "WhileOptions", condSubgraphIndex=cg.index, bodySubgraphIndex=bg.index)
    mb.output(ox)
    path = tmp_path / "loop.tflite"
    path.write_bytes(mb.build())
    assert_clean_error(eerie(path, "-o", tmp_path / "out"),
                       f"SIGN with float32 tensors x1 (op 1 of subgraph {bg.index})")
    assert not (tmp_path / "out").exists()


def quant_scheme_model() -> bytes:
    """Two CONV_2D with asymmetric int8 weights (zero point != 0), then DEQUANTIZE and a
    FULLY_CONNECTED with float input and int8 weights (hybrid / dynamic-range quantization)
    with a zero point (eerie-c dequantizes only symmetric hybrid weights):
    a valid TFLite file whose three problems are all quantization schemes eerie-c lacks."""
    rng = np.random.default_rng(3)
    mb = ModelBuilder()
    h = mb.input([1, 4, 4, 2], "int8", scale=0.05, zero_point=-3)
    for k, zp in enumerate((3, -2)):
        w = mb.const(rng.integers(-100, 100, (2, 3, 3, 2)), "int8", scale=[0.02, 0.03], zero_point=[zp, zp])
        b = mb.const(rng.integers(-50, 50, (2,)), "int32", scale=[0.001, 0.0015], zero_point=[0, 0])
        y = mb.tensor([1, 4, 4, 2], "int8", scale=0.1, zero_point=k)
        mb.op("CONV_2D", [h, w, b], [y], "Conv2DOptions", padding=0, strideW=1, strideH=1)
        h = y
    f = mb.tensor([1, 4, 4, 2], "float32")
    mb.op("DEQUANTIZE", [h], [f])
    r = mb.tensor([1, 32], "float32")
    mb.op("RESHAPE", [f, mb.const(np.array([1, 32]), "int32")], [r])
    w = mb.const(rng.integers(-127, 128, (5, 32)), "int8", scale=[0.01], zero_point=[4])
    y = mb.tensor([1, 5], "float32")
    mb.op("FULLY_CONNECTED", [r, w, mb.const(rng.standard_normal(5), "float32")], [y], "FullyConnectedOptions")
    mb.output(y)
    return mb.build()


def test_unsupported_quantization_schemes_in_one_line_with_counts(tmp_path):
    path = tmp_path / "q.tflite"
    path.write_bytes(quant_scheme_model())
    out = tmp_path / "out"
    p = eerie(path, "-o", out)
    assert_clean_error(p, "unsupported quantization",
                       "CONV_2D with asymmetric int8 weights (zero point != 0) x2 (ops 0, 1)",
                       "FULLY_CONNECTED with hybrid/dynamic-range quantization (float32 input, int8 weights "
                       "with zero point != 0) x1 (op 4)")
    # Hybrid is a valid TFLite scheme: unsupported, not a malformed file.
    assert "malformed" not in p.stderr
    assert not out.exists()


def test_unsupported_ops_and_quantization_share_one_line(tmp_path):
    """An unsupported op and an unsupported scheme in one model: both in the one line."""
    mb = ModelBuilder()
    x = mb.input([1, 8], "float32")
    c = mb.tensor([1, 8], "float32")
    mb.op("SIGN", [x], [c])
    w = mb.const(np.ones((3, 8)), "int8", scale=[0.01], zero_point=[1])
    y = mb.tensor([1, 3], "float32")
    mb.op("FULLY_CONNECTED", [c, w], [y], "FullyConnectedOptions")
    mb.output(y)
    path = tmp_path / "m.tflite"
    path.write_bytes(mb.build())
    assert_clean_error(eerie(path, "-o", tmp_path / "out"), "unsupported operator: SIGN with float32 tensors x1 (op 0)",
                       "unsupported quantization: FULLY_CONNECTED with hybrid")
    assert not (tmp_path / "out").exists()


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
    assert rows["FULLY_CONNECTED"][header.index("int8")] == "yes"
    # int16 CONV_2D is TFLM's 16x8 scheme (int8 weights), named and explained below the table
    assert rows["CONV_2D"][header.index("int16")] == rows["FULLY_CONNECTED"][header.index("int16")] == "16x8"
    assert rows["ADD"][header.index("int16")] == "yes"
    assert "\n16x8: int16 activations (zero point 0) with int8 symmetric weights" in p.stdout
    # ops whose output dtype differs from the input's are starred, their pairs listed
    assert "QUANTIZE*" in rows and "CAST*" in rows and "DEQUANTIZE*" in rows and "ADD*" not in rows
    assert "  QUANTIZE: float32, int32 -> int16, int8; int16 -> int16, int32, int8; int8 -> int16, " \
           "int32, int8,\n    uint8; uint8 -> int8" in p.stdout
    assert "  DEQUANTIZE: int16, int8, uint8 -> float32\n" in p.stdout
    assert rows["EXP"][header.index("int8")] == "-"
    assert set(rows["WHILE"]) == {"any"}
    # Internal kinds are named below the table, not as ops a model could contain.
    assert "CF_LOOP" not in rows and "CONV_2D_ADD" not in rows
    assert "CF_LOOP" in p.stdout and "CONV_2D_ADD" in p.stdout


def test_ops_output_dtypes_are_what_the_kernels_lower():
    """The input -> output pairs `eerie-c ops` lists are exactly the ones the kernels lower:
    every (input, output) combination of the registry's dtypes is lowered (frontend and
    kernel, no C compiler); the listed ones succeed, every other one is an EerieError."""
    from eerie_c.errors import EerieError
    from eerie_c.frontend.tflite import load_tflite
    from eerie_c.kernels import REGISTRY, load_all, lower_graph
    load_all()
    all_dtypes = sorted({d for k in REGISTRY.values() for d in k.dtypes})
    q = {"int8": (0.05, -3), "uint8": (0.05, 128), "int16": (0.001, 0), "int32": (0.0001, 0)}
    bad = []
    for kind in ("QUANTIZE", "DEQUANTIZE", "CAST", "SOFTMAX"):
        info = REGISTRY[kind]
        for a in info.dtypes:
            for b in all_dtypes:
                mb = ModelBuilder()
                x = mb.input([1, 256], a, **dict(zip(("scale", "zero_point"), q.get(a, ()))))
                qb = {"int8": (1 / 256, -128),   # the output quantization SOFTMAX needs
                      "int16": (1 / 65536, -32768) if a == "int8" else (1 / 32768, 0)} \
                    if kind == "SOFTMAX" else q
                y = mb.tensor([1, 256], b, **dict(zip(("scale", "zero_point"), qb.get(b, ()))))
                mb.op(kind, [x], [y], *(("SoftmaxOptions",) if kind == "SOFTMAX" else ()),
                      **({"beta": 1.0} if kind == "SOFTMAX" else {}))
                mb.output(y)
                listed = b in info.outputs.get(a, (a,))
                try:
                    lower_graph(load_tflite(mb.build(), "m"))
                    lowered = True
                except EerieError:
                    lowered = False
                if lowered != listed:
                    bad.append(f"{kind} {a} -> {b}: {'lowered' if lowered else 'rejected'} but "
                               f"{'' if listed else 'not '}listed")
    assert not bad, bad


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


@pytest.mark.parametrize("board,cc", [("mps2-an386", "arm-none-eabi-gcc"), ("riscv-virt", "riscv64-unknown-elf-gcc")])
def test_progress_of_a_board_run(models_dir, tmp_path, board, cc):
    """`run --board` reports the firmware build and the QEMU run too (and -v the measurement)."""
    require_board_tools(board)
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((1, 640), np.int8))
    args = ("run", models_dir / "ad01_int8.tflite", "--board", board, "--input", x)
    code, default = eerie_tty(*args)
    assert code == 0, default
    lines = _stages(default)
    assert any(f"firmware build (make, {cc}) for {board}" in ln for ln in lines), default
    assert any(f"QEMU run on {board}" in ln and "1 inference(s)" in ln for ln in lines), default
    code, verbose = eerie_tty("-v", *args)
    assert code == 0 and "instructions per inference (worst of 1)" in verbose, verbose
    code, quiet = eerie_tty("-q", *args)
    assert code == 0 and quiet == ""


@pytest.mark.parametrize("cmd,example", [([], "eerie-c model.tflite -o"), (["run"], "eerie-c run model.tflite"),
                                         (["ops"], "eerie-c ops --markdown"), (["boards"], "eerie-c boards"),
                                         (["check"], "eerie-c check model.py:Net"),
                                         (["validate"], "eerie-c validate model.tflite")])
def test_help_has_examples_for_every_command(cmd, example):
    h = eerie(*cmd, "--help")
    assert h.returncode == 0 and "examples:" in h.stdout and example in h.stdout, h.stdout
    assert set(CLI_COMMANDS) == {"run", "ops", "boards", "check", "validate"}   # a new command needs a case here


def test_version():
    from eerie_c import __version__
    v = eerie("--version")
    assert v.returncode == 0 and v.stdout.strip() == f"eerie-c {__version__}"


@pytest.mark.parametrize("board", ["mps2-an386", "riscv-virt"])
def test_run_on_board_writes_report_md_with_the_measurements(models_dir, tmp_path, board):
    """`run --board -o DIR` leaves report.json, report.md and the picture, and report.md's
    figures are the measured ones in report.json."""
    from report_md import memory_rows, num
    require_board_tools(board)
    x = tmp_path / "x.npy"
    np.save(x, np.random.default_rng(2).integers(-128, 128, size=(3, 1, 640), dtype=np.int8))
    out = tmp_path / "fw"
    p = eerie("run", models_dir / "ad01_int8.tflite", "--board", board, "--input", x, "-o", out)
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
