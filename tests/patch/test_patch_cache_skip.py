"""Cached-halo stages (patch/cache.py) with a fused residual ADD (CONV_2D_ADD): the skip
layer's buffer keeps every row until both of its readers (the next layer's window and the ADD's
skip read, at the ADD's own output rows) are done with it, and the band table gives the ADD the
byte of its skip rows. Bit-exact with TFLM on the host (ResNet's first block, a skip from three
layers back, y = x + conv(x), two ADDs in one stage, random chains of ADDs and dilated layers,
binary ADD / SUB / MUL ops with a skip operand, rows pushed in bands, the output over the
input) and in QEMU on the M4 and the M55 (ResNet as the planner picks it, synthetic residual
chains, a SUB of two layers); the band-loop proof
(patch/cache_proof.py) rejects a wrong skip offset, a skip buffer keeping one row too few,
a skip buffer over another buffer and a layer writing over rows it reads."""
import dataclasses

import numpy as np
import pytest

from conftest import eerie_run, random_inputs, tflm_run
from patch_residual_models import DEEP_SKIP, DEEP_SKIP_ADDS, TWO_ADDS, TWO_ADDS_ADDS, random_chain, residual_chain
from test_patch_rows_bands import cached_rows_match_tflm
from stage_proof import compile_stage, proof_rejects

from eerie_c.api import compile_model

RESNET = "pretrainedResnet_quant.tflite"
CHAINS = {"deep": (DEEP_SKIP, DEEP_SKIP_ADDS, (1, 27, 13, 3)), "two": (TWO_ADDS, TWO_ADDS_ADDS, (1, 23, 11, 4))}


def _chain(name, seed=3, tail=None):
    layers, adds, shape = CHAINS[name]
    return residual_chain(shape, layers, adds, seed=seed, tail=tail), shape


def _skip_layers(stage):
    return [k for k, s in enumerate(stage.skips) if s is not None]


@pytest.mark.parametrize("steps", [2, 5, 32])
def test_resnet_block_cached_bit_exact_on_host(models_dir, tmp_path, steps):
    x = random_inputs([1, 32, 32, 3], "int8", 2, seed=5)
    got, rep = eerie_run(models_dir / RESNET, [x], tmp_path, patch=(3, (steps, 1), "cached"))
    ch = rep["patches"]["chosen"]
    assert ch["halo"] == "cached" and ch["extra_macs"] == 0
    assert [o["kind"] for o in rep["ops"][1:3]] == ["CONV_2D", "CONV_2D"]   # the block's ADD is inside
    np.testing.assert_array_equal(got[0], tflm_run(models_dir / RESNET, [x])[0])


@pytest.mark.parametrize("name, n, steps", [("deep", 5, 4), ("deep", 5, 14), ("deep", 5, 2),
                                            ("two", 5, 3), ("two", 4, 21), ("two", 2, 7)])
def test_residual_chain_cached_bit_exact_on_host(tmp_path, name, n, steps):
    model, shape = _chain(name)
    x = random_inputs(list(shape), "int8", 2, seed=4)
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    st = compile_model(p, out_dir=tmp_path / "c", patch=(n, (steps, 1), "cached")).graph.ops[0].attrs["patch"]
    assert st.cache is not None and _skip_layers(st)
    if name == "deep":   # the skip buffer keeps rows for the ADD three layers on, beyond the
        assert st.cache.kept_rows[0] > st.layers[1].kh - st.layers[1].sh   # 3x3 window's 2
    got, rep = eerie_run(model, [x], tmp_path, patch=(n, (steps, 1), "cached"))
    assert rep["patches"]["chosen"]["halo"] == "cached"
    np.testing.assert_array_equal(got[0], tflm_run(model, [x])[0])


@pytest.mark.parametrize("seed", range(12))
def test_random_residual_chains_cached_bit_exact_on_host(tmp_path, seed):
    """Random chains (patch_residual_models.random_chain: kernels 1-5 rows, strides, dilation
    1-3, SAME / VALID, ADDs whose skip is one to several layers back, several ADDs reading one
    buffer) as one cached stage of all their layers: the compile's proof and TFLM agree."""
    shape, layers, adds, steps = random_chain(seed)
    model = residual_chain(shape, layers, adds, seed=seed)
    x = random_inputs(list(shape), "int8", 1, seed=seed)
    got, rep = eerie_run(model, [x], tmp_path, patch=(len(layers), (steps, 1), "cached"))
    assert rep["patches"]["chosen"]["halo"] == "cached"
    assert sum(o["kind"] == "PATCH_STAGE" for o in rep["ops"]) == 1 and len(rep["ops"]) == 1
    np.testing.assert_array_equal(got[0], tflm_run(model, [x])[0])


def test_random_chains_have_adds():
    """The seeds above do test fused ADDs, dilation and both in one stage."""
    chains = [random_chain(seed) for seed in range(12)]
    dilated = [any(lay[5][0] > 1 for lay in layers) for _, layers, _, _ in chains]
    assert sum(bool(adds) for _, _, adds, _ in chains) >= 6 and sum(dilated) >= 6
    assert sum(bool(adds) and d for (_, _, adds, _), d in zip(chains, dilated)) >= 4


# binary ops whose other operand is an earlier layer's output (test_patch_stage_ops.py's chains):
# cached, a layer may follow them in the stage (a recomputing stage would keep three buffers live)
BINARY = [("SKIP_ADD", (3, (3, 1))), ("SKIP_ADD", (4, (5, 1))), ("SKIP_ADD", (4, (15, 1))),
          ("SWISH", (4, (4, 1))), ("SWISH", (3, (14, 1))), ("SKIP_SUB", (5, (5, 1))), ("SKIP_SUB", (4, (13, 1)))]


@pytest.mark.parametrize("name, patch", BINARY, ids=[f"{n}-{p[0]}-{p[1][0]}" for n, p in BINARY])
def test_binary_skip_ops_cached_bit_exact_on_host(tmp_path, name, patch):
    import test_patch_stage_ops as ops
    rep = ops._check(tmp_path, getattr(ops, name), (*patch, "cached"))
    assert rep["patches"]["chosen"]["extra_macs"] == 0


def test_skip_of_its_own_window_input_recomputed_bands(tmp_path):
    """y = x + conv(x) in a recomputing row-band stage: the band kernel's skip (x at the band's
    output rows) and window input (x at the rows its windows touch) have different shapes."""
    model, shape = _chain("two")
    x = random_inputs(list(shape), "int8", 2, seed=6)
    got, _ = eerie_run(model, [x], tmp_path, patch=(2, (3, 1)))
    np.testing.assert_array_equal(got[0], tflm_run(model, [x])[0])


@pytest.mark.parametrize("bands", ["1", "2, 5, 1, 3"])
def test_cached_skip_rows_pushed_in_bands_on_host(tmp_path, bands):
    model, shape = _chain("deep", seed=5)
    x = random_inputs(list(shape), "int8", 2, seed=9)
    cached_rows_match_tflm(tmp_path, model, (5, (7, 1), "cached"), bands, x)


def test_cached_skip_stage_output_over_its_input_on_host(tmp_path):
    model, shape = _chain("deep", seed=2, tail="pool")
    x = random_inputs(list(shape), "int8", 2, seed=4)
    got, rep = eerie_run(model, [x], tmp_path, patch=(5, (7, 1), "cached"), inputs_in_arena=True)
    ch = rep["patches"]["chosen"]
    assert ch["halo"] == "cached" and ch["output_over_input_bytes"] > 0
    np.testing.assert_array_equal(got[0], tflm_run(model, [x])[0])


def _compiled(tmp_path, name="deep", steps=7, n=5):
    return compile_stage(_chain(name)[0], tmp_path, (n, (steps, 1), "cached"))



def _set(table, b, k, value):
    rows = [list(r) for r in table]
    rows[b][k] = value
    return tuple(tuple(r) for r in rows)


@pytest.mark.parametrize("name", ["deep", "resnet", "SKIP_SUB"])
def test_proof_rejects_a_wrong_skip_offset(tmp_path, models_dir, name):
    if name == "resnet":
        res = compile_model(models_dir / RESNET, out_dir=tmp_path / "o", patch=(3, (6, 1), "cached"))
        scratch = {o["function"]: o["step"] for o in res.report["ops"] if o["scratch_bytes"]}
    elif name == "SKIP_SUB":   # a binary op's skip operand
        import test_patch_stage_ops as ops
        res, scratch = ops._stage_of(tmp_path, ops.SKIP_SUB, (5, (5, 1), "cached"))
    else:
        res, scratch = _compiled(tmp_path)
    st = res.graph.ops[0].attrs["patch"]
    m = _skip_layers(st)[-1]
    row = st.layers[m].out_w * st.layers[m].out_c
    b = next(b for b, t in enumerate(st.tiles) if t[m][2] > 0)
    for off in (st.cache.skip_offsets[b][m] + row, st.cache.skip_offsets[b][m] - row):
        c = dataclasses.replace(st.cache, skip_offsets=_set(st.cache.skip_offsets, b, m, off))
        proof_rejects(res, scratch, "fused ADD reads skip row", cache=c)
    c = dataclasses.replace(st.cache, skip_offsets=_set(st.cache.skip_offsets, b, m, 1))
    proof_rejects(res, scratch, "not a whole row", cache=c)


def test_proof_rejects_a_skip_buffer_keeping_one_row_too_few(tmp_path):
    """As a planner would that kept buffer 0's rows for its window reader alone: the band's
    first row one lower, the move one row shorter, the skip offset following; the window reads
    stay right, the ADD's oldest skip row is gone."""
    res, scratch = _compiled(tmp_path)
    st = res.graph.ops[0].attrs["patch"]
    m, c = _skip_layers(st)[-1], st.cache
    j = st.skips[m] - 1
    row = st.layers[j].out_w * st.layers[j].out_c
    # a band where the ADD's first skip row is the oldest row buffer j keeps (below what the
    # window of layer j + 1 reads) and the move keeps rows
    b = next(b for b, t in enumerate(st.tiles) if t[m][2] > 0 and c.moves[b][j][1] > row
             and c.skip_offsets[b][m] == 0 and c.first_rows[b][j] == t[m][0]
             and t[j + 1][2] > 0 and t[j + 1][0] - 1 > c.first_rows[b][j])
    src, nbytes = c.moves[b][j]
    bad = dataclasses.replace(c, first_rows=_set(c.first_rows, b, j, c.first_rows[b][j] + 1),
                              moves=_set(c.moves, b, j, (src + row, nbytes - row)),
                              skip_offsets=_set(c.skip_offsets, b, m, -row))
    proof_rejects(res, scratch, f"fused ADD reads skip row {st.tiles[b][m][0]} .*outside the buffer", cache=bad)


def test_proof_rejects_a_skip_buffer_over_another(tmp_path):
    res, scratch = _compiled(tmp_path)
    st = res.graph.ops[0].attrs["patch"]
    j = st.skips[_skip_layers(st)[-1]] - 1
    tried = 0
    for other in range(j + 1, len(st.buf_offsets)):   # a buffer written before the ADD reads
        offs = list(st.buf_offsets)
        offs[j] = offs[other]
        if offs[j] + st.buf_bytes[j] <= st.scratch_bytes:   # still inside the block
            proof_rejects(res, scratch, "holds|which it reads", buf_offsets=offs)
            tried += 1
    assert tried >= 2


def test_proof_rejects_a_layer_writing_over_rows_it_reads(tmp_path):
    """Buffer 2 (layer 3's input, a 1x1 conv) placed on buffer 3: layer 3 writes its rows over
    the rows it reads in the same call, a kernel that reads what it overwrites."""
    res, scratch = _compiled(tmp_path)
    st = res.graph.ops[0].attrs["patch"]
    offs = list(st.buf_offsets)
    offs[2] = offs[3]
    proof_rejects(res, scratch, "which it reads", buf_offsets=offs)


@pytest.mark.parametrize("board", ["mps2-an386", "mps3-an547"])
def test_resnet_auto_picks_cached_skip_on_board(board_tools, models_dir, board):
    """The planner's ResNet stage (the first residual block, its ADD inside) now has cached
    halos: the same arena as the recomputing one, a smaller estimated growth; bit-exact in QEMU."""
    from eerie_c.api import run_model
    x = random_inputs([1, 32, 32, 3], "int8", 1, seed=2)
    got, rep = run_model(models_dir / RESNET, [x], board=board, patch="auto", max_recompute=20)
    np.testing.assert_array_equal(got[0], tflm_run(models_dir / RESNET, [x])[0])
    ch = rep["patches"]["chosen"]
    assert ch["layers"] == 3 and ch["halo"] == "cached" and ch["extra_macs"] == 0


@pytest.mark.parametrize("board", ["mps2-an386", "mps3-an547"])
def test_binary_skip_op_cached_on_board(board_tools, tmp_path, board):
    import test_patch_stage_ops as ops
    ops._check(tmp_path, ops.SKIP_SUB, (5, (5, 1), "cached"), board=board)


@pytest.mark.parametrize("board", ["mps2-an386", "mps3-an547"])
@pytest.mark.parametrize("name, n, steps", [("deep", 5, 7), ("two", 5, 3)])
def test_residual_chain_cached_on_board(board_tools, tmp_path, board, name, n, steps):
    model, shape = _chain(name)
    x = random_inputs(list(shape), "int8", 2, seed=8)
    got, rep = eerie_run(model, [x], tmp_path, board=board, patch=(n, (steps, 1), "cached"))
    assert rep["patches"]["chosen"]["halo"] == "cached"
    np.testing.assert_array_equal(got[0], tflm_run(model, [x])[0])


def test_picture_names_the_skip_buffer(models_dir, tmp_path):
    """The memory-plan picture's stage parts say which buffer a later layer reads as its skip."""
    import json
    res = compile_model(models_dir / RESNET, out_dir=tmp_path / "o", patch=(3, (8, 1), "cached"))
    text = json.dumps(res.report["memory_plan"], default=str)
    assert "layer 0: keeps 2 rows, skip of layer 2" in text and "layer 1: keeps 2 rows\"" in text
