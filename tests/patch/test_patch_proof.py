"""The patch proof (patch/proof.py) accepts the planner's stages and rejects broken ones:
a patch buffer's offset out of the block or misaligned, a halo too small for the next layer's
window, two buffers live together in the same bytes, an intermediate that lives past the stage,
tiles that miss or repeat output pixels, a layer emitted with the wrong geometry."""
import copy
import dataclasses

import pytest

from eerie_c.api import compile_model
from eerie_c.errors import CompilerBug
from eerie_c.patch.proof import prove_patches
from patch_models import MOBILENET, ODD, chain_model


def _compiled(tmp_path, layers=MOBILENET, shape=(1, 19, 23, 3), patch=(4, (3, 2))):
    path = tmp_path / "m.tflite"
    path.write_bytes(chain_model(shape, layers, tail="pool"))
    res = compile_model(path, patch=patch)
    steps = {o["function"]: o["step"] for o in res.report["ops"] if o["scratch_bytes"]}
    return res.graph, res.extra["plan"], steps


def _stage(g):
    op = g.ops[0]
    assert op.kind == "PATCH_STAGE"
    op.attrs["patch"] = copy.copy(op.attrs["patch"])   # corrupt a copy, field by field
    return op.attrs["patch"]


def _rejects(g, plan, steps, words):
    with pytest.raises(CompilerBug) as e:
        prove_patches(g, plan, steps)
    assert words in str(e.value), str(e.value)


@pytest.mark.parametrize("layers, shape, patch", [(MOBILENET, (1, 19, 23, 3), (4, (3, 2))),
                                                  (MOBILENET, (1, 19, 23, 3), (2, (1, 7))),
                                                  (ODD, (1, 21, 18, 4), (4, (2, 2)))])
def test_planned_stages_are_proved(tmp_path, layers, shape, patch):
    g, plan, steps = _compiled(tmp_path, layers, shape, patch)
    assert prove_patches(g, plan, steps) == {"check": "patch_plan", "ok": True, "stages": 1}


def test_tile_offset_outside_the_block(tmp_path):
    g, plan, steps = _compiled(tmp_path)
    s = _stage(g)
    s.buf_offsets = list(s.buf_offsets)
    s.buf_offsets[2] = s.scratch_bytes - 16
    _rejects(g, plan, steps, "outside the")


def test_tile_offset_misaligned(tmp_path):
    g, plan, steps = _compiled(tmp_path)
    s = _stage(g)
    s.buf_offsets = [s.buf_offsets[0] + 1] + list(s.buf_offsets[1:])
    _rejects(g, plan, steps, "misaligned")


def test_halo_too_small(tmp_path):
    g, plan, steps = _compiled(tmp_path)
    s = _stage(g)
    s.tiles = [list(t) for t in s.tiles]
    y0, x0, rows, cols = s.tiles[4][1]   # a middle tile: layer 1 computes one row fewer
    s.tiles[4][1] = (y0, x0, rows - 1, cols)
    _rejects(g, plan, steps, "halo too small")


def test_buffers_live_together_share_bytes(tmp_path):
    g, plan, steps = _compiled(tmp_path)
    s = _stage(g)
    s.buf_offsets = [s.buf_offsets[0], s.buf_offsets[0], s.buf_offsets[2]]
    _rejects(g, plan, steps, "over its own input")


def test_intermediate_living_past_the_stage(tmp_path):
    g, plan, steps = _compiled(tmp_path)
    s = _stage(g)
    later = g.ops[1]
    g.ops[1] = dataclasses.replace(later, inputs=list(later.inputs) + [s.tensors[2]])
    _rejects(g, plan, steps, "outside the stage")


@pytest.mark.parametrize("change", ["drop", "repeat"])
def test_tiles_must_cover_the_output_once(tmp_path, change):
    g, plan, steps = _compiled(tmp_path)
    s = _stage(g)
    s.tiles = s.tiles[1:] if change == "drop" else s.tiles + [s.tiles[0]]
    _rejects(g, plan, steps, "times (each must be written once)")


def test_geometry_must_be_the_ops_own(tmp_path):
    g, plan, steps = _compiled(tmp_path)
    s = _stage(g)
    s.layers = [dataclasses.replace(s.layers[0], pad_t=s.layers[0].pad_t + 1)] + list(s.layers[1:])
    _rejects(g, plan, steps, "geometry")


def test_block_too_small_for_the_buffers(tmp_path):
    g, plan, steps = _compiled(tmp_path)
    name = next(n for n, st in steps.items() if st == 0)
    plan.scratch[name] = dataclasses.replace(plan.scratch[name], size=plan.scratch[name].size - 64)
    _rejects(g, plan, steps, "outside the")


def _shifted(tmp_path):
    """A stage whose output the planner put over its input (input planned in the arena)."""
    path = tmp_path / "s.tflite"
    path.write_bytes(chain_model((1, 48, 40, 3), MOBILENET, tail="pool"))
    res = compile_model(path, patch=(4, (6, 5)), inputs_in_arena=True)
    g, plan = res.graph, res.extra["plan"]
    stage = g.ops[0].attrs["patch"]
    pin, pout = plan.tensors[stage.tensors[0]], plan.tensors[stage.tensors[-1]]
    steps = {o["function"]: o["step"] for o in res.report["ops"] if o["scratch_bytes"]}
    return g, plan, steps, stage, pin, pout


def test_output_over_input_is_proved(tmp_path):
    from eerie_c.plan import prove_plan
    g, plan, steps, stage, pin, pout = _shifted(tmp_path)
    assert g.ops[0].attrs["inplace_of_input"] == "shift"
    n_in, n_out = (g.t(stage.tensors[k]).nbytes for k in (0, -1))
    # the two really share bytes, at the planner's shift
    assert pout.offset - pin.offset == stage.shift
    assert pin.offset < pout.offset + n_out and pout.offset < pin.offset + n_in
    prove_plan(g, plan, steps)


def test_output_over_input_that_a_later_tile_reads_is_rejected(tmp_path):
    """Move the output up by the input's rows that later tiles still read: the first tile's
    output then lands on them."""
    from eerie_c.plan import prove_plan
    g, plan, steps, stage, pin, pout = _shifted(tmp_path)
    moved = pin.offset + 16 * ((g.t(stage.tensors[0]).nbytes // 2) // 16)
    plan.tensors[stage.tensors[-1]] = dataclasses.replace(pout, offset=moved)
    with pytest.raises(CompilerBug) as e:
        prove_plan(g, plan, steps)
    assert "an earlier tile's output overwrote" in str(e.value), str(e.value)
