"""A cached stage's low-scratch depthwise (patch/choice.py _low_scratch): when the stride-1
3x3 depthwise kernel over sign-extended rows (kernels/_dw_pairs.py) sets the stage's kernel
scratch, the planner tries the layer's table kernel, which needs none, and keeps it only when
the arena shrinks and the estimated growth stays within --max-recompute. The DSP kernels run
only on the boards (inline assembly), so bit-exactness is checked in QEMU on mps2-an386; the
choice itself is checked by compiling, against the same compile with the variant disabled."""
import numpy as np
import pytest

from conftest import random_inputs, tflm_run
from patch_models import chain_model

import eerie_c.patch.choice as patch_choice
from eerie_c.api import compile_model

# two stride-1 3x3 depthwise layers (8 and 16 channels: the pairs kernel applies on the M4)
CHAIN = [("conv", 16, (3, 3), (2, 2), "SAME", (1, 1), "RELU", True),
         ("dw", None, (3, 3), (1, 1), "SAME", (1, 1), "RELU6", True),
         ("conv", 32, (1, 1), (1, 1), "SAME", (1, 1), "RELU", False),
         ("dw", None, (3, 3), (1, 1), "SAME", (1, 1), "RELU", True),
         ("conv", 8, (1, 1), (1, 1), "SAME", (1, 1), "NONE", True)]
SHAPE = (1, 64, 48, 3)


def _model(tmp_path):
    p = tmp_path / "chain.tflite"
    p.write_bytes(chain_model(SHAPE, CHAIN, seed=3, tail="pool"))
    return p


def _compile(p, out, monkeypatch=None, **kw):
    if monkeypatch is not None:   # the planner without the variant: the stage as it was
        monkeypatch.setattr(patch_choice, "_low_scratch", lambda arena_of, cand, *a: (cand, [], None))
    try:
        return compile_model(p, out_dir=out, board="mps2-an386", patch="auto", **kw)
    finally:
        if monkeypatch is not None:
            monkeypatch.undo()


def test_variant_chosen_when_it_lowers_the_arena(tmp_path, monkeypatch):
    mode = "rows"   # with the whole image at 110% a recomputing stage of tiles wins
    p = _model(tmp_path)
    res = _compile(p, tmp_path / "a", max_recompute=110, input_mode=mode)
    ref = _compile(p, tmp_path / "b", monkeypatch, max_recompute=110, input_mode=mode)
    ch = res.report["patches"]["chosen"]
    st = res.graph.ops[0].attrs["patch"]
    assert ch["halo"] == "cached" and ch["low_scratch"], ch
    assert {w["index"] for w in ch["low_scratch"]} == set(st.low_scratch)
    for w in ch["low_scratch"]:   # a depthwise whose scratch was the stage's largest, now none
        assert st.layers[w["index"]].kind == "DEPTHWISE_CONV_2D"
        assert w["scratch_bytes"][0] > 0 and w["scratch_bytes"][1] == 0
        assert w["arena_bytes"][1] < w["arena_bytes"][0]
        assert w["est_growth_percent"][1] <= 110
    assert res.report["arena_bytes"] < ref.report["arena_bytes"]
    assert "low-scratch depthwise" in (tmp_path / "a" / "report.md").read_text()


def test_variant_refused_over_the_bound(tmp_path, monkeypatch):
    """At 20% the variant's estimated growth (over 25% on this small chain) is refused: the
    stage is the one planned without it."""
    p = _model(tmp_path)
    res = _compile(p, tmp_path / "a", max_recompute=20)
    ref = _compile(p, tmp_path / "b", monkeypatch, max_recompute=20)
    assert "low_scratch" not in (res.report["patches"]["chosen"] or {})
    assert res.report["arena_bytes"] == ref.report["arena_bytes"]


def test_no_variant_on_helium(tmp_path):
    """The M55 runs its Helium depthwise, which ignores the hint: nothing to choose."""
    res = compile_model(_model(tmp_path), out_dir=tmp_path / "a", board="mps3-an547", patch="auto",
                        max_recompute=110, input_mode="rows")
    assert "low_scratch" not in (res.report["patches"]["chosen"] or {})


@pytest.mark.parametrize("seed", [6, 7])
def test_chain_bit_exact_on_board(board_tools, tmp_path, seed):
    from eerie_c.api import run_model
    p = _model(tmp_path)
    x = random_inputs(list(SHAPE), "int8", 2, seed=seed)
    # row-band input (with the whole image at 110% a recomputing stage of tiles wins)
    got, rep = run_model(p, [x], board="mps2-an386", patch="auto", max_recompute=110, input_mode="rows")
    assert rep["patches"]["chosen"]["low_scratch"]
    np.testing.assert_array_equal(got[0], tflm_run(p, [x])[0])


def test_vww_rows_on_board(board_tools, models_dir):
    """issue 19's row-band target on the M4: RAM (data + bss + measured stack) <= 20,000 B,
    bit-exact, with the 24x24x32 depthwise (op 5 of the stage) on its low-scratch kernel."""
    from eerie_c.api import run_model
    path = models_dir / "vww_96_int8.tflite"
    x = random_inputs([1, 96, 96, 3], "int8", 2, seed=3)
    got, rep = run_model(path, [x], board="mps2-an386", patch="auto", input_mode="rows")
    np.testing.assert_array_equal(got[0], tflm_run(path, [x])[0])
    ch = rep["patches"]["chosen"]
    assert ch["halo"] == "cached" and 5 in [w["index"] for w in ch["low_scratch"]]
    sizes = rep["elf_sizes"]
    assert sizes["data"] + sizes["bss"] + rep["stack_high_water_bytes"] <= 20000
