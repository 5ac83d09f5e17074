"""Model names that are file names of the generated project (main, host_main, Makefile,
eerie_*, the board's linker script): an explicit --name is refused in one line (exit 2), a
name taken from the model's file name gets a suffix, and the project still builds. Generated
file names that would collide are a compiler bug, never a silent overwrite."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tflite_builder import ACT, ModelBuilder  # noqa: E402

from eerie_c.errors import CompilerBug, EerieError  # noqa: E402
from eerie_c.names import check_name, check_sources, default_name, merge_files  # noqa: E402


def fc_model() -> bytes:
    rng = np.random.default_rng(0)
    mb = ModelBuilder()
    x = mb.input([1, 6], "int8", scale=0.05, zero_point=-3, name="x")
    w = mb.const(rng.integers(-127, 128, (4, 6)), "int8", scale=0.01, zero_point=0, name="w")
    y = mb.tensor([1, 4], "int8", scale=0.1, zero_point=2, name="y")
    mb.op("FULLY_CONNECTED", [x, w], [y], "FullyConnectedOptions", fusedActivationFunction=ACT["NONE"])
    mb.output(y)
    return mb.build()


def eerie(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "eerie_c.cli", "-q", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def one_line_error(p, *needles):
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.fixture()
def model(tmp_path):
    def make(stem: str) -> Path:
        p = tmp_path / f"{stem}.tflite"
        p.write_bytes(fc_model())
        return p
    return make


@pytest.mark.parametrize("args, needle", [
    (["--name", "Makefile"], "Makefile would be rebuilt"),
    (["--name", "MAIN"], "harness is main.c"),
    (["--name", "host_main"], "host_main.c"),
    (["--board", "mps2-an386", "--name", "Makefile"], "reserved"),
    (["--board", "microbit", "--name", "microbit"], "linker script is microbit.ld"),
])
def test_reserved_explicit_names_are_refused(model, tmp_path, args, needle):
    out = tmp_path / "out"
    one_line_error(eerie(model("m"), "-o", out, *args), "reserved", needle)
    assert not out.exists()


@pytest.mark.parametrize("args", [["--name", "host_main"], ["--board", "mps2-an386", "--name", "Makefile"]])
def test_reserved_names_for_run(model, tmp_path, args):
    np.save(tmp_path / "x.npy", np.zeros((1, 6), np.int8))
    one_line_error(eerie("run", model("m"), "--input", tmp_path / "x.npy", *args), "reserved")


def test_model_file_called_main_builds_a_firmware_project(model, tmp_path):
    """main.tflite once compiled as `main`: its main.c replaced the harness and make failed."""
    p = eerie(model("main"), "--board", "mps2-an386", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    out = tmp_path / "main_model"              # the default directory is the (new) name
    assert (out / "main_model.c").is_file() and "int main(void)" in (out / "main.c").read_text()
    if shutil.which("arm-none-eabi-gcc") and shutil.which("make"):
        b = subprocess.run(["make", "--no-print-directory"], cwd=out, capture_output=True, text=True,
                           timeout=300)
        assert b.returncode == 0, b.stdout + b.stderr
        assert (out / "main_model.elf").is_file()


def test_model_file_called_eerie_rt_compiles_for_a_board(model, tmp_path):
    out = tmp_path / "o"
    p = eerie(model("eerie_rt"), "--board", "mps2-an386", "-o", out)
    assert p.returncode == 0, p.stderr
    assert (out / "model_eerie_rt.c").is_file() and (out / "runtime" / "eerie_rt.c").is_file()


@pytest.mark.parametrize("stem, name", [
    ("main", "main_model"), ("Makefile", "makefile_model"), ("host-main", "host_main_model"),
    ("eerie_rt", "model_eerie_rt"), ("EERIE", "model_eerie"), ("int", "int_model"),
    ("3x", "m_3x"), ("-", "model"), ("kws", "kws"), ("a" * 80, "a" * 57),
])
def test_default_names(stem, name):
    got = default_name(Path(f"{stem}.tflite"))
    assert got == name
    assert check_name(got) == got


def test_default_name_avoids_the_boards_linker_script():
    assert default_name(Path("microbit.tflite"), "microbit") == "microbit_model"
    with pytest.raises(EerieError, match="linker script"):
        check_name("microbit", "microbit")


def test_generated_file_collisions_are_compiler_bugs():
    files = {"m.c": "", "m.h": "", "main.c": ""}
    with pytest.raises(CompilerBug, match="main.c"):
        merge_files(dict(files), {"Main.c": ""}, "firmware project")
    assert merge_files(dict(files), {"report.json": ""}, "report")["report.json"] == ""
    with pytest.raises(CompilerBug, match="stack/eerie_rt.o"):
        check_sources({"eerie_rt.c": "", "runtime/eerie_rt.c": ""})
    with pytest.raises(CompilerBug, match="rebuild Makefile"):
        check_sources({"Makefile": "", "Makefile.c": ""})
    check_sources({"m.c": "", "main.c": "", "runtime/eerie_rt.c": "", "Makefile": ""})
