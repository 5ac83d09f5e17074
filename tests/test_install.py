"""`pip install .` (not editable) gives a working eerie-c with its data files: templates/,
runtime_c/ and boards/ ship as package data. From the wheel's venv, run in an unrelated
directory with no PYTHONPATH (so nothing can come from the source tree): a host compile,
`eerie-c boards`, a `--board mps2-an386` firmware project and its `make`."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# conftest.py puts this checkout on PYTHONPATH for every subprocess; the venv's runs must not
# see it, or they would import eerie_c (and find its data directories) in the source tree.
CLEAN_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("install")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp / "whl"),
                    str(ROOT)], check=True, cwd=tmp, env=CLEAN_ENV)
    wheel = next((tmp / "whl").glob("eerie_c-*.whl"))
    # --ignore-installed: CI has already pip-installed eerie-c into the base interpreter, which this
    # venv can see; without it pip would skip the wheel and the venv would have no eerie-c script.
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-deps", "--ignore-installed", str(wheel)],
                   check=True, cwd=tmp, env=CLEAN_ENV)
    return venv


def run(venv, *args, cwd):
    return subprocess.run([str(venv / "bin" / "eerie-c"), *map(str, args)], cwd=cwd, env=CLEAN_ENV,
                          capture_output=True, text=True, timeout=600)


def test_data_directories_come_from_the_wheel(venv, tmp_path):
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import eerie_c, eerie_c.resources as r; print(eerie_c.__file__); "
                            "[print(r.resource_dir(d)) for d in ('templates', 'runtime_c', 'boards')]"],
                           cwd=tmp_path, env=CLEAN_ENV, capture_output=True, text=True, check=True).stdout
    lines = where.split()
    assert len(lines) == 4 and all(ln.startswith(str(venv)) for ln in lines), where


def test_wheel_install_compiles_a_model(venv, models_dir, tmp_path):
    p = run(venv, models_dir / "ad01_int8.tflite", "-o", "out", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "out" / "ad01_int8.c").read_text().count("static inline void") >= 10


def test_wheel_install_lists_boards(venv, tmp_path):
    p = run(venv, "boards", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    listed = {ln.split()[0] for ln in p.stdout.splitlines() if ln.strip()}
    shipped = {f.stem for f in (ROOT / "boards").glob("*.json")}
    assert shipped and shipped <= listed, p.stdout


def test_wheel_install_writes_a_board_project_that_builds(venv, board_tools, tmp_path):
    p = run(venv, ROOT / "examples" / "tiny_conv.tflite", "--board", "mps2-an386", "-o", "fw", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    fw = tmp_path / "fw"
    # The board's linker script and the runtime's C sources were copied from the wheel.
    assert (fw / "mps2-an386.ld").read_text() == (ROOT / "boards" / "mps2-an386.ld").read_text()
    runtime = {f.name for f in (fw / "runtime").iterdir()}
    assert runtime and runtime <= {f.name for f in (ROOT / "runtime_c").iterdir()}, runtime
    m = subprocess.run(["make", "-C", str(fw)], env=CLEAN_ENV, capture_output=True, text=True, timeout=300)
    assert m.returncode == 0, m.stdout + m.stderr
    assert (fw / "tiny_conv.elf").is_file()


def test_every_python_package_is_in_the_wheel():
    """pyproject lists its packages by name: a new eerie_c subpackage left out of the list is
    missing from an installed eerie-c (eerie_c.patch was, for a stop)."""
    import tomllib
    root = Path(__file__).resolve().parents[1]
    listed = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(root).parts) for p in (root / "eerie_c").rglob("__init__.py")}
    assert found <= listed, sorted(found - listed)
