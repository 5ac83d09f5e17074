"""Every model family of zoo.py compiles in float32 and matches eager PyTorch on the host, and
the families with upsampling, normalization and attention run on a Cortex-M4 board in QEMU
(mps2-an386) with the same results.

"Matches" is relative to the output's magnitude: the largest difference from eager is within
1e-4 of the largest output value (observed: under 1e-6)."""
import numpy as np
import pytest

# CI installs torch (.ci/setup): without it this module errors at collection, never skips.
import torch  # noqa: E402

import eerie_c  # noqa: E402
from zoo import build, families  # noqa: E402

RTOL = 1e-4
BOARD = "mps2-an386"
# The families issue 14 added float lowerings for (interpolate, group/layer norm, the
# attention's any.dim): also run on the board.
ON_BOARD = ["transformer", "unet_nearest", "unet_bilinear", "norms"]


def _inputs(shape, n, seed):
    return torch.randn(n, *shape, generator=torch.Generator().manual_seed(seed))


def _compare(m, xs, got):
    with torch.no_grad():
        ref = np.stack([m(x).numpy() for x in xs])
    assert got.shape == ref.shape, (got.shape, ref.shape)
    err = np.abs(got.astype(np.float64) - ref).max()
    assert err <= RTOL * np.abs(ref).max(), f"max difference {err:g}, largest output {np.abs(ref).max():g}"


@pytest.mark.parametrize("family", sorted(families()))
def test_family_float_on_host(family):
    m, x = build(family)
    xs = _inputs(x.shape, 3, 7)
    got, _ = eerie_c.run(m, [xs.numpy()], (x,))
    _compare(m, xs, got[0])


@pytest.mark.usefixtures("board_tools")   # fail (never skip) without the cross toolchain and QEMU
@pytest.mark.parametrize("family", ON_BOARD)
def test_family_float_on_board(family):
    from conftest import assert_invoke_stack_within_bound
    m, x = build(family)
    xs = _inputs(x.shape, 2, 8)
    got, report = eerie_c.run(m, [xs.numpy()], (x,), board=BOARD)
    assert report["board"] == BOARD and report["instructions"] > 0
    assert_invoke_stack_within_bound(report)
    _compare(m, xs, got[0])
