"""Row-band patch stages (patch/band_kernels.py: each layer's own kernel per band) and a
residual block inside a stage (CONV_2D_ADD reading an earlier layer's patch buffer as its skip
input): bit-exact with TFLM on the host and in QEMU, and the patch proof rejects broken band
plans: a skip buffer overwritten or too small, a kernel scratch over a live buffer, a skip the
op does not read, an intermediate read after the stage."""
import copy

import numpy as np
import pytest

from conftest import random_inputs, tflm_run
from eerie_c.api import compile_model
from eerie_c.errors import CompilerBug
from eerie_c.kernels._conv_rules import pointwise_inplace
from eerie_c.patch.band_kernels import band_scratch
from eerie_c.kernels.window import Window
from eerie_c.patch.proof import prove_patches
from patch_models import MOBILENET, ODD, chain_model

RESNET = "pretrainedResnet_quant.tflite"


def _resnet(models_dir, patch, target="host"):
    res = compile_model(models_dir / RESNET, patch=patch, target=target)
    steps = {o["function"]: o["step"] for o in res.report["ops"] if o["scratch_bytes"]}
    return res, steps


@pytest.mark.parametrize("grid", [(2, 1), (5, 1), (11, 1), (32, 1)])
def test_resnet_block_in_bands_bit_exact_on_host(models_dir, tmp_path, grid):
    from conftest import eerie_run
    x = random_inputs([1, 32, 32, 3], "int8", 2, seed=5)
    got, report = eerie_run(models_dir / RESNET, [x], tmp_path, patch=(3, grid))
    assert report["ops"][0]["kind"] == "PATCH_STAGE"
    assert [o["kind"] for o in report["ops"][1:3]] == ["CONV_2D", "CONV_2D"]   # the block's ADD is inside
    np.testing.assert_array_equal(got[0], tflm_run(models_dir / RESNET, [x])[0])


@pytest.mark.parametrize("board", ["mps2-an386", "mps3-an547"])
def test_resnet_auto_on_board_meets_30k(board_tools, models_dir, tmp_path, board):
    """The planner's own stage (the first residual block in row bands) on the M4 and the
    M55: bit-exact, RAM (arena + static data + stack) under 30,000 B, within the bound."""
    from eerie_c.api import run_model
    x = random_inputs([1, 32, 32, 3], "int8", 1, seed=1)
    got, auto = run_model(models_dir / RESNET, [x], board=board, patch="auto", max_recompute=20)
    np.testing.assert_array_equal(got[0], tflm_run(models_dir / RESNET, [x])[0])
    p = auto["patches"]
    assert p["chosen"] is not None and p["chosen"]["layers"] == 3 and p["chosen"]["grid"][1] == 1
    assert auto["arena_bytes"] < 30_000 - 1024 and p["est_growth_percent"] <= 20


# row bands run each layer's own kernel: DSP (M4), Helium (M55), portable (M3), the GEMM (RISC-V)
@pytest.mark.parametrize("board", ["mps2-an386", "mps3-an547", "mps2-an385", "riscv-virt"])
@pytest.mark.parametrize("layers, shape, patch", [(MOBILENET, (1, 19, 23, 3), (4, (3, 1))),
                                                  (ODD, (1, 21, 18, 4), (4, (5, 1)))])
def test_chain_in_bands_on_board_bit_exact(board_tools, tmp_path, board, layers, shape, patch):
    from conftest import eerie_run
    model = chain_model(shape, layers, seed=3)
    x = random_inputs(list(shape), "int8", 2, seed=7)
    got, report = eerie_run(model, [x], tmp_path, board=board, patch=patch)
    assert report["ops"][0]["kind"] == "PATCH_STAGE"
    np.testing.assert_array_equal(got[0], tflm_run(model, [x])[0])


def _stage(res):
    op = res.graph.ops[0]
    op.attrs["patch"] = copy.copy(op.attrs["patch"])
    return op.attrs["patch"]


def _set_region(s, tile: int, layer: int, change):
    """Corrupt one region of the plan: tile `tile`'s output region of layer `layer` becomes
    change(y0, x0, rows, cols)."""
    tiles = [list(t) for t in s.tiles]
    tiles[tile][layer] = change(*tiles[tile][layer])
    s.tiles = tiles


def _rejects(res, steps, words):
    with pytest.raises(CompilerBug) as e:
        prove_patches(res.graph, res.extra["plan"], steps)
    assert words in str(e.value), str(e.value)


def test_resnet_band_plan_is_proved(models_dir):
    res, steps = _resnet(models_dir, (3, (4, 1)))
    assert prove_patches(res.graph, res.extra["plan"], steps)["ok"]
    s = res.graph.ops[0].attrs["patch"]
    assert s.skips == [None, None, 1] and s.bands


def test_skip_buffer_overwritten(models_dir):
    # the skip (layer 0's buffer) moved onto layer 1's buffer: written over before the ADD
    res, steps = _resnet(models_dir, (3, (4, 1)))
    s = _stage(res)
    s.buf_offsets = [s.buf_offsets[1], s.buf_offsets[1]]
    _rejects(res, steps, "over its own input")


def test_skip_halo_too_small(models_dir):
    # layer 0 computes fewer rows than the ADD reads as its skip
    res, steps = _resnet(models_dir, (3, (4, 1)))
    s = _stage(res)
    _set_region(s, 1, 0, lambda y0, x0, rows, cols: (y0 + 3, x0, rows - 3, cols))
    _rejects(res, steps, "wrote only rows")


def test_skip_index_disagrees_with_the_op(models_dir):
    res, steps = _resnet(models_dir, (3, (4, 1)))
    s = _stage(res)
    s.skips = [None, None, 2]
    _rejects(res, steps, "skip input")


def test_kernel_scratch_over_a_live_buffer(models_dir):
    res, steps = _resnet(models_dir, (3, (4, 1)))
    s = _stage(res)
    ks = list(s.kernel_scratch)
    ks[1] = (s.buf_offsets[1], 64)   # layer 1 scratch on the buffer it writes
    s.kernel_scratch = ks
    _rejects(res, steps, "kernel scratch")


def test_band_region_not_all_columns(models_dir):
    res, steps = _resnet(models_dir, (3, (4, 1)))
    s = _stage(res)
    _set_region(s, 0, 1, lambda y0, x0, rows, cols: (y0, x0, rows, cols - 1))
    _rejects(res, steps, "not all")


def test_intermediate_read_after_the_stage(models_dir):
    # the skip tensor's lifetime must end inside the stage
    res, steps = _resnet(models_dir, (3, (4, 1)))
    g = res.graph
    skip = g.ops[0].attrs["patch"].tensors[1]
    later = copy.copy(g.ops[1])
    later.inputs = [skip] + list(later.inputs[1:])
    g.ops = [g.ops[0], later] + list(g.ops[2:])
    _rejects(res, steps, "outside the stage")


def test_strided_pointwise_in_place_rule():
    def win(s, oh, ow):
        return Window(1, 1, s, s, 1, 1, 0, 0, oh, ow, True, False, "")
    # ResNet's 1x1 stride-2 shortcut 32x32x16 -> 16x16x32: each pixel's output ends before the
    # next pixel's input starts
    assert pointwise_inplace(win(2, 16, 16), 32, 32, 16, 32) == "start"
    # stride 1 with more output channels: only the "end" layout
    assert pointwise_inplace(win(1, 8, 8), 8, 8, 16, 32) == "end"
    # stride 2 but four times the channels: pixel 1's output would overrun pixel 2's input
    assert pointwise_inplace(win(2, 16, 16), 32, 32, 8, 64) is False


def test_band_kernel_scratch_is_asked_not_assumed(models_dir, monkeypatch):
    """A layer's kernel over a row band may take another path than over the whole image, with
    more scratch (once ResNet's first conv on the M55: 1,084 against 64 B). The planner plans
    with what the band kernels say they need (patch/band_kernels.py band_scratch), so
    lowering and the proof agree: here band_scratch is made to ask 512 B more for layer 0,
    and the plan gives it that."""
    import eerie_c.patch as patch_pkg   # apply_patches asks band_scratch through its module
    asked = []

    def more(stage, g, target, optimize, memo=None):
        need = band_scratch(stage, g, target, optimize, memo)
        need[0] += 512
        asked.append(need[0])
        return need
    monkeypatch.setattr(patch_pkg, "band_scratch", more)
    whole = compile_model(models_dir / RESNET, target="cortex-m55",
                          patch="off").report["ops"][0]["scratch_bytes"]   # layer 0's kernel, whole
    res, steps = _resnet(models_dir, (3, (8, 1)), target="cortex-m55")
    s = res.graph.ops[0].attrs["patch"]
    assert asked and s.kernel_scratch[0][1] >= max(asked) >= whole + 512
    assert prove_patches(res.graph, res.extra["plan"], steps)["ok"]
