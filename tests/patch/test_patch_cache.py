"""Row-band stages with cached halos (patch/cache.py): each layer's output rows computed
once, the rows the next band reads again kept in the layer's buffer and moved to its top.
Bit-exact with TFLM on the host (stride 2, odd heights, SAME and VALID padding, the whole
image and rows pushed in bands) and in QEMU on the M4 and the M55 (vww_96_int8 and the person
detector with row-band input, where the planner picks them); dilated windows and fused ADDs:
test_patch_cache_dilation.py and test_patch_cache_skip.py; the band-loop proof (patch/cache_proof.py) rejects a wrong kept-row
count, a move that overwrites a kept row, a buffer over another one and a kernel scratch over
a kept row. With the input in the arena a cached stage's output goes over the input rows it
has consumed (the person detector's whole-image arena under half, in QEMU), and the proof
rejects that output moved over rows a later step reads."""
import dataclasses

import numpy as np
import pytest

from conftest import eerie_run, random_inputs, tflm_run
from patch_models import MOBILENET, MOBILENET_V1_025, PERSON_DETECT_INPUT, chain_model
from test_patch_rows_bands import cached_rows_match_tflm
from stage_proof import compile_stage, proof_rejects

from eerie_c.api import compile_model
from eerie_c.errors import CompilerBug

# VALID padding, a 5x5 stride-2 depthwise, RELU6 and per-tensor weights, no dilation
VALID = [("conv", 6, (3, 3), (2, 2), "VALID", (1, 1), "RELU", True),
         ("dw", None, (3, 3), (1, 1), "VALID", (1, 1), "RELU6", True),
         ("conv", 5, (1, 1), (1, 1), "SAME", (1, 1), "NONE", False),
         ("dw", None, (5, 5), (2, 2), "SAME", (1, 1), "RELU", True),
         ("conv", 4, (3, 1), (2, 1), "VALID", (1, 1), "NONE", True)]


@pytest.mark.parametrize("layers, shape, n, steps", [
    (MOBILENET, (1, 19, 23, 3), 4, 2), (MOBILENET, (1, 19, 23, 3), 4, 10),
    (MOBILENET, (1, 19, 23, 3), 3, 4), (MOBILENET, (1, 96, 20, 3), 4, 48),
    (VALID, (1, 37, 17, 2), 5, 3), (VALID, (1, 37, 17, 2), 5, 18), (VALID, (1, 37, 17, 2), 4, 7)])
def test_cached_stage_bit_exact_on_host(tmp_path, layers, shape, n, steps):
    model = chain_model(shape, layers, seed=11)
    x = random_inputs(list(shape), "int8", 2, seed=4)
    got, rep = eerie_run(model, [x], tmp_path, patch=(n, (steps, 1), "cached"))
    ch = rep["patches"]["chosen"]
    assert ch["halo"] == "cached" and ch["extra_macs"] <= 0   # < 0: rows no later layer reads
    np.testing.assert_array_equal(got[0], tflm_run(model, [x])[0])


@pytest.mark.parametrize("bands", ["1", "2, 5, 1, 3"])
def test_cached_stage_rows_pushed_in_bands_on_host(tmp_path, bands):
    shape = (1, 37, 17, 2)
    x = random_inputs(list(shape), "int8", 2, seed=9)
    cached_rows_match_tflm(tmp_path, chain_model(shape, VALID, seed=5), (5, (9, 1), "cached"), bands, x)


def _stage(tmp_path, steps=12):
    return compile_stage(chain_model((1, 96, 20, 3), MOBILENET, seed=1), tmp_path, (4, (steps, 1), "cached"))



def _with_move(cache, band, k, move):
    moves = [list(m) for m in cache.moves]
    moves[band][k] = move
    return dataclasses.replace(cache, moves=tuple(tuple(m) for m in moves))


def _kept(cache):
    """(band, layer, source byte, bytes) of a move that keeps rows."""
    return next((b, k, s, n) for b, m in enumerate(cache.moves) for k, (s, n) in enumerate(m) if n)


def test_proof_rejects_a_wrong_kept_row_count(tmp_path):
    res, scratch = _stage(tmp_path)
    st = res.graph.ops[0].attrs["patch"]
    b, k, src, nbytes = _kept(st.cache)
    row = st.layers[k].out_w * st.layers[k].out_c
    proof_rejects(res, scratch, "a kept row lost", cache=_with_move(st.cache, b, k, (src + row, nbytes - row)))


def test_proof_rejects_a_move_over_a_kept_row(tmp_path):
    res, scratch = _stage(tmp_path)
    st = res.graph.ops[0].attrs["patch"]
    b, k, src, nbytes = _kept(st.cache)
    row = st.layers[k].out_w * st.layers[k].out_c
    # the right rows, one row too far down: the slot the reader expects holds another row
    firsts = [list(f) for f in st.cache.first_rows]
    firsts[b][k] -= 1
    proof_rejects(res, scratch, "holds|which has", cache=dataclasses.replace(st.cache, first_rows=tuple(map(tuple, firsts))))
    proof_rejects(res, scratch, "not whole rows|holds", cache=_with_move(st.cache, b, k, (src + 1, nbytes)))
    assert row > 1


def test_proof_rejects_a_buffer_over_another(tmp_path):
    res, scratch = _stage(tmp_path)
    st = res.graph.ops[0].attrs["patch"]
    keep = [k for k, n in enumerate(st.cache.kept_rows) if n]
    offs = list(st.buf_offsets)
    offs[keep[1]] = offs[keep[0]]   # two buffers that keep rows between bands, at one offset
    proof_rejects(res, scratch, "holds", buf_offsets=offs)


def test_proof_rejects_kernel_scratch_over_a_kept_row(tmp_path):
    res, scratch = _stage(tmp_path)
    st = res.graph.ops[0].attrs["patch"]
    k = next(k for k, n in enumerate(st.cache.kept_rows) if n)
    ks = list(st.kernel_scratch)
    ks[k + 1] = (st.buf_offsets[k], 16)   # the next layer's kernel scratch over its input's first row
    proof_rejects(res, scratch, "holds", kernel_scratch=ks)


def _person_detector(tmp_path):
    p = tmp_path / "pd.tflite"
    p.write_bytes(chain_model(PERSON_DETECT_INPUT, MOBILENET_V1_025, tail="pool"))
    return p


@pytest.mark.parametrize("board", ["mps2-an386", "mps3-an547"])
@pytest.mark.parametrize("name", ["vww_96_int8", "person_detect"])
def test_rows_pick_cached_halos_on_board(board_tools, models_dir, tmp_path, board, name):
    """With the image pushed row by row the planner picks a deep stage with cached halos
    (through the second stride-2 depthwise): bit-exact, no extra MACs, and for the person
    detector an arena of at most half the layer-by-layer one (issue 19's target)."""
    from eerie_c.api import run_model
    path = models_dir / "vww_96_int8.tflite" if name == "vww_96_int8" else _person_detector(tmp_path)
    shape = [1, 96, 96, 3] if name == "vww_96_int8" else list(PERSON_DETECT_INPUT)
    x = random_inputs(shape, "int8", 1, seed=3)
    got, rep = run_model(path, [x], board=board, patch="auto", input_mode="rows")
    np.testing.assert_array_equal(got[0], tflm_run(path, [x])[0])
    ch = rep["patches"]["chosen"]
    assert ch["halo"] == "cached" and ch["extra_macs"] == 0 and ch["layers"] >= 8
    if name == "person_detect":
        assert rep["arena_bytes"] <= 0.5 * rep["patches"]["arena_bytes_before"]


@pytest.mark.parametrize("layers, shape, n, steps", [
    (MOBILENET, (1, 19, 23, 3), 4, 10), (MOBILENET, (1, 96, 20, 3), 4, 48), (VALID, (1, 37, 17, 2), 5, 18)])
def test_cached_stage_output_over_its_input_on_host(tmp_path, layers, shape, n, steps):
    """With the input in the arena, a cached stage's output shares the input's bytes: the
    first layer consumes input rows top-down, so each step's output rows land on rows no
    later step reads (patch/stage.py out_shift; proved by patch/proof.py prove_shift)."""
    model = chain_model(shape, layers, seed=11, tail="pool")   # the stage is the peak: it shares
    x = random_inputs(list(shape), "int8", 2, seed=4)
    got, rep = eerie_run(model, [x], tmp_path, patch=(n, (steps, 1), "cached"), inputs_in_arena=True)
    ch = rep["patches"]["chosen"]
    assert ch["halo"] == "cached" and ch["output_over_input_bytes"] > 0
    np.testing.assert_array_equal(got[0], tflm_run(model, [x])[0])


def test_proof_rejects_a_cached_output_over_input_a_later_step_reads(tmp_path):
    """Move a cached stage's output down to the middle of its input: the first steps' output
    rows then land on input rows later steps read, and prove_shift says so."""
    from eerie_c.plan import prove_plan
    p = tmp_path / "m.tflite"
    p.write_bytes(chain_model((1, 96, 20, 3), MOBILENET, seed=1, tail="pool"))
    res = compile_model(p, out_dir=tmp_path / "o", patch=(4, (12, 1), "cached"), inputs_in_arena=True)
    g, plan = res.graph, res.extra["plan"]
    stage = g.ops[0].attrs["patch"]
    assert stage.cache is not None and stage.shift is not None and g.ops[0].attrs["inplace_of_input"] == "shift"
    steps = {o["function"]: o["step"] for o in res.report["ops"] if o["scratch_bytes"]}
    pin, pout = plan.tensors[stage.tensors[0]], plan.tensors[stage.tensors[-1]]
    assert pout.offset - pin.offset == stage.shift   # the planner used the shift
    prove_plan(g, plan, steps)
    moved = pin.offset + 16 * ((g.t(stage.tensors[0]).nbytes // 2) // 16)
    plan.tensors[stage.tensors[-1]] = dataclasses.replace(pout, offset=moved)
    with pytest.raises(CompilerBug, match="an earlier tile's output overwrote"):
        prove_plan(g, plan, steps)


@pytest.mark.parametrize("board", ["mps2-an386", "mps3-an547"])
def test_person_detector_whole_image_under_half_the_arena(board_tools, tmp_path, board):
    """Issue 19's person detector with the whole image in the arena: the planner's cached
    stage writes its output over the image rows it has consumed, so the image no longer sits
    beside the stage: arena <= 0.5x the layer-by-layer one, bit-exact in QEMU."""
    from eerie_c.api import run_model
    path = _person_detector(tmp_path)
    x = random_inputs(list(PERSON_DETECT_INPUT), "int8", 1, seed=5)
    got, rep = run_model(path, [x], board=board, patch="auto")
    np.testing.assert_array_equal(got[0], tflm_run(path, [x])[0])
    ch = rep["patches"]["chosen"]
    assert rep["inputs_in_arena"] and ch["output_over_input_bytes"] > 0
    assert rep["arena_bytes"] <= 0.5 * rep["patches"]["arena_bytes_before"]
