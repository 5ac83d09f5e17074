"""Where the strided int8 depthwise kernel of the DSP cores (depthwise_s8_dsp.c.j2) is
emitted: in a function of its own (noinline) in the default and speed modes, inlined into
NAME_invoke in size mode, and the stride-1 kernels unchanged (inlined). Inlined, gcc 12's
register allocation of its loop changed with unrelated layers (vww's 48x48x16 layer on the
M7: 311,760 -> 744,480 instructions); outputs are checked on the boards by
test_depthwise_dsp_boards.py (k3-s2-batch2-table) and here in QEMU on the M7."""
from __future__ import annotations

import re

import pytest

from eerie_c.api import compile_model
from test_depthwise import dw_model
from test_dsp_kernels import check_dsp_board


def _fn_attr(code: str) -> str:
    """How the DEPTHWISE_CONV_2D layer function is declared."""
    m = re.search(r"^(.*) void (l\d+_\w+)\(", code.split("DEPTHWISE_CONV_2D", 1)[1], re.M)
    assert m, "the layer function"
    return m.group(1)


def _code(tmp_path, model, optimize="balanced", target="cortex-m7"):
    src = tmp_path / "m.tflite"
    src.write_bytes(model)
    return compile_model(src, target=target, name="m", optimize=optimize).files["m.c"]


@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m7"])
@pytest.mark.parametrize("optimize", ["balanced", "speed"])
def test_strided_out_of_line(tmp_path, target, optimize):
    model = dw_model("int8", (1, 9, 10, 16), 1, (3, 3), (2, 2), "SAME", (1, 1), act="RELU")
    code = _code(tmp_path, model, optimize, target)
    assert "eerie_requant_fast2(" in code and "extended zero-point row" not in code, "strided kernel"
    assert _fn_attr(code) == "__attribute__((noinline)) static"


def test_strided_inlined_in_size_mode(tmp_path):
    model = dw_model("int8", (1, 9, 10, 16), 1, (3, 3), (2, 2), "SAME", (1, 1), act="RELU")
    assert _fn_attr(_code(tmp_path, model, "size")) == "static inline"


@pytest.mark.parametrize("k", [(3, 3), (5, 3)])
def test_stride1_inlined(tmp_path, k):
    model = dw_model("int8", (1, 7, 6, 32), 1, k, (1, 1), "SAME", (1, 1), act="RELU")
    assert _fn_attr(_code(tmp_path, model)) == "static inline"


def test_strided_out_of_line_qemu(tmp_path):
    model = dw_model("int8", (2, 9, 11, 32), 1, (3, 3), (2, 2), "SAME", (1, 1), act="RELU6")
    code = check_dsp_board(tmp_path, model, (2, 9, 11, 32), "mps2-an500", seed=3)
    assert _fn_attr(code) == "__attribute__((noinline)) static"
