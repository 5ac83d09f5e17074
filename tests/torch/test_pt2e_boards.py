"""PT2E int8 programs from both quantizers on the boards, in QEMU: the DSP kernels
(mps2-an386, Cortex-M4), Helium (mps3-an547, Cortex-M55) and the portable kernels on a
Cortex-M0 (microbit, 16 KiB of RAM). The accuracy contract against the converted program's own
eager run holds on each, the heavy ops run in int8, and NAME_invoke's measured stack stays
within the proven bound."""
import numpy as np
import pytest
import torch

import eerie_c
from conftest import assert_invoke_stack_within_bound
from pt2e import QUANTIZERS, assert_contract, eager, output_step, quantize, random_inputs, smooth_inputs
from zoo import build

pytest.importorskip("torchao", reason="PT2E tests need torchao (pip install torchao==0.18.0)")
pytestmark = pytest.mark.usefixtures("board_tools")

BOARDS = ("mps2-an386", "mps3-an547", "microbit")


@pytest.mark.parametrize("qname", QUANTIZERS)
@pytest.mark.parametrize("board", BOARDS)
def test_ds_cnn_on_board(board, qname):
    m, x = build("ds_cnn")
    cm, ex = quantize(m, x, qname)
    xs = np.concatenate([random_inputs(x.shape, 3, 11), smooth_inputs(tuple(x.shape), 3, 12)])
    outs, report = eerie_c.run(cm, [xs], example_args=(ex,), board=board)
    assert report["board"] == board and report["instructions"] > 0
    assert_invoke_stack_within_bound(report)
    q = report["quantization"]
    assert q["float_islands"] == [] and q["int8_ops"] > 0
    kinds = {o["kind"] for o in report["ops"]}
    assert {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"} <= kinds
    exact = assert_contract(outs[0], eager(cm, xs), q["output_steps"][0], classifier=True)
    print(f"{board} {qname}: {exact:.1%} exactly equal, {report['instructions']:,} instructions")


def test_float_island_on_board():
    """A float island (layer_norm, no int8 kernel) between int8 convs on the M4: correct, reported."""
    from test_pt2e import ISLAND_KINDS, WithFloatIsland
    torch.manual_seed(4)
    cm, ex = quantize(WithFloatIsland(), torch.randn(1, 2, 6, 6), "xnnpack")
    xs = random_inputs(ex.shape, 3, 13)
    outs, report = eerie_c.run(cm, [xs], example_args=(ex,), board="mps2-an386")
    assert [i["kinds"] for i in report["quantization"]["float_islands"]] == [ISLAND_KINDS]
    assert_contract(outs[0], eager(cm, xs), report["quantization"]["output_steps"][0])
