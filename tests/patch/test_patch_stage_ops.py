"""Pools, PAD and int8 element-wise layers inside patch stages (patch/ops.py): chains such
as conv -> maxpool -> conv, conv -> avgpool -> depthwise, PAD -> conv VALID stride 2 ->
depthwise and conv -> RELU6 / LEAKY_RELU / ... -> conv run in row bands (each layer's own
kernel per band, halos recomputed or cached), bit-exact with TFLM on the host (odd heights,
stride-2 pools that keep rows, PAD bands wholly in the padding, rows pushed in bands) and in
QEMU on the M4 and the M55. The per-tile C refuses them; the proof rejects a halo one row short
at a pool, a PAD's region or padding shifted, a pool's window changed and such a stage outside
row bands; `--patch auto` picks a stage through a max pool when it lowers the arena."""
import copy
import dataclasses

import numpy as np
import pytest

from conftest import eerie_run, random_inputs, tflm_run
from patch_models import chain_model
from test_patch_rows_bands import _build_and_push
from stage_proof import compile_stage, proof_rejects

from eerie_c.errors import EerieError


def conv(oc, k=(3, 3), s=(1, 1), pad="SAME", act="RELU"):
    return ("conv", oc, k, s, pad, (1, 1), act, True)


def dw(k=(3, 3), s=(1, 1), pad="SAME", act="RELU"):
    return ("dw", None, k, s, pad, (1, 1), act, True)


def pool(kind, k, s, pad, act="NONE"):
    return (kind, None, k, s, pad, (1, 1), act, None)


def pad(kind, amounts):
    return (kind, amounts, (1, 1), (1, 1), None, (1, 1), None, None)


def unary(kind):
    return ("unary", kind, (1, 1), (1, 1), None, (1, 1), None, None)


MAXPOOL = ([conv(6), pool("maxpool", (2, 2), (2, 2), "VALID"), conv(5)], (1, 21, 17, 3))
AVGPOOL = ([conv(6), pool("avgpool", (3, 3), (1, 1), "SAME"), dw()], (1, 19, 15, 3))
# a 3x3 stride-2 pool keeps rows between steps (kh > sh), RELU6 fused
MAXPOOL_3S2 = ([conv(8, act="NONE"), pool("maxpool", (3, 3), (2, 2), "SAME", "RELU6"), dw(s=(2, 2))],
               (1, 23, 13, 4))
PAD_FIRST = ([pad("pad", ((1, 2), (1, 0))), conv(6, s=(2, 2), pad="VALID"), dw()], (1, 19, 15, 3))
# PADV2 (a pad value that is not the zero point) between layers, VALID stride-2 depthwise after
PADV2_MID = ([conv(6), pad("padv2", ((2, 1), (0, 2))), dw(s=(2, 2), pad="VALID")], (1, 17, 11, 3))
# a PAD as the last layer: steps that compute only its padding rows read no input row
PAD_LAST = ([conv(6), pad("pad", ((3, 2), (1, 1)))], (1, 9, 7, 3))


def const_op(kind, cshape, first=False, act="NONE"):
    return ("const", (kind, cshape, first), (1, 1), (1, 1), None, (1, 1), act, None)


# ADD / SUB / MUL with a constant the same for every pixel (per channel, scalar), either side.
# passes/channel_tables.py makes each a table (CHANNEL_TABLE / TABLE_LOOKUP) and folds the MUL
# and the SUB after it into one, so the stage's 6 ops are 5 layers; with 40 channels (past the
# tables' size limit) they stay ADD / SUB / MUL (the scalar SUB a table) and the stage has 6.
CONST_OPS = ([conv(6, act="NONE"), const_op("ADD", (6,), act="RELU"), dw(), const_op("MUL", (1, 1, 1, 6), True),
              const_op("SUB", (), False), conv(4)], (1, 15, 11, 3))
CONST_OPS_WIDE = ([conv(40, act="NONE"), const_op("ADD", (40,), act="RELU"), dw(),
                   const_op("MUL", (1, 1, 1, 40), True), const_op("SUB", (), False), conv(4)], (1, 9, 7, 3))


def skip_op(kind, index, first=False, act="NONE"):
    return ("skip", (kind, index, first), (1, 1), (1, 1), None, (1, 1), act, None)


# binary ops whose other operand is an earlier layer's output (read from its patch buffer, like a
# fused ADD's skip; in recomputed row bands as the last layer of the stage (a layer after it
# would keep three buffers live), with cached halos anywhere in the stage, the skip buffer
# keeping its rows: tests/patch/test_patch_cache_skip.py): a residual over a depthwise,
# x * sigmoid(x) (swish), a SUB
SKIP_ADD = ([conv(6, act="NONE"), dw(act="NONE"), skip_op("ADD", 1, act="RELU"), conv(4)], (1, 15, 11, 3))
SWISH = ([conv(6, act="NONE"), unary("LOGISTIC"), skip_op("MUL", 1, True), dw()], (1, 14, 9, 3))
SKIP_SUB = ([conv(4), pool("maxpool", (2, 2), (1, 1), "SAME"), conv(4, (1, 1)), skip_op("SUB", 2), conv(5)],
            (1, 13, 10, 3))


def unary_chain(kind):
    return [conv(6, act="NONE"), unary(kind), conv(5)], (1, 17, 13, 3)


HOST = [(MAXPOOL, (3, (4, 1))), (MAXPOOL, (3, (5, 1), "cached")), (MAXPOOL, (2, (10, 1))),
        (AVGPOOL, (3, (3, 1))), (AVGPOOL, (3, (6, 1), "cached")),
        (MAXPOOL_3S2, (3, (3, 1))), (MAXPOOL_3S2, (3, (7, 1), "cached")),
        (PAD_FIRST, (3, (4, 1))), (PAD_FIRST, (3, (11, 1), "cached")),
        (PADV2_MID, (3, (2, 1))), (PADV2_MID, (3, (8, 1), "cached")),
        (PAD_LAST, (2, (9, 1), "cached"))] + \
       [(unary_chain(k), (3, (4, 1))) for k in ("RELU6", "LEAKY_RELU", "HARD_SWISH", "LOGISTIC")] + \
       [(unary_chain(k), (3, (5, 1), "cached")) for k in ("RELU6", "TANH", "QUANTIZE", "RELU")] + \
       [(CONST_OPS, (5, (3, 1))), (CONST_OPS, (5, (5, 1), "cached")), (CONST_OPS_WIDE, (6, (3, 1))),
        (SKIP_ADD, (3, (3, 1))),
        (SKIP_ADD, (3, (15, 1))), (SWISH, (3, (4, 1))), (SKIP_SUB, (4, (5, 1)))]


def _check(tmp_path, chain, patch, board=None, **kw):
    layers, shape = chain
    model = chain_model(shape, layers, seed=3)
    x = random_inputs(list(shape), "int8", 2, seed=4)
    ref = tflm_run(model, [x])[0]
    got, rep = eerie_run(model, [x], tmp_path, patch=patch, board=board, **kw)
    sat = np.isin(ref, (-128, 127)).mean()
    assert sat < 0.5, f"{sat:.0%} of the outputs saturated: a weak test"
    np.testing.assert_array_equal(got[0], ref)
    ch = rep["patches"]["chosen"]
    assert rep["ops"][0]["kind"] == "PATCH_STAGE" and ch["layers"] == patch[0]
    assert ch["halo"] == ("cached" if patch[2:] == ("cached",) else "recomputed")
    return rep


def _name(chain, patch):
    kinds = "-".join(str(lay[1][0] if lay[0] in ("const", "skip") else lay[1]) if lay[0] in ("unary", "const", "skip")
                     else lay[0]
                     for lay in chain[0][:patch[0]])
    return f"{kinds}-{patch[1][0]}x{patch[1][1]}{'-cached' if patch[2:] else ''}"


@pytest.mark.parametrize("chain, patch", HOST, ids=[_name(c, p) for c, p in HOST])
def test_stage_ops_bit_exact_on_host(tmp_path, chain, patch):
    _check(tmp_path, chain, patch)


def _stage_of(tmp_path, chain, patch, **kw):
    layers, shape = chain
    return compile_stage(chain_model(shape, layers, seed=3), tmp_path, patch, **kw)


def test_pad_bands_wholly_in_the_padding_read_nothing(tmp_path):
    """The cached PAD_LAST and PAD_FIRST stages do have steps whose PAD rows are all padding
    (the band kernel then only writes the pad value), so the host tests above run that path."""
    for chain, patch, k in ((PAD_LAST, (2, (9, 1), "cached"), 1), (PAD_FIRST, (3, (11, 1), "cached"), 0)):
        res, _ = _stage_of(tmp_path, chain, patch)
        st = res.graph.ops[0].attrs["patch"]
        empty = [t for t in st.tiles if t[k][2] > 0 and st.layers[k].needs(t[k])[2] == 0]
        assert empty, f"no band of the PAD reads nothing in {patch}"


def test_per_tile_grids_are_refused(tmp_path):
    """The per-tile C (patch/kernel.py) has convolutions only: a grid with columns, or a
    recomputing grid with a band wholly in a PAD's padding, is refused; row bands run."""
    for chain, patch in ((MAXPOOL, (3, (2, 2))), (unary_chain("RELU6"), (3, (1, 3))), (PAD_LAST, (2, (9, 1)))):
        with pytest.raises(EerieError, match="patch stage"):
            _stage_of(tmp_path, chain, patch)


def test_a_constant_that_varies_over_the_image_ends_the_stage(tmp_path):
    """A row band would need its rows of such a constant: the prefix stops before the ADD."""
    chain = ([conv(6, act="NONE"), const_op("ADD", (1, 15, 11, 6)), conv(4)], (1, 15, 11, 3))
    with pytest.raises(EerieError, match="the graph starts with 1 layers"):
        _stage_of(tmp_path, chain, (2, (3, 1)))


def test_rows_pushed_into_a_pad_first_cached_stage_on_host(tmp_path):
    layers, shape = PAD_FIRST
    model = chain_model(shape, layers, seed=3)
    x = random_inputs(list(shape), "int8", 2, seed=6)
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    res, out = _build_and_push(tmp_path, p, (3, (11, 1), "cached"), "1, 4, 2", x, 2)
    assert res.graph.ops[0].attrs["patch"].cache is not None
    ref = tflm_run(model, [x])[0]
    np.testing.assert_array_equal(np.frombuffer(out, np.int8).reshape(ref.shape), ref)



def _with_region(st, t, k, region):
    tiles = [list(r) for r in st.tiles]
    tiles[t][k] = region
    return dataclasses.replace(st, tiles=tiles)


def test_proof_rejects_a_halo_one_row_short_at_a_pool(tmp_path):
    res, steps = _stage_of(tmp_path, MAXPOOL_3S2, (3, (3, 1)))
    st = res.graph.ops[0].attrs["patch"]
    t = 1   # a middle band: the pool's window reads the conv's rows on both sides
    y0, x0, rows, cols = st.tiles[t][0]
    proof_rejects(res, steps, "halo too small", _with_region(st, t, 0, (y0, x0, rows - 1, cols)))
    proof_rejects(res, steps, "halo too small", _with_region(st, t, 0, (y0 + 1, x0, rows - 1, cols)))


def test_proof_rejects_a_pool_window_changed(tmp_path):
    res, steps = _stage_of(tmp_path, MAXPOOL_3S2, (3, (7, 1), "cached"))
    st = res.graph.ops[0].attrs["patch"]
    layers = list(st.layers)
    layers[1] = dataclasses.replace(layers[1], kh=2)   # the planner believes a 2-row window
    proof_rejects(res, steps, "emitted with geometry", dataclasses.replace(st, layers=layers))
    # the pool's input buffer one row short of what its 3-row windows read
    firsts = [list(f) for f in st.cache.first_rows]
    b = next(b for b, t in enumerate(st.tiles) if t[1][2] > 0 and t[1][0] > 0)
    firsts[b][0] += 1
    cache = dataclasses.replace(st.cache, first_rows=tuple(map(tuple, firsts)))
    proof_rejects(res, steps, "holds|which has", dataclasses.replace(st, cache=cache))


def test_proof_rejects_a_pad_region_shifted(tmp_path):
    res, steps = _stage_of(tmp_path, PAD_FIRST, (3, (4, 1)))
    st = res.graph.ops[0].attrs["patch"]
    y0, x0, rows, cols = st.tiles[1][0]   # the PAD's rows of band 1, one row down
    proof_rejects(res, steps, "halo too small", _with_region(st, 1, 0, (y0 + 1, x0, rows, cols)))
    layers = list(st.layers)   # the PAD's top padding one row more than the op's
    layers[0] = dataclasses.replace(layers[0], pad_t=layers[0].pad_t + 1)
    proof_rejects(res, steps, "emitted with geometry", dataclasses.replace(st, layers=layers))


def test_proof_rejects_a_cached_pad_buffer_shifted(tmp_path):
    res, steps = _stage_of(tmp_path, PADV2_MID, (3, (8, 1), "cached"))
    st = res.graph.ops[0].attrs["patch"]
    firsts = [list(f) for f in st.cache.first_rows]
    b = next(b for b, t in enumerate(st.tiles) if t[2][2] > 0 and b > 0)
    firsts[b][1] -= 1   # the PAD's buffer said to start a row higher: the depthwise reads wrong rows
    cache = dataclasses.replace(st.cache, first_rows=tuple(map(tuple, firsts)))
    proof_rejects(res, steps, "holds|which has", dataclasses.replace(st, cache=cache))


def test_proof_rejects_a_binary_skip_read_from_the_wrong_layer(tmp_path):
    res, steps = _stage_of(tmp_path, SWISH, (3, (4, 1)))
    st = res.graph.ops[0].attrs["patch"]
    assert st.skips == [None, None, 1]   # the MUL's other operand: the conv's patch buffer
    proof_rejects(res, steps, "emitted with skip input", dataclasses.replace(st, skips=[None, None, 2]))
    proof_rejects(res, steps, "emitted with skip input", dataclasses.replace(st, skips=[None, None, None]))
    y0, x0, rows, cols = st.tiles[1][0]   # the conv's rows one short of the MUL's
    proof_rejects(res, steps, "halo too small|skip input at rows", _with_region(st, 1, 0, (y0, x0, rows - 1, cols)))


def test_proof_rejects_a_pool_stage_outside_row_bands(tmp_path):
    res, steps = _stage_of(tmp_path, MAXPOOL, (3, (4, 1)))
    st = copy.copy(res.graph.ops[0].attrs["patch"])
    proof_rejects(res, steps, "only in row bands", dataclasses.replace(st, kernel_scratch=None))


def test_auto_chooses_a_stage_through_the_max_pool(board_tools, tmp_path):
    """conv -> maxpool -> conv -> ...: the 48x48x16 conv output is the peak layer by layer; a
    stage through the pool keeps only bands of it, and report.md shows the pool in the stage."""
    layers = [conv(16), pool("maxpool", (2, 2), (2, 2), "VALID"), conv(16, act="RELU6"),
              dw(s=(2, 2)), conv(24)]
    shape = (1, 48, 48, 3)
    model = chain_model(shape, layers, seed=2, tail="pool")
    x = random_inputs(list(shape), "int8", 1, seed=1)
    got, rep = eerie_run(model, [x], tmp_path, patch="auto", board="mps2-an386", out_dir=tmp_path / "o")
    np.testing.assert_array_equal(got[0], tflm_run(model, [x])[0])
    p = rep["patches"]
    assert p["chosen"] is not None and p["arena_bytes_after"] == rep["arena_bytes"] < p["arena_bytes_before"]
    kinds = [lay["kind"] for lay in p["chosen"]["per_layer"]]
    assert kinds[:2] == ["CONV_2D", "MAX_POOL_2D"], kinds
    text = (tmp_path / "o" / "report.md").read_text()
    assert "| MAX_POOL_2D |" in text and "## Patch-based execution" in text


BOARD_CASES = [(MAXPOOL, (3, (4, 1))), (AVGPOOL, (3, (6, 1), "cached")),
               (PAD_FIRST, (3, (11, 1), "cached")), (unary_chain("LEAKY_RELU"), (3, (4, 1))),
               (CONST_OPS, (5, (5, 1), "cached")), (SKIP_ADD, (3, (3, 1))), (SWISH, (3, (4, 1)))]


@pytest.mark.parametrize("board", ["mps2-an386", "mps3-an547"])
@pytest.mark.parametrize("chain, patch", BOARD_CASES, ids=[_name(c, p) for c, p in BOARD_CASES])
def test_stage_ops_on_board_bit_exact(board_tools, tmp_path, board, chain, patch):
    _check(tmp_path, chain, patch, board=board)


def test_auto_chooses_a_stage_from_the_pad(tmp_path):
    """PAD -> 3x3 stride-2 VALID conv -> ...: the planner's stage starts at the PAD (host run,
    bit-exact; the bound on the host is the extra MACs)."""
    layers = [pad("pad", ((0, 1), (0, 1))), conv(16, s=(2, 2), pad="VALID", act="RELU6"), dw(act="RELU6"),
              conv(24, (1, 1)), dw(s=(2, 2))]
    shape = (1, 64, 64, 3)
    model = chain_model(shape, layers, seed=2, tail="pool")
    x = random_inputs(list(shape), "int8", 1, seed=1)
    got, rep = eerie_run(model, [x], tmp_path, patch="auto", inputs_in_arena=True)
    np.testing.assert_array_equal(got[0], tflm_run(model, [x])[0])
    p = rep["patches"]
    assert p["chosen"] is not None and rep["arena_bytes"] < p["arena_bytes_before"]
    assert p["chosen"]["per_layer"][0]["kind"] == "PAD"


@pytest.mark.parametrize("board", ["mps2-an386", "mps3-an547"])
def test_standalone_clamps_keep_auto_within_the_bound(board_tools, tmp_path, board):
    """A standalone RELU6 runs scalar over a band on the M55 (gcc vectorizes it layer by layer
    only): whatever stage the planner picks for conv -> RELU6 -> dw -> HARD_SWISH -> ..., the
    instructions measured in QEMU grow by at most the 20% bound (it measured 1.33x at 2.96%
    estimated before estimate.py charged that)."""
    layers = [conv(16, s=(2, 2), act="NONE"), unary("RELU6"), dw(act="NONE"), unary("HARD_SWISH"),
              conv(24, (1, 1)), dw(s=(2, 2))]
    shape = (1, 96, 96, 3)
    model = chain_model(shape, layers, seed=2, tail="pool")
    x = random_inputs(list(shape), "int8", 1, seed=1)
    ref = tflm_run(model, [x])[0]
    got, rep = eerie_run(model, [x], tmp_path, patch="auto", board=board)
    off_got, off = eerie_run(model, [x], tmp_path, name="off", patch="off", board=board)
    np.testing.assert_array_equal(got[0], ref)
    np.testing.assert_array_equal(off_got[0], ref)
    assert rep["instructions"] <= 1.20 * off["instructions"], (rep["patches"]["chosen"], rep["instructions"],
                                                               off["instructions"])
