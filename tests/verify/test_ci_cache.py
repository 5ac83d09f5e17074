"""The firmware's stack bound reuses the model's call graph only from an equivalent compile
(eerie_c/verify/ci_cache.py), and gives what a full `make stack` gives."""
from __future__ import annotations

import pytest

from conftest import require_board_tools
from eerie_c.api import compile_model
from eerie_c.toolchain.firmware import firmware_stack
from eerie_c.verify import ci_cache

SRC = '#include <stdint.h>\n#include "m.h"\nint32_t m_invoke(void) { return M_K; }\n'
HDR = "#define M_K 3\n"
BASE = ["arm-none-eabi-gcc", "-std=c99", "-O2", "-mcpu=cortex-m4", "-ffunction-sections",
        "-fstack-usage", "-fcallgraph-info=su"]


@pytest.fixture
def model(tmp_path):
    (tmp_path / "m.c").write_text(SRC)
    (tmp_path / "m.h").write_text(HDR)
    ci_cache._recent.clear()
    ci_cache.remember(BASE + [f"-I{tmp_path}", "-c", str(tmp_path / "m.c"), "-o", "x.o"],
                      tmp_path / "m.c", "GRAPH")
    return tmp_path


def _recall(d, *extra):
    return ci_cache.recall([*BASE, *extra, "-c", "./m.c", "-o", "stack/m.o"], d / "m.c", d)


def test_equivalent_compile_is_reused(model):
    # what the firmware Makefile adds: include dirs, repeats, macros the model never uses
    (model / "runtime").mkdir()
    assert _recall(model, "-I.", "-Iruntime", "-ffunction-sections", "-DEERIE_X=1u") == "GRAPH"


@pytest.mark.parametrize("extra", [["-O0"], ["-fno-function-sections"], ["-DM_K=4"], ["-mthumb"],
                                   ["-include", "m.h"]])
def test_other_options_compile_again(model, extra):
    assert _recall(model, *extra) is None


def test_edited_source_or_header_compiles_again(model):
    (model / "m.h").write_text("#define M_K 4\n")
    assert _recall(model) is None
    (model / "m.h").write_text(HDR)
    assert _recall(model) == "GRAPH"
    (model / "m.c").write_text(SRC + "\n")
    assert _recall(model) is None


def test_include_dir_shadowing_a_system_header_compiles_again(model):
    (model / "inc").mkdir()
    (model / "inc" / "stdint.h").write_text("")
    assert _recall(model, "-Iinc") is None


def test_split_commands():
    assert ci_cache.split_commands("mkdir -p stack\ncc -c a.c -o 'stack/a b.o' && cc -c b.c && true") == [
        ["mkdir", "-p", "stack"], ["cc", "-c", "a.c", "-o", "stack/a b.o"], ["cc", "-c", "b.c"], ["true"]]


@pytest.mark.parametrize("board", ["mps2-an386", "riscv-virt"])
def test_reused_bound_equals_full_make_stack(models_dir, tmp_path, board):
    """The compile's firmware bound (model graph reused) equals `make stack` building all."""
    require_board_tools(board)   # fails, never skips, without the board's toolchain
    out = tmp_path / "fw"
    rep = compile_model(models_dir / "kws_ref_model.tflite", out, board=board).report
    full = firmware_stack(out, rep["target"])   # no model name: make compiles every source
    assert (out / "stack" / "kws_ref_model.ci").exists()
    assert full["firmware_stack_bound_bytes"] == rep["firmware_stack_bound_bytes"]
    assert full["firmware_stack"] == rep["firmware_stack"]
