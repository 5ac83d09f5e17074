"""The DSP CONV_2D's im2col columns built straight from the input (kernels/_conv_cols.py,
conv2d_s8_dsp.c.j2's `build`): weights permuted so that each contiguous run of taps gives
whole words first and the left-over taps are gathered byte by byte; windows inside the image
read the input, the others a zero-point-framed copy (small inputs) or the staged window.

vs TFLM on shapes that reach each path: in channels 1/2/3/4/8, kernel rows whose bytes are
and are not a multiple of 4 (left-over groups of 1 to 4 taps, none at all), horizontal
dilation (runs of one pixel), framed and staged borders, layers with no border and with no
interior, strides, SAME and VALID, odd and even and single output channels, batches > 1,
ReLU / ReLU6, per-tensor and per-channel. On the host (plain C, UBSan, the source proof) and
in QEMU on the M4 (mps2-an386) and the M7 (mps2-an500), default and --optimize speed."""
from __future__ import annotations

import pytest

from eerie_c.api import compile_model
from eerie_c.kernels._conv_cols import tap_order
from eerie_c.kernels.window import conv_window
from test_conv import conv_model
from test_conv_pair_dsp import _speed
from test_dsp_kernels import check_dsp_board, check_dsp_target

# in_shape, out_c, kernel, stride, padding, dilation, act, per_channel, expected path
SHAPES = {
    "c1-k10x4-s2-frame": ((1, 13, 6, 1), 8, (10, 4), (2, 2), "SAME", (1, 1), "RELU", True, "frame"),
    "c1-k10x4-s2-frame-b2": ((2, 9, 10, 1), 6, (10, 4), (2, 2), "SAME", (1, 1), "NONE", False, "frame"),
    "c3-k3-s2-stage": ((1, 30, 30, 3), 8, (3, 3), (2, 2), "SAME", (1, 1), "RELU6", True, "stage"),
    "c3-k3-s1-stage-odd": ((1, 25, 29, 3), 5, (3, 3), (1, 1), "SAME", (1, 1), "NONE", False, "stage"),
    "c2-k3-valid": ((1, 6, 7, 2), 4, (3, 3), (1, 1), "VALID", (1, 1), "NONE", True, "input"),
    "c4-k3-s2-frame-o1": ((1, 7, 9, 4), 1, (3, 3), (2, 2), "SAME", (1, 1), "RELU", True, "frame"),
    "c8-k3-dil2-frame": ((1, 9, 8, 8), 6, (3, 3), (1, 1), "SAME", (2, 2), "NONE", True, "frame"),
    "c3-k3-dil2-stage-b2": ((2, 28, 28, 3), 7, (3, 3), (2, 1), "SAME", (2, 2), "NONE", True, "stage"),
    "c1-k3x1-valid": ((1, 9, 5, 1), 4, (3, 1), (1, 1), "VALID", (1, 1), "NONE", False, "input"),
    "c16-k2-s2-valid-b3": ((3, 6, 7, 16), 10, (2, 2), (2, 2), "VALID", (1, 1), "NONE", True, "input"),
    "c3-k5x3-no-interior": ((1, 2, 400, 3), 4, (5, 3), (1, 1), "SAME", (1, 1), "NONE", True, "stage"),
}


def _model(case):
    in_shape, out_c, k, stride, padding, dil, act, pc, _ = SHAPES[case]
    return in_shape, conv_model("int8", in_shape, out_c, k, stride, padding, dil, act=act,
                                per_channel=pc, seed=7)


def _path(code: str, case) -> None:
    """The layer took the column path the case is meant to reach."""
    in_shape, _, k, *_, path = SHAPES[case]
    assert "eerie_pack_lo(src[" in code or "= src[" in code or "eerie_read_s8x4(src +" in code
    assert ("zero-point-framed copy" in code) == (path == "frame")
    assert ("int8_t *const stage" in code) == (path == "stage")
    if path == "stage" and in_shape[1] >= k[0]:
        assert "read the input itself" in code


@pytest.mark.parametrize("case", sorted(SHAPES))
def test_cols_host(tmp_path, case):
    in_shape, model = _model(case)
    src = tmp_path / "m.tflite"
    src.write_bytes(model)
    _path(compile_model(src, target="cortex-m4", name="m").files["m.c"], case)
    check_dsp_target(tmp_path, model, in_shape)


@pytest.mark.parametrize("case", ["c1-k10x4-s2-frame", "c3-k3-s2-stage", "c2-k3-valid"])
def test_cols_speed_host(tmp_path, monkeypatch, case):
    in_shape, model = _model(case)
    _speed(monkeypatch)
    check_dsp_target(tmp_path, model, in_shape)


@pytest.mark.parametrize("board", ["mps2-an386", "mps2-an500"])
@pytest.mark.parametrize("case", sorted(SHAPES))
def test_cols_qemu(tmp_path, case, board):
    in_shape, model = _model(case)
    _path(check_dsp_board(tmp_path, model, in_shape, board, seed=13), case)


@pytest.mark.parametrize("case", ["c1-k10x4-s2-frame-b2", "c3-k3-s2-stage"])
def test_cols_speed_qemu(tmp_path, case):
    in_shape, model = _model(case)
    check_dsp_board(tmp_path, model, in_shape, "mps2-an386", seed=17, optimize="speed")


def test_tap_order_is_a_permutation_with_full_words_first():
    """Every tap once; each full word 4 taps contiguous in memory; left-overs after them."""
    class Op:
        attrs = dict(stride_h=2, stride_w=2, padding="SAME", dilation_w_factor=1)

    class T:
        def __init__(self, shape):
            self.shape = shape
            self.size = shape[-1]
    for in_c, kh, kw in [(3, 3, 3), (1, 10, 4), (2, 3, 3), (5, 2, 2)]:
        win = conv_window(Op(), T((1, 12, 12, in_c)), T((8, kh, kw, in_c)), None,
                          T((1, 6, 6, 8)), "t")
        perm, full, groups = tap_order(win, in_c)
        assert sorted(perm) == list(range(kh * kw * in_c))
        row = kw * in_c
        assert all(g[3] - g[0] == 3 and g[0] // row == g[3] // row for g in full)
        assert len(full) == kh * (row // 4) and sum(map(len, groups)) == kh * (row % 4)


# --- the unrolled kernel's requantization (helpers/gemm_dsp.c.j2, EERIE_CP_ASM_MULADD): SMMLAR
# with radd, the rounding term from the sum's sign

def _asm_requant(acc: int, mult: int, rshift: int, radd: int) -> int:
    """What the assembly computes: a = 2 acc; t = radd + (a * mult + 2^31) >> 32 (SMMLAR);
    a = t + (a >> 31); a >> rshift; SSAT #8."""
    a = 2 * acc
    t = radd + ((a * mult + 2 ** 31) >> 32)
    a = t + (-1 if a < 0 else 0)
    return max(-128, min(127, a >> rshift))


def test_unrolled_requant_matches_tflite():
    """Against TFLite's MultiplyByQuantizedMultiplier plus the zero point, on accumulators
    around 0 (where SMMULR's product rounds to 0 for a negative sum) and at random up to
    2^30, for multipliers across [2^30, 2^31), shifts 1..31, zero points folded or not, and
    the constant channels' parameters (multiplier 0, shift 1, radd 2 value + 1, sum 0)."""
    import numpy as np
    from eerie_c.kernels._dsp import fast_requant_values, tflite_requantize
    rng = np.random.default_rng(3)
    checked = 0
    accs = list(range(-300, 301)) + [int(a) for a in rng.integers(-2 ** 30 + 1, 2 ** 30, 400)]
    for _ in range(60):
        mult = int(rng.integers(2 ** 30, 2 ** 31))
        shift = -int(rng.integers(1, 32))
        zp = int(rng.integers(-128, 128))
        m, rs, ra, zp_after = fast_requant_values([mult], [shift], zp, [2 ** 30 - 1])
        if zp_after:   # the zero point not folded: such layers keep the general kernel
            continue
        checked += 1
        for acc in accs:
            want = max(-128, min(127, tflite_requantize(acc, mult, shift) + zp))
            assert _asm_requant(acc, int(m[0]), int(rs[0]), int(ra[0])) == want, (acc, mult, shift, zp)
    assert checked > 20
    for value in (-128, -3, 0, 5, 127):   # a constant channel: its sum is 0
        m, rs, ra, _ = fast_requant_values([0], [-1], 4, [0], {0: value})
        assert _asm_requant(0, int(m[0]), int(rs[0]), int(ra[0])) == value


def _const_dead_model():
    """A 1x1 K = 8 layer through the unrolled kernel (no clamp, even channels) with a dead
    channel (multiplier 0), one shifted past every sum, two all-zero rows with huge biases
    (constant outputs) and tiny multipliers (sums near 0 after the multiply)."""
    import numpy as np
    from tflite_builder import ACT, PAD, ModelBuilder
    rng = np.random.default_rng(9)
    mb = ModelBuilder()
    x = mb.input([2, 5, 3, 8], "int8", scale=0.5, zero_point=3)
    wts = rng.integers(-127, 128, (8, 1, 1, 8))
    wts[[2, 5]] = 0
    scales = [0.004, 1e-30, 0.003, 1e-9, 0.004, 0.002, 2e-5, 0.003]
    bias = rng.integers(-3000, 3000, 8)
    bias[2], bias[5] = 2 ** 30, -2 ** 30 + 128
    w = mb.const(wts, "int8", scale=scales, zero_point=[0] * 8, axis=0)
    b = mb.const(bias, "int32", scale=[0.5 * s for s in scales], zero_point=[0] * 8, axis=0)
    y = mb.tensor([2, 5, 3, 8], "int8", scale=0.5, zero_point=-2)
    mb.op("CONV_2D", [x, w, b], [y], "Conv2DOptions", padding=PAD["SAME"], strideH=1, strideW=1,
          dilationHFactor=1, dilationWFactor=1, fusedActivationFunction=ACT["NONE"])
    mb.output(y)
    return mb.build()


@pytest.mark.parametrize("optimize", ["balanced", "speed"])
@pytest.mark.parametrize("board", ["mps2-an386", "mps2-an500"])
def test_unrolled_constant_and_dead_channels_qemu(tmp_path, board, optimize):
    code = check_dsp_board(tmp_path, _const_dead_model(), (2, 5, 3, 8), board, seed=4,
                           n=4, optimize=optimize)
    assert "eerie_conv_pair_s8_g2" in code
