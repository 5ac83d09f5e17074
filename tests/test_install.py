"""`pip install .` (not editable) gives a working eerie-c with its templates and data files."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_install_compiles_a_model(models_dir, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    pip = venv / "bin" / "pip"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "whl"),
                    str(ROOT)], check=True, cwd=tmp_path)
    wheel = next((tmp_path / "whl").glob("eerie_c-*.whl"))
    subprocess.run([str(pip), "install", "-q", "--no-deps", "--ignore-installed", str(wheel)], check=True, cwd=tmp_path)
    # --ignore-installed: CI has already pip-installed eerie-c into the base interpreter, which this
    # venv can see; without it pip would skip the wheel and the venv would have no eerie-c script.
    exe = venv / "bin" / "eerie-c"
    # Run from an unrelated directory so nothing can come from the source tree.
    p = subprocess.run([str(exe), str(models_dir / "ad01_int8.tflite"), "-o", "out"],
                       cwd=tmp_path, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "out" / "ad01_int8.c").read_text().count("static inline void") >= 10
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import eerie_c.resources as r; print(r.resource_dir('templates'))"],
                           cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert str(venv) in where
