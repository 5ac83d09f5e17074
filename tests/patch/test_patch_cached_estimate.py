"""A stage with cached halos computes every row of every layer once, so its estimate
(estimate.py _bands) is the prefix's own layer estimates, split over the steps in proportion
to the rows each computes, plus only what running in steps adds: the kept rows' moves
(MOVE_COST), the halo rows a stride-1 depthwise sign-extends again (DW_HALO) and a cost per
kernel call (CACHED_STEP). Charging each one-row step a whole layer's fixed cost and its
halo input (the old estimate) made the person detector's cached stage 17.7% at 2.4% measured
(tests/patch/test_patch_estimate.py measures it in QEMU)."""
import pytest

from eerie_c.api import compile_model
from eerie_c.estimate import CACHED_STEP, DW_HALO, FAMILY, MOVE_COST
from patch_models import MOBILENET, chain_model

SHAPE = (1, 64, 64, 3)


def _reports(tmp_path, target, n, steps, low=frozenset()):
    path = tmp_path / "m.tflite"
    path.write_bytes(chain_model(SHAPE, MOBILENET, tail="pool"))
    off = compile_model(path, target=target, patch="off", inputs_in_arena=True).report
    cached = compile_model(path, target=target, patch=(n, (steps, 1), "cached"),
                           inputs_in_arena=True).report
    return off, cached


@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m55"])
@pytest.mark.parametrize("n,steps", [(4, 16), (3, 6)])
def test_cached_stage_estimate_is_its_layers_plus_the_steps(tmp_path, target, n, steps):
    off, rep = _reports(tmp_path, target, n, steps)
    stage = rep["ops"][0]
    assert stage["kind"] == "PATCH_STAGE" and rep["patches"]["chosen"]["halo"] == "cached"
    work = stage["stage_bands"]
    calls = [w for w in work if w[0] != "MOVE"]
    moves = [w for w in work if w[0] == "MOVE"]
    assert moves and all(len(w) == 6 for w in calls)
    # every layer's shares add up to the whole layer: each row computed once
    kinds = [o["kind"] for o in off["ops"][:n]]
    assert sum(w[4] for w in calls) == pytest.approx(n, abs=1e-4)
    assert sorted({w[0] for w in calls}) == sorted(set(kinds))
    fam = FAMILY[target]
    per_byte, per_move = MOVE_COST[fam]
    steps_cost = (sum(w[3] * per_byte + per_move for w in moves) + DW_HALO[fam] * sum(w[5] for w in calls)
                  + CACHED_STEP[fam] * len(calls) + 200)
    prefix = sum(o["est_instructions"] for o in off["ops"][:n])
    # the layer estimates cancel: what is left is the steps' cost (each call rounds to 10)
    assert abs(stage["est_instructions"] - prefix - steps_cost) <= 10 * len(calls) + 10 * n
    if fam == "dsp":   # the 3x3 stride-1 depthwise layers pay their halo rows again
        assert any(w[5] > 0 for w in calls if w[0] == "DEPTHWISE_CONV_2D")
    assert all(w[5] == 0 for w in calls if w[0] != "DEPTHWISE_CONV_2D")
