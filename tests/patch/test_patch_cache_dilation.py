"""Cached-halo stages (patch/cache.py) with dilated windows: a window reads kh rows dh
apart, and each buffer keeps the rows from the first tap of its reader's current window on.
Bit-exact with TFLM on the host (dilated convolutions and depthwise layers, dilation 2 and 3,
SAME and VALID, odd heights, a dilated first layer pushed row by row, a dilated residual block)
and in QEMU on the M4 and the M55; the band-loop proof (patch/cache_proof.py), which
re-derives the rows each window reads from the op's dilation, rejects a plan kept as if the
windows were not dilated and a buffer that dropped the row of a window's first tap."""
import dataclasses

import numpy as np
import pytest

from conftest import eerie_run, random_inputs, tflm_run
from patch_models import ODD, chain_model
from patch_residual_models import residual_chain
from test_patch_rows_bands import cached_rows_match_tflm
from stage_proof import compile_stage, proof_rejects

from eerie_c.api import compile_model
from eerie_c.patch.cache import make_cached_plan

# dilation 2 (SAME conv and depthwise), a VALID stride-2 depthwise, a VALID depthwise dilated
# (2, 3), a SAME conv dilated 3 over rows only
DILATED = [("conv", 6, (3, 3), (1, 1), "SAME", (2, 2), "RELU", True),
           ("dw", None, (3, 3), (1, 1), "SAME", (2, 2), "RELU6", True),
           ("dw", None, (3, 3), (2, 2), "VALID", (1, 1), "RELU", True),
           ("dw", None, (3, 5), (1, 1), "VALID", (2, 3), "NONE", False),
           ("conv", 4, (3, 3), (1, 1), "SAME", (3, 1), "NONE", True)]
# a residual block of dilated layers: its ADD reads the first layer's output
DILATED_BLOCK = [("conv", 8, (3, 3), (2, 2), "SAME", (1, 1), "RELU", True),
                 ("dw", None, (3, 3), (1, 1), "SAME", (2, 2), "RELU", True),
                 ("conv", 8, (3, 3), (1, 1), "SAME", (2, 2), "NONE", True)]


def _model(name, shape, seed=3):
    if name == "block":
        return residual_chain(shape, DILATED_BLOCK, {2: 0}, seed=seed)
    return chain_model(shape, {"dilated": DILATED, "odd": ODD}[name], seed=seed)


@pytest.mark.parametrize("name, shape, n, steps", [
    ("dilated", (1, 29, 35, 3), 5, 3), ("dilated", (1, 29, 35, 3), 5, 29), ("dilated", (1, 31, 35, 2), 4, 10),
    ("dilated", (1, 31, 35, 2), 2, 7), ("odd", (1, 21, 19, 3), 3, 4), ("odd", (1, 21, 19, 3), 4, 9),
    ("block", (1, 25, 11, 3), 3, 4), ("block", (1, 25, 11, 3), 3, 13)])
def test_dilated_cached_stage_bit_exact_on_host(tmp_path, name, shape, n, steps):
    model = _model(name, shape)
    x = random_inputs(list(shape), "int8", 2, seed=4)
    got, rep = eerie_run(model, [x], tmp_path, patch=(n, (steps, 1), "cached"))
    ch = rep["patches"]["chosen"]
    assert ch["halo"] == "cached" and ch["extra_macs"] <= 0
    np.testing.assert_array_equal(got[0], tflm_run(model, [x])[0])


def test_dilated_window_keeps_its_span(tmp_path):
    """A 3-tap window dilated 2 at stride 1 reads 5 rows: its input buffer keeps 4 between
    steps (a 3x3 window without dilation keeps 2); dilated 3 over rows: 6."""
    p = tmp_path / "m.tflite"
    p.write_bytes(_model("dilated", (1, 29, 35, 3)))
    st = compile_model(p, out_dir=tmp_path / "o", patch=(5, (29, 1), "cached")).graph.ops[0].attrs["patch"]
    assert st.cache.kept_rows[0] == 4 and st.cache.kept_rows[3] == 6


@pytest.mark.parametrize("bands", ["1", "2, 5, 1, 3"])
def test_dilated_first_layer_rows_pushed_in_bands_on_host(tmp_path, bands):
    shape = (1, 29, 35, 3)
    x = random_inputs(list(shape), "int8", 2, seed=9)
    cached_rows_match_tflm(tmp_path, _model("dilated", shape, seed=5), (5, (9, 1), "cached"), bands, x)


def _compiled(tmp_path, steps=29):
    return compile_stage(_model("dilated", (1, 29, 35, 3)), tmp_path, (5, (steps, 1), "cached"))



def test_proof_rejects_a_plan_kept_as_if_not_dilated(tmp_path):
    """The steps, moves and buffers a planner would make that took the dilated SAME layers
    for plain 3x3 windows (the same output sizes), run with the real layers: their windows
    read rows such a plan never kept."""
    res, scratch = _compiled(tmp_path)
    st = res.graph.ops[0].attrs["patch"]
    plain = [dataclasses.replace(lay, dh=1, pad_t=1) if k in (0, 1) else lay for k, lay in enumerate(st.layers)]
    wrong = make_cached_plan(st.ops, plain, st.cache.steps, [b for _, b in st.kernel_scratch])
    assert wrong.cache.kept_rows[0] < st.cache.kept_rows[0]
    proof_rejects(res, scratch, "reads row .* holds", dataclasses.replace(
        wrong, layers=st.layers, kernel_scratch=[(st.scratch_bytes - 16, 0)] * len(st.layers)))


def test_proof_rejects_a_dropped_first_tap_row(tmp_path):
    """One step of buffer 0 (read by a depthwise dilated 2) keeps one row fewer: the row of
    its reader's first tap, which that window still reads (the rows between the taps of a
    window are read by the next one)."""
    res, scratch = _compiled(tmp_path)
    st = res.graph.ops[0].attrs["patch"]
    c = st.cache
    row = st.layers[0].out_w * st.layers[0].out_c
    b = next(b for b, m in enumerate(c.moves) if m[0][1] >= 2 * row and st.tiles[b][1][2] > 0)
    firsts = [list(f) for f in c.first_rows]
    moves = [list(m) for m in c.moves]
    firsts[b][0] += 1
    src, nbytes = moves[b][0]
    moves[b][0] = (src + row, nbytes - row)
    bad = dataclasses.replace(c, first_rows=tuple(map(tuple, firsts)), moves=tuple(map(tuple, moves)))
    first_tap = st.tiles[b][1][0] - st.layers[1].pad_t
    proof_rejects(res, scratch, f"layer 1: reads row {first_tap} .*outside the buffer",
             dataclasses.replace(st, cache=bad))


@pytest.mark.parametrize("board", ["mps2-an386", "mps3-an547"])
@pytest.mark.parametrize("name, shape, n, steps", [("dilated", (1, 29, 35, 3), 5, 9),
                                                   ("block", (1, 25, 11, 3), 3, 4)])
def test_dilated_cached_stage_on_board(board_tools, tmp_path, board, name, shape, n, steps):
    model = _model(name, shape)
    x = random_inputs(list(shape), "int8", 2, seed=8)
    got, rep = eerie_run(model, [x], tmp_path, board=board, patch=(n, (steps, 1), "cached"))
    assert rep["patches"]["chosen"]["halo"] == "cached"
    np.testing.assert_array_equal(got[0], tflm_run(model, [x])[0])
