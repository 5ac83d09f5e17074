"""A clone of the repository is all a user needs: nothing tracked refers to a folder
beside the checkout, and the models the tests use ship inside the project."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import MODELS, ROOT

# Spelled in pieces so that this file does not match its own search.
OUTSIDE = ["../" + "shared", "shared" + "/models", "/work/" + "shared"]


def tracked_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.fail(f"git ls-files failed in {ROOT}: {e}: this test needs a git checkout")
    return [ROOT / p for p in out.decode().split("\0") if p]


def test_no_tracked_file_names_a_folder_outside_the_project():
    files = tracked_files()
    assert len(files) > 100, len(files)
    hits = []
    for f in files:
        if not f.is_file() or f.suffix in (".tflite", ".npz", ".npy", ".png", ".pt2", ".bin"):
            continue
        for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            if any(s in line for s in OUTSIDE):
                hits.append(f"{f.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    assert not hits, "files refer to a folder outside the project:\n" + "\n".join(hits)


def test_models_ship_in_the_repository():
    assert MODELS.is_relative_to(ROOT), MODELS
    names = sorted(p.name for p in MODELS.glob("*.tflite"))
    assert names == ["ad01_fp32.tflite", "ad01_int8.tflite", "kws_ref_model.tflite", "pretrainedResnet.tflite",
                     "pretrainedResnet_quant.tflite", "vww_96_int8.tflite"], names
    assert (MODELS / "README.md").is_file() and (MODELS / "LICENSE").is_file()
    tracked = {p.relative_to(ROOT) for p in tracked_files()}
    for name in names:
        assert (MODELS / name).relative_to(ROOT) in tracked, f"{name} is not tracked by git"
