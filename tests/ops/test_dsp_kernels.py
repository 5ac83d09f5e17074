"""The int8 kernels' DSP-extension variants (SXTB16/SMLAD/SMMULR blocks under EERIE_DSP) vs TFLM.

The C generated for a DSP target (cortex-m4) carries both variants. Host runs build it with
-DEERIE_EMULATE_DSP, which gives the intrinsics plain-C definitions, so the DSP code paths
(im2col columns, 2x2 blocks, odd pixel/channel tails, padded taps, fast requantization) are
checked bit for bit on many shapes quickly; a few shapes also run on the real instructions in
QEMU (mps2-an386, Cortex-M4). The portable branch is what tests/ops/test_conv.py etc. check.
"""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from conftest import random_inputs, tflm_run
from eerie_c import __version__
from eerie_c.api import compile_model, run_model
from eerie_c.emit import render
from eerie_c.emit.c import io_info
from eerie_c.verify.ast_proof import prove_c
from tflite_builder import ACT, PAD, ModelBuilder

from test_conv import conv_model


def emulated_dsp_run(model: bytes, inputs: list[np.ndarray], tmp_path, emulate: bool = True,
                     need_dsp: bool = True) -> list[np.ndarray]:
    """Compile for cortex-m4, build on the host with the DSP variant emulated (or, with
    emulate=False, its portable branch, which reads the DSP variant's weight layout), run."""
    src = tmp_path / "m.tflite"
    src.write_bytes(model)
    res = compile_model(src, target="cortex-m4", name="m")
    assert ("EERIE_DSP)" in res.files["m.c"]) == need_dsp, "DSP variant generated or not as expected"
    work = tmp_path / "build"
    work.mkdir()
    for f, text in res.files.items():
        (work / f).write_text(text)
    g = res.graph
    (work / "host_main.c").write_text(render("host_main.c.j2", name="m", version=__version__,
                                             inputs=io_info(g, g.inputs), outputs=io_info(g, g.outputs)))
    # The DSP branch passes the source proof too (bounded loops, no VLAs...).
    defines = ["-DEERIE_EMULATE_DSP"] if emulate else []
    prove_c(work / "m.c", [work], "m_invoke", defines=defines)
    cmd = ["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-Wvla", "-pedantic", "-O2",
           *defines, "-fsanitize=undefined", "-fno-sanitize-recover=all", "-I.",
           "m.c", "host_main.c", "-o", "m_host", "-lm"]
    subprocess.run(cmd, cwd=work, check=True, capture_output=True)
    n = inputs[0].shape[0]
    (work / "in.bin").write_bytes(b"".join(b"".join(np.ascontiguousarray(a[i]).tobytes()
                                                    for a in inputs) for i in range(n)))
    subprocess.run([str(work / "m_host"), "in.bin", "out.bin"], cwd=work, check=True)
    raw = (work / "out.bin").read_bytes()
    specs = res.report["outputs"]
    per = sum(s["bytes"] for s in specs)
    assert len(raw) == per * n
    outs = [[] for _ in specs]
    for i in range(n):
        pos = i * per
        for k, s in enumerate(specs):
            outs[k].append(np.frombuffer(raw[pos:pos + s["bytes"]], np.int8).reshape(s["shape"]))
            pos += s["bytes"]
    return [np.stack(o) for o in outs]


def check_emulated(tmp_path, model: bytes, shape, n=3, seed=1, emulate=True, need_dsp=True):
    xs = [random_inputs(list(shape), "int8", n, seed=seed)]
    ref = tflm_run(model, xs)
    got = emulated_dsp_run(model, xs, tmp_path, emulate, need_dsp)
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(g, r)


CONV_GEOMETRIES = [
    # in_shape, out_c, kernel, stride, padding, dilation
    ((1, 7, 9, 3), 5, (3, 3), (1, 1), "SAME", (1, 1)),     # K = 27: padded taps, odd out_c
    ((1, 7, 9, 3), 6, (3, 3), (2, 2), "SAME", (1, 1)),
    ((1, 8, 9, 4), 6, (3, 3), (2, 2), "VALID", (1, 1)),
    ((1, 7, 9, 2), 4, (2, 4), (1, 1), "SAME", (1, 1)),     # even kernel: asymmetric padding
    ((1, 10, 11, 3), 4, (3, 3), (1, 1), "SAME", (2, 2)),   # dilation
    ((1, 6, 5, 8), 7, (1, 1), (1, 1), "SAME", (1, 1)),     # pointwise, odd pixels and channels
    ((1, 6, 5, 8), 8, (1, 1), (2, 2), "SAME", (1, 1)),     # strided pointwise
    ((1, 5, 5, 6), 3, (1, 1), (1, 1), "VALID", (1, 1)),    # pointwise with K % 4 != 0
    ((1, 3, 3, 4), 3, (5, 5), (1, 1), "SAME", (1, 1)),     # no interior at all
    ((1, 12, 5, 1), 8, (10, 4), (2, 2), "SAME", (1, 1)),   # kws first layer shape
    ((1, 6, 6, 16), 16, (3, 3), (1, 1), "SAME", (1, 1)),   # K = 144: unrolled inner loop
    ((2, 4, 5, 8), 4, (3, 3), (1, 1), "SAME", (1, 1)),     # batches
]


@pytest.mark.parametrize("geom", CONV_GEOMETRIES, ids=lambda g: f"{g[0]}-o{g[1]}-k{g[2]}-s{g[3]}-{g[4]}-d{g[5]}")
def test_conv_dsp_emulated(tmp_path, geom):
    in_shape, out_c, k, stride, padding, dil = geom
    model = conv_model("int8", in_shape, out_c, k, stride, padding, dil, act="RELU6")
    check_emulated(tmp_path, model, in_shape)


@pytest.mark.parametrize("geom", CONV_GEOMETRIES, ids=lambda g: f"{g[0]}-o{g[1]}-k{g[2]}-s{g[3]}-{g[4]}-d{g[5]}")
def test_conv_portable_branch_of_dsp_build(tmp_path, geom):
    in_shape, out_c, k, stride, padding, dil = geom
    model = conv_model("int8", in_shape, out_c, k, stride, padding, dil, act="RELU")
    check_emulated(tmp_path, model, in_shape, emulate=False)


@pytest.mark.parametrize("act", ["NONE", "RELU"])
@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("in_zp", [-128, 0, 37])
def test_conv_dsp_emulated_quant(tmp_path, act, per_channel, in_zp):
    model = conv_model("int8", (1, 5, 6, 4), 5, (3, 3), (1, 1), "SAME", act=act,
                       per_channel=per_channel, in_zp=in_zp, bias=in_zp != 0)
    check_emulated(tmp_path, model, (1, 5, 6, 4))


def small_conv(k, out_scale, in_c=4, out_c=4, seed=0):
    """A conv whose requantization multiplier in_scale * w_scale / out_scale we choose."""
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    x = mb.input([1, 4, 4, in_c], "int8", scale=0.5, zero_point=3)
    w = mb.const(rng.integers(-127, 128, (out_c, k, k, in_c)), "int8", scale=[0.5] * out_c,
                 zero_point=[0] * out_c, axis=0)
    bias = mb.const(rng.integers(-50, 50, out_c), "int32", scale=[0.25] * out_c,
                    zero_point=[0] * out_c, axis=0)
    y = mb.tensor([1, 4, 4, out_c], "int8", scale=out_scale, zero_point=-2)
    mb.op("CONV_2D", [x, w, bias], [y], "Conv2DOptions", padding=PAD["SAME"], strideH=1, strideW=1,
          dilationHFactor=1, dilationWFactor=1, fusedActivationFunction=ACT["NONE"])
    mb.output(y)
    return mb.build()


@pytest.mark.parametrize("out_scale", [0.1, 0.25, 400.0], ids=["left-shift", "shift-0", "tiny"])
def test_conv_dsp_requant_edge_multipliers(tmp_path, out_scale):
    """Multipliers >= 0.5 (no right shift) keep TFLite's general formula in the DSP variant;
    tiny ones use the fast one. Both stay exact."""
    check_emulated(tmp_path, small_conv(3, out_scale), (1, 4, 4, 4))


def test_fast_requant_conditions():
    from eerie_c.kernels._dsp import fast_requant_ok
    assert fast_requant_ok(np.array([1 << 30]), np.array([-1]), np.array([(1 << 30) - 1]))
    assert not fast_requant_ok(np.array([1 << 30]), np.array([0]), np.array([10]))
    assert not fast_requant_ok(np.array([1 << 30]), np.array([-3]), np.array([1 << 30]))


DW_GEOMETRIES = [
    # in_shape, depth multiplier, kernel, stride, padding, dilation
    ((1, 7, 9, 8), 1, (3, 3), (1, 1), "SAME", (1, 1)),
    ((1, 7, 9, 4), 1, (3, 3), (2, 2), "SAME", (1, 1)),
    ((1, 8, 9, 12), 1, (3, 3), (2, 2), "VALID", (1, 1)),
    ((1, 7, 9, 4), 1, (2, 4), (1, 1), "SAME", (1, 1)),
    ((1, 10, 11, 4), 1, (3, 3), (1, 1), "SAME", (2, 2)),
    ((1, 3, 3, 8), 1, (5, 5), (1, 1), "SAME", (1, 1)),     # no interior at all
    ((1, 6, 6, 8), 1, (3, 3), (1, 1), "VALID", (1, 1)),    # no border at all
    ((2, 5, 4, 16), 1, (3, 3), (1, 1), "SAME", (1, 1)),    # batches
    ((1, 5, 5, 6), 1, (3, 3), (1, 1), "SAME", (1, 1)),     # channels % 4 != 0: portable only
    ((1, 5, 5, 4), 2, (3, 3), (1, 1), "SAME", (1, 1)),     # multiplier 2: portable only
]


def _dw_id(g):
    return f"{g[0]}-m{g[1]}-k{g[2]}-s{g[3]}-{g[4]}-d{g[5]}"


@pytest.mark.parametrize("emulate", [True, False], ids=["dsp", "portable"])
@pytest.mark.parametrize("geom", DW_GEOMETRIES, ids=_dw_id)
def test_depthwise_dsp_emulated(tmp_path, geom, emulate):
    from test_depthwise import dw_model
    in_shape, mult, k, stride, padding, dil = geom
    model = dw_model("int8", in_shape, mult, k, stride, padding, dil, act="RELU6")
    check_emulated(tmp_path, model, in_shape, emulate=emulate, need_dsp=geom[1] == 1 and in_shape[3] % 4 == 0)


@pytest.mark.parametrize("act", ["NONE", "RELU"])
@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("in_zp", [-128, 0, 37])
def test_depthwise_dsp_emulated_quant(tmp_path, act, per_channel, in_zp):
    from test_depthwise import dw_model
    model = dw_model("int8", (1, 5, 6, 8), 1, (3, 3), (1, 1), "SAME", act=act,
                     per_channel=per_channel, in_zp=in_zp, bias=in_zp != 0)
    check_emulated(tmp_path, model, (1, 5, 6, 8))


BOARD_TOOLS = ("arm-none-eabi-gcc", "qemu-system-arm", "make")


@pytest.mark.skipif(any(shutil.which(t) is None for t in BOARD_TOOLS),
                    reason="needs arm-none-eabi-gcc, make and qemu-system-arm")
@pytest.mark.parametrize("geom", [CONV_GEOMETRIES[0], CONV_GEOMETRIES[5], CONV_GEOMETRIES[9]],
                         ids=["k3-K27", "pointwise-odd", "kws-first"])
def test_conv_dsp_on_cortex_m4(tmp_path, geom):
    in_shape, out_c, k, stride, padding, dil = geom
    model = conv_model("int8", in_shape, out_c, k, stride, padding, dil, act="RELU6")
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    xs = [random_inputs(list(in_shape), "int8", 3, seed=2)]
    got, rep = run_model(p, xs, board="mps2-an386")
    assert rep["target"] == "cortex-m4"
    np.testing.assert_array_equal(got[0], tflm_run(model, xs)[0])
