"""The int8 CONV_2D and FULLY_CONNECTED kernels generated for RISC-V targets (the register
blocked GEMM of kernels/_rv.py, helpers/gemm_rv.c.j2) vs TFLM, built on the host.

The C generated for riscv32imac is plain C99, so the host compiles it (with UBSan) and runs it:
every code path (odd output channels past the 4-channel blocks, odd pixel or batch counts
taking the one-row kernel, odd K for the 2-tap unrolled loop, im2col with padded taps, strides,
dilation, batches > 1, per-tensor and per-channel requantization, input zero points) is
checked bit for bit on many shapes quickly, and the source proof runs over it. The same
kernels run in QEMU on riscv-virt and sifive_e in tests/boards/test_riscv_gemm.py.
"""
from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest

from conftest import random_inputs, tflm_run
from eerie_c import __version__
from eerie_c.api import compile_model
from eerie_c.emit import render
from eerie_c.emit.c import io_info
from eerie_c.verify.ast_proof import prove_c

from test_conv import GEOMETRIES, assert_mostly_unsaturated, conv_model, unsaturated_scale
from test_fully_connected import fc_model

TARGET = "riscv32imac"


def rv_target_run(model: bytes, inputs: list[np.ndarray], tmp_path,
                  markers=("eerie_gemm_rv_s8(", "eerie_gemv_rv_s8(")) -> list[np.ndarray]:
    """Compile for a RISC-V target, build that C on the host (with UBSan), run; one of
    `markers` (the RISC-V kernel's calls) must be in the layers' code."""
    src = tmp_path / "m.tflite"
    src.write_bytes(model)
    res = compile_model(src, target=TARGET, name="m", patch="off")   # the kernels, not a patch stage
    layers = res.files["m.c"].split("/* ---- layers ---- */")[1]
    assert any(m in layers for m in markers), f"the RISC-V kernel is used ({markers})"
    work = tmp_path / "build"
    work.mkdir()
    for f, text in res.files.items():
        (work / f).write_text(text)
    g = res.graph
    (work / "host_main.c").write_text(render("host_main.c.j2", name="m", version=__version__,
                                             inputs=io_info(g, g.inputs), outputs=io_info(g, g.outputs)))
    prove_c(work / "m.c", [work], "m_invoke")
    # -O0: UBSan checks the same operations (it instruments them before any optimisation) and
    # gcc builds an unrolled kernel file in a tenth of the time it takes with optimisation on
    cmd = ["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-Wvla", "-pedantic", "-O0",
           "-fsanitize=undefined", "-fno-sanitize-recover=all", "-I.",
           "m.c", "host_main.c", "-o", "m_host", "-lm"]
    subprocess.run(cmd, cwd=work, check=True, capture_output=True)
    n = inputs[0].shape[0]
    (work / "in.bin").write_bytes(b"".join(np.ascontiguousarray(inputs[0][i]).tobytes() for i in range(n)))
    subprocess.run([str(work / "m_host"), "in.bin", "out.bin"], cwd=work, check=True)
    spec = res.report["outputs"][0]
    raw = np.frombuffer((work / "out.bin").read_bytes(), np.int8)
    assert raw.size == spec["bytes"] * n
    return raw.reshape(n, *spec["shape"])


def check_rv(tmp_path, model: bytes, shape, n=3, seed=1, unsaturated=False):
    xs = [random_inputs(list(shape), "int8", n, seed=seed)]
    ref = tflm_run(model, xs)[0]
    if unsaturated:
        assert_mostly_unsaturated(ref)
    np.testing.assert_array_equal(rv_target_run(model, xs, tmp_path), ref)


RV_GEOMETRIES = GEOMETRIES + [
    ((1, 6, 6, 16), 16, (3, 3), (1, 1), "SAME", (1, 1)),   # K = 144, whole blocks
    ((2, 4, 5, 8), 5, (3, 3), (1, 1), "SAME", (1, 1)),     # batches: pixel pairs cross them
    ((3, 3, 3, 5), 6, (1, 1), (1, 1), "VALID", (1, 1)),    # pointwise, batches, odd K
    ((1, 5, 7, 9), 9, (1, 1), (2, 3), "SAME", (1, 1)),     # strided pointwise, odd everything
]


@pytest.mark.parametrize("geom", RV_GEOMETRIES, ids=lambda g: f"{g[0]}-o{g[1]}-k{g[2]}-s{g[3]}-{g[4]}-d{g[5]}")
def test_conv_rv_target(tmp_path, geom):
    in_shape, out_c, k, stride, padding, dil = geom
    terms = k[0] * k[1] * in_shape[3]
    model = conv_model("int8", in_shape, out_c, k, stride, padding, dil, act="NONE",
                       out_scale=unsaturated_scale(terms))
    check_rv(tmp_path, model, in_shape, unsaturated=terms >= 4)


@pytest.mark.parametrize("act", ["RELU", "RELU6"])
@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("in_zp", [-128, 0, 37])
def test_conv_rv_target_quant(tmp_path, act, per_channel, in_zp):
    model = conv_model("int8", (1, 5, 6, 4), 5, (3, 3), (1, 1), "SAME", act=act,
                       per_channel=per_channel, in_zp=in_zp, bias=in_zp != 0,
                       out_scale=unsaturated_scale(36))
    check_rv(tmp_path, model, (1, 5, 6, 4))


@pytest.mark.parametrize("batches,depth,units", [(1, 37, 11), (2, 64, 8), (3, 1, 5), (4, 250, 3),
                                                  (5, 7, 13)])
@pytest.mark.parametrize("per_channel", [True, False])
def test_fc_rv_target(tmp_path, batches, depth, units, per_channel):
    model = fc_model("int8", batches, depth, units, "NONE", per_channel=per_channel)
    check_rv(tmp_path, model, (batches, depth), n=2)


@pytest.mark.parametrize("act", ["RELU", "RELU_N1_TO_1"])
def test_fc_rv_target_act_no_bias(tmp_path, act):
    model = fc_model("int8", 2, 40, 9, act, bias=False, per_channel=True)
    check_rv(tmp_path, model, (2, 40), n=2)


def test_rv_weight_layout():
    """The weights are stored [ocp / 4][K][4]: tap j of channel 4 * blk + r at (blk * K + j) * 4 + r."""
    from eerie_c.kernels._rv import BLOCK, gemm_vars

    class Ctx:
        def const(self, data, ctype, hint, comment=""):
            self.last = getattr(self, "last", {})
            self.last[hint] = np.asarray(data)
            return hint

    class Y:
        zero_point, scale, quant = 0, 1.0, None
    ctx = Ctx()
    w = np.arange(5 * 3).reshape(5, 3).astype(np.int8)
    v = gemm_vars(ctx, w, np.arange(5), [1] * 5, [0] * 5, Y(), "NONE", "w")
    flat = ctx.last["weights"].reshape(-1)
    assert v["ocp"] == 8 and BLOCK == 4 and flat.size == 8 * 3
    for c in range(8):
        for j in range(3):
            want = w[c, j] if c < 5 else 0
            assert flat[((c // 4) * 3 + j) * 4 + c % 4] == want


@pytest.mark.parametrize("case", ["identity-3x3", "identity-conv-first-operand", "identity-odd-pixels",
                                  "identity-1x1-per-tensor", "identity-batch2-16ch",
                                  "downsample-hoisted-shortcut", "residual-read-again"])
def test_conv_add_rv_target(tmp_path, case):
    """CONV_2D_ADD (the residual ADD fused into the convolution) with the RISC-V GEMM: the
    ADD runs on each pair of pixels' outputs in scratch, in place over the residual."""
    from test_inplace_conv_add import CASES
    model, shape = CASES[case]()
    src = tmp_path / "c.tflite"
    src.write_bytes(model)
    ops = compile_model(src, target=TARGET, name="c", patch="off").report["ops"]
    assert any(o["kind"] == "CONV_2D_ADD" for o in ops), "the ADD is fused"
    check_rv(tmp_path, model, shape, n=3, seed=5)


def _uses_fast_requant(model: bytes, tmp_path) -> bool:
    src = tmp_path / "f.tflite"
    src.write_bytes(model)
    text = compile_model(src, target=TARGET, name="f").files["f.c"]
    return re.search(r"\w_radd\b", text) is not None   # the fast path's rounding constants


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("out_scale,fast", [(0.1, False), (0.25, False), (400.0, True), (2.0, True)],
                         ids=["left-shift", "shift-0", "tiny", "right-shift"])
def test_conv_rv_requant_paths(tmp_path, k, out_scale, fast):
    """Multipliers >= 0.5 (no right shift) keep TFLite's general formula; right shifts take
    the fast one (a mul and a mulh). Both bit-exact."""
    from test_dsp_kernels import small_conv
    model = small_conv(k, out_scale, in_c=5, out_c=6)
    assert _uses_fast_requant(model, tmp_path) == fast
    check_rv(tmp_path, model, (1, 4, 4, 5))


@pytest.mark.parametrize("k", [1, 3])
def test_conv_rv_dead_and_constant_channels(tmp_path, k):
    """Channels with multiplier 0 or a shift past every accumulator, and all-zero weights with a
    bias near 2^30 (as in vww_96_int8): zeroed at compile time, so the layer keeps the fast
    requantization, and their outputs come from its constants."""
    from test_dsp_kernels import conv_with
    rng = np.random.default_rng(5)
    scales = [0.004, 0.002, 1e-30, 0.004, 0.001, 1e-9, 0.003, 0.004]
    wts = rng.integers(-127, 128, (8, k, k, 8))
    wts[[1, 4]] = 0
    bias = rng.integers(-3000, 3000, 8)
    bias[1], bias[4], bias[5] = 2 ** 30, -2 ** 30 + 128, 2 ** 29
    model = conv_with(wts, bias, scales)
    assert _uses_fast_requant(model, tmp_path)
    check_rv(tmp_path, model, (1, 5, 5, 8))
