"""The fused residual ADD of CONV_2D_ADD on DSP targets with its requantizations as
eerie_requant_fast (kernels/conv_add.fast_add_constants, residual_add_s8.j2 with ra.fast) vs
TFLM: the operand with the larger scale (multiplier exactly 1/2: a multiply-add) being the
convolution's output or the residual, ReLU / ReLU6 / none after the ADD, odd pixel counts,
batches > 1, a downsampling block; on the host (plain C, UBSan, the source proof) and in
QEMU on the M4 (mps2-an386) and the M7 (mps2-an500)."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import random_inputs, tflm_run
from eerie_c.api import compile_model, run_model
from test_dsp_kernels import check_dsp_board, check_dsp_target
from test_inplace_conv_add import Block, downsample_block, identity_block


def residual_larger_block(shape=(2, 5, 3, 8), act="RELU6", seed=4):
    """ADD(x, z) where the residual x has the larger scale (z's multiplier is not 1/2)."""
    b = Block(shape, seed)
    c = shape[3]
    x = b.conv(b.x, c, k=3, scale=0.2, zp=1)
    z = b.conv(b.conv(x, c, k=3), c, k=3, act="NONE", scale=0.07, zp=-6)
    return b.build(b.add(x, z, act, scale=0.15, zp=3)), list(shape)


CASES = {
    "conv-larger-relu6": lambda: identity_block(conv_first=True, act="RELU6"),
    "conv-larger-odd-none": lambda: identity_block(shape=(1, 5, 3, 8), act="NONE", seed=1),
    "residual-larger-batch2": lambda: residual_larger_block(),
    "downsample": lambda: downsample_block(),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fast_add_host(tmp_path, case):
    model, shape = CASES[case]()
    src = tmp_path / "m.tflite"
    src.write_bytes(model)
    code = compile_model(src, target="cortex-m4", name="m").files["m.c"]
    assert "eerie_requant_fast2((int32_t)" in code, "the fast ADD is the one under test"
    check_dsp_target(tmp_path, model, shape)


@pytest.mark.parametrize("board", ["mps2-an386", "mps2-an500"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_fast_add_qemu(tmp_path, case, board):
    model, shape = CASES[case]()
    check_dsp_board(tmp_path, model, shape, board, seed=5)


@pytest.mark.parametrize("board", ["mps2-an386", "mps2-an500"])
@pytest.mark.parametrize("case", ["residual-larger-batch2", "downsample"])
def test_fast_add_wide_weights_qemu(tmp_path, case, board):
    """--optimize speed (sign-extended convolution weights) under the fused ADD."""
    model, shape = CASES[case]()
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    xs = [random_inputs(shape, "int8", 2, seed=6)]
    got, rep = run_model(p, xs, board=board, optimize="speed", out_dir=tmp_path / "fw", name="m")
    assert "eerie_conv_pair_s8w(ca" in (tmp_path / "fw" / "m.c").read_text()
    np.testing.assert_array_equal(got[0], tflm_run(model, xs)[0])
