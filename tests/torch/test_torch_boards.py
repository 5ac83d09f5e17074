"""PyTorch programs on a Cortex-M4 board in QEMU (mps2-an386): a CNN with batch norm, an MLP,
a depthwise-separable CNN, a residual block, an early-exit classifier, self-attention
(BATCH_MATMUL), a transposed-convolution upsampler, the control-flow models
(torch.cond both branches, torch.while_loop both exits, an RNN cell iterated with an int32
counter, cond nested in a loop; while in cond, while in while and cond in cond; a loop past
its maximum failing with NAME_invoke's return code 1) and programs with dynamic sizes (a batch, a sequence length;
several sizes in one boot) match eager PyTorch within 1e-5, each with NAME_invoke's stack
measured in QEMU under the proven bound (plus one interrupt) and the bound within 2x of it."""
import shutil

import numpy as np
import pytest

# CI installs torch (.ci/setup): without it this module errors at collection, never skips.
import torch  # noqa: E402

import eerie_c  # noqa: E402
from conftest import assert_invoke_stack_within_bound  # noqa: E402
from test_control_flow import NESTED_XS, CondActivation, CondInWhile, EarlyExit, Nested, Newton  # noqa: E402
from test_dynamic import MLP as BatchMLP, SeqModel, compare_seq, seq_inputs  # noqa: E402
from test_rnn_loop import RNNLoop  # noqa: E402
from test_torch_models import MLP, DepthwiseSeparable, Residual, SmallCNN, randomize_bn  # noqa: E402
from test_torch_ops import Attention, Up2d  # noqa: E402

Dim = torch.export.Dim

BOARD = "mps2-an386"


# Like tests/boards: fail (never skip) without the cross toolchain and QEMU.
pytestmark = pytest.mark.usefixtures("board_tools")


def on_board(m, xs, example):
    """Run on the board (a batch of inputs in one QEMU boot); compare every output with eager."""
    m = m.eval()
    got, report = eerie_c.run(m, [xs], example, board=BOARD)
    assert report["board"] == BOARD and report["instructions"] > 0
    assert_invoke_stack_within_bound(report)
    with torch.no_grad():
        refs = [m(torch.tensor(x)) for x in xs]
    refs = [r if isinstance(r, tuple) else (r,) for r in refs]
    for k, g in enumerate(got):
        r = np.stack([ref[k].numpy() for ref in refs])
        assert g.shape == r.shape
        assert np.abs(g.astype(np.float64) - r).max() <= 1e-5
    return got


def test_cnn_with_batch_norm():
    torch.manual_seed(0)
    xs = np.random.default_rng(0).standard_normal((2, 1, 3, 16, 16)).astype(np.float32)
    on_board(randomize_bn(SmallCNN()), xs, (torch.randn(1, 3, 16, 16),))


def test_cond_both_branches():
    xs = np.stack([np.random.default_rng(s).standard_normal(6).astype(np.float32) + off
                   for s, off in enumerate((-2, 2))])
    got = on_board(CondActivation(), xs, (torch.randn(6),))
    assert (got[0][0] > 0).all() and np.abs(got[0][1] - np.maximum(xs[1], 0)).max() == 0


def test_while_loop_both_exits():
    xs = np.stack([np.full(4, s, np.float32) * np.arange(1, 5, dtype=np.float32) for s in (1e-8, 100.0)])
    got = on_board(Newton(), xs, (torch.randn(4),))
    assert got[2].tolist() == [1.0, 100.0]   # converged at once / stopped at the 100-step limit


def test_rnn_and_nested_cond():
    torch.manual_seed(0)
    xs = np.random.default_rng(1).standard_normal((2, 6, 4)).astype(np.float32)
    on_board(RNNLoop(), xs, (torch.randn(6, 4),))
    xs = np.stack([np.full(3, v, np.float32) for v in (-5.0, 7.0)])
    on_board(CondInWhile(), xs, (torch.randn(3),))


def test_other_nestings():
    on_board(Nested(), NESTED_XS, (torch.randn(3),))


def test_loop_overrun_on_board():
    """The firmware prints NAME_invoke's return code (1: a loop past its maximum) and stops."""
    xs = np.full((1, 4), 100.0, np.float32)
    with pytest.raises(eerie_c.EerieError, match="newton_invoke returned 1"):
        eerie_c.run(Newton(), [xs], (torch.randn(4),), board=BOARD, max_iterations=50)


MODELS = [
    ("mlp", lambda: randomize_bn(MLP()), (4, 10), 2),
    ("depthwise_separable", lambda: randomize_bn(DepthwiseSeparable()), (1, 4, 8, 8), 2),
    ("residual", lambda: randomize_bn(Residual()), (1, 6, 6, 6), 2),
    ("early_exit", EarlyExit, (8,), 8),   # 8 inputs: the confident exit and the second stage
    ("attention", Attention, (2, 7, 8), 2),                    # products of computed tensors
    ("transposed_conv", lambda: Up2d(2, 1, 1, True), (1, 3, 5, 5), 2),
]


@pytest.mark.parametrize("name,make,shape,n", MODELS, ids=[m[0] for m in MODELS])
def test_models_on_board(name, make, shape, n):
    torch.manual_seed(3)
    m = make().eval()
    xs = np.random.default_rng(0).standard_normal((n, *shape)).astype(np.float32) * 3
    if name == "early_exit":
        with torch.no_grad():
            taken = {bool(torch.softmax(m.a(torch.tensor(x)), -1).max() > 0.5) for x in xs}
        assert taken == {True, False}
    on_board(m, xs, (torch.randn(shape),))


@pytest.mark.parametrize("which", ["batch", "sequence"])
def test_dynamic_sizes_on_board(which):
    """One firmware, several sizes per boot: the harness reads each inference's sizes."""
    torch.manual_seed(0)
    if which == "batch":
        rng = np.random.default_rng(1)
        infs = [[rng.standard_normal((n, 10)).astype(np.float32)] for n in (1, 5, 8, 0)]
        compare_seq(BatchMLP(), infs, (torch.randn(3, 10),), ({0: Dim("batch", max=8)},), board=BOARD)
    else:
        _, report = compare_seq(SeqModel(), seq_inputs([(1, 3), (3, 12), (2, 7)]), (torch.randn(2, 6, 5),),
                                ({0: Dim("batch", max=3), 1: Dim("seq", min=3, max=12)},), board=BOARD)
        assert report["board"] == BOARD and len(report["instructions_per_inference"]) == 3


def test_bidirectional_two_layer_lstm():
    """nn.LSTM, bidirectional and two layers deep (the reverse direction's flips are
    REVERSE_V2 ops), batch_first: on the board as on the host."""
    from test_rnn_stacked import Recurrent
    torch.manual_seed(3)
    xs = np.random.default_rng(9).standard_normal((2, 1, 5, 8)).astype(np.float32)
    on_board(Recurrent(torch.nn.LSTM, True, 2, True), xs, (torch.randn(1, 5, 8),))
