"""The int8 kernels generated for cortex-m55 (Helium/MVE: VMLADAVA dot products, vector
requantization) vs TFLM.

The C generated for cortex-m55 uses MVE intrinsics where the compiler defines
__ARM_FEATURE_MVE and plain-C definitions with the same results elsewhere. Built on the host
(with UBSan), its code paths (direct and im2col columns, K % 16 tails, odd pixel and channel
tails, padded taps, dead and constant channels, in-place 1x1) are checked bit for bit quickly
and the source proof runs over it; the same kinds of cases then run on the real instructions in
QEMU (mps3-an547, Cortex-M55 with MVE).
"""
from __future__ import annotations

import re
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
from test_dsp_kernels import conv_with, dw_chain, pw_chain, pw_expand_chain, small_conv

TARGET = "cortex-m55"


def mve_host_run(model: bytes, inputs: list[np.ndarray], tmp_path, markers: tuple[str, ...]
                 ) -> list[np.ndarray]:
    """Compile for cortex-m55, build that C on the host (plain-C MVE stand-ins, UBSan), run.
    `markers`: C fragments the model file must contain (which kernels were chosen)."""
    src = tmp_path / "m.tflite"
    src.write_bytes(model)
    res = compile_model(src, target=TARGET, name="m", patch="off")   # the kernels, not a patch stage
    text = res.files["m.c"]
    for mark in markers:
        assert mark in text, f"expected {mark!r} in the generated C"
    work = tmp_path / "build"
    work.mkdir()
    for f, body in res.files.items():
        (work / f).write_text(body)
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


def check_host(tmp_path, model: bytes, shape, markers=("_mve_params",), n=3, seed=1):
    xs = [random_inputs(list(shape), "int8", n, seed=seed)]
    ref = tflm_run(model, xs)
    got = mve_host_run(model, xs, tmp_path, markers)
    for a, r in zip(got, ref):
        np.testing.assert_array_equal(a, r)


CONV_GEOMETRIES = [
    # in_shape, out_c, kernel, stride, padding, dilation
    ((1, 7, 9, 3), 5, (3, 3), (1, 1), "SAME", (1, 1)),     # K = 27: tail of 11, odd out_c
    ((1, 7, 9, 3), 6, (3, 3), (2, 2), "SAME", (1, 1)),
    ((1, 8, 9, 4), 6, (3, 3), (2, 2), "VALID", (1, 1)),
    ((1, 7, 9, 2), 4, (2, 4), (1, 1), "SAME", (1, 1)),     # even kernel: asymmetric padding
    ((1, 10, 11, 3), 4, (3, 3), (1, 1), "SAME", (2, 2)),   # dilation
    ((1, 6, 5, 16), 7, (1, 1), (1, 1), "SAME", (1, 1)),    # pointwise, odd pixels and channels
    ((1, 6, 5, 8), 16, (1, 1), (2, 2), "SAME", (1, 1)),    # strided pointwise, K = 8 < 16
    ((1, 5, 5, 20), 3, (1, 1), (1, 1), "VALID", (1, 1)),   # pointwise with K % 16 = 4
    ((1, 3, 3, 4), 3, (5, 5), (1, 1), "SAME", (1, 1)),     # no interior at all
    ((1, 12, 5, 1), 8, (10, 4), (2, 2), "SAME", (1, 1)),   # kws first layer shape
    ((1, 6, 6, 16), 16, (3, 3), (1, 1), "SAME", (1, 1)),   # K = 144
    ((1, 4, 4, 64), 6, (3, 3), (1, 1), "SAME", (1, 1)),    # K = 576: looped chunks + tail 0
    ((1, 3, 4, 52), 5, (3, 3), (1, 1), "VALID", (1, 1)),   # K = 468: looped chunks + tail
    ((2, 4, 5, 8), 4, (3, 3), (1, 1), "SAME", (1, 1)),     # batches
]


def _conv_id(g):
    return f"{g[0]}-o{g[1]}-k{g[2]}-s{g[3]}-{g[4]}-d{g[5]}"


@pytest.mark.parametrize("geom", CONV_GEOMETRIES, ids=_conv_id)
def test_conv_mve_host(tmp_path, geom):
    in_shape, out_c, k, stride, padding, dil = geom
    model = conv_model("int8", in_shape, out_c, k, stride, padding, dil, act="RELU6")
    check_host(tmp_path, model, in_shape)


@pytest.mark.parametrize("act,per_channel,in_zp", [("NONE", True, -128), ("RELU", False, 37),
                                                   ("RELU", True, 0)])
def test_conv_mve_host_quant(tmp_path, act, per_channel, in_zp):
    model = conv_model("int8", (1, 5, 6, 4), 5, (3, 3), (1, 1), "SAME", act=act,
                       per_channel=per_channel, in_zp=in_zp, bias=in_zp != 0)
    check_host(tmp_path, model, (1, 5, 6, 4))


@pytest.mark.parametrize("out_scale", [0.1, 0.25, 400.0], ids=["left-shift", "shift-0", "tiny"])
def test_conv_mve_requant_edge_multipliers(tmp_path, out_scale):
    """Multipliers >= 0.5 (no right shift) are outside the fast requantization's proof: those
    layers keep the DSP kernel (general formula); tiny ones use the MVE kernel. Both exact."""
    markers = ("_mve_params",) if out_scale == 400.0 else ()
    check_host(tmp_path, small_conv(3, out_scale), (1, 4, 4, 4), markers)


@pytest.mark.parametrize("k,in_c", [(1, 8), (3, 8)], ids=["pointwise", "3x3"])
def test_conv_mve_dead_and_tiny_channels(tmp_path, k, in_c):
    scales = [0.5, 1e-30, 1e-9, 0.25, 1e-7, 0.5]
    check_host(tmp_path, small_conv(k, 4.0, in_c=in_c, out_c=6, w_scales=scales), (1, 4, 4, in_c))


@pytest.mark.parametrize("op,k", [("CONV_2D", 1), ("CONV_2D", 3), ("DEPTHWISE_CONV_2D", 3)])
def test_mve_constant_channels(tmp_path, op, k):
    """All-zero weights with a bias near 2^30 (as in vww_96_int8): constant outputs from the
    requantization constants."""
    rng = np.random.default_rng(5)
    scales = [0.004, 0.002, 0.003, 0.004, 0.001, 0.002, 0.003, 0.004]
    if op == "CONV_2D":
        wts = rng.integers(-127, 128, (8, k, k, 8))
        wts[[1, 4]] = 0
    else:
        wts = rng.integers(-127, 128, (1, k, k, 8))
        wts[..., [1, 4]] = 0
    bias = rng.integers(-3000, 3000, 8)
    bias[1], bias[4] = 2 ** 30, -2 ** 30 + 128
    marker = "_mve_params"
    check_host(tmp_path, conv_with(wts, bias, scales, op), (1, 5, 5, 8), (marker,))


@pytest.mark.parametrize("batches,depth,units,per_channel", [(1, 64, 12, False), (2, 37, 11, True),
                                                             (1, 8, 1, False), (3, 640, 130, True),
                                                             (1, 256, 2, False)])
def test_fc_mve_host(tmp_path, batches, depth, units, per_channel):
    from test_fully_connected import fc_model
    model = fc_model("int8", batches, depth, units, "RELU", per_channel=per_channel)
    check_host(tmp_path, model, (batches, depth))


@pytest.mark.parametrize("act", ["NONE", "RELU6", "RELU_N1_TO_1"])
def test_fc_mve_activations(tmp_path, act):
    from test_fully_connected import fc_model
    model = fc_model("int8", 1, 20, 7, act, per_channel=True, bias=False)
    check_host(tmp_path, model, (1, 20))


@pytest.mark.parametrize("residual", [False, True])
def test_mve_inplace_pointwise(tmp_path, residual):
    """1x1 convs with out_c <= in_c run in place exactly when the planner's rule allows."""
    model = pw_chain(residual)
    (tmp_path / "c.tflite").write_bytes(model)
    rep = compile_model(tmp_path / "c.tflite", target=TARGET, name="c", patch="off").report
    convs = [o for o in rep["ops"] if o["kind"] == "CONV_2D"]
    same = [o["inputs"][0]["storage"] == "arena" == o["outputs"][0]["storage"]
            and o["inputs"][0]["offset"] == o["outputs"][0]["offset"] for o in convs]
    if not residual:
        assert same == [False, True, False]
    check_host(tmp_path, model, (1, 6, 5, 4))


@pytest.mark.parametrize("kw", [dict(), dict(batches=2, hw=(3, 5)), dict(stride=2)],
                         ids=["6x5", "batches-odd-pixels", "stride2-not-in-place"])
def test_mve_inplace_pointwise_expanding(tmp_path, kw):
    """Widening stride-1 1x1 convs copy their input pixels in and declare the "end" layout;
    where the planner uses it, the input sits at the output's tail. Bit-exact."""
    model, shape = pw_expand_chain(**kw)
    (tmp_path / "c.tflite").write_bytes(model)
    res = compile_model(tmp_path / "c.tflite", target=TARGET, name="c", patch="off")
    strided = kw.get("stride", 1) > 1
    declared = [op.attrs.get("inplace_of_input") for op in res.graph.ops if op.kind == "CONV_2D"]
    # strided: "start" where each pixel's output ends before the next one's input pixel
    # (_conv_rules.pointwise_inplace, main's rule for ResNet's stride-2 shortcut)
    assert declared == [False, "end", "start" if strided else "end", "start"]
    plan = res.extra["plan"]
    for o in res.report["ops"]:
        if o["kind"] == "CONV_2D" and o["step"] in plan.tail_inplace:
            i, y = o["inputs"][0], o["outputs"][0]
            assert i["offset"] + i["bytes"] == y["offset"] + y["bytes"] and i["bytes"] < y["bytes"]
    convs = [o["step"] for o in res.report["ops"] if o["kind"] == "CONV_2D"]
    # the strided layer declares no "end" layout, so it never gets one (the planner may still
    # put the stride-1 widening layer before it at its output's tail)
    assert plan.tail_inplace if not strided else convs[2] not in plan.tail_inplace
    check_host(tmp_path, model, shape)


DW_GEOMETRIES = [
    # in_shape, depth multiplier, kernel, stride, padding, dilation
    ((1, 7, 9, 8), 1, (3, 3), (1, 1), "SAME", (1, 1)),     # 4-pixel blocks + a 1-pixel tail
    ((1, 7, 9, 20), 1, (3, 3), (2, 2), "SAME", (1, 1)),    # C % 16 = 4: word-copy tail groups
    ((1, 8, 9, 12), 1, (3, 3), (2, 2), "VALID", (1, 1)),
    ((1, 7, 9, 4), 1, (2, 4), (1, 1), "SAME", (1, 1)),     # even kernel: asymmetric padding
    ((1, 10, 11, 4), 1, (3, 3), (1, 1), "SAME", (2, 2)),   # dilation: ring of 5 rows
    ((1, 3, 3, 8), 1, (5, 5), (1, 1), "SAME", (1, 1)),     # no interior at all
    ((2, 5, 4, 36), 1, (3, 3), (1, 1), "SAME", (1, 1)),    # batches, 2 x 16 channels + 4
    ((1, 5, 5, 6), 1, (3, 3), (1, 1), "SAME", (1, 1)),     # channels % 4 != 0: not MVE
    ((1, 5, 5, 4), 2, (3, 3), (1, 1), "SAME", (1, 1)),     # multiplier 2: not MVE
]


@pytest.mark.parametrize("geom", DW_GEOMETRIES,
                         ids=lambda g: f"{g[0]}-m{g[1]}-k{g[2]}-s{g[3]}-{g[4]}-d{g[5]}")
def test_depthwise_mve_host(tmp_path, geom):
    from test_depthwise import dw_model
    in_shape, mult, k, stride, padding, dil = geom
    model = dw_model("int8", in_shape, mult, k, stride, padding, dil, act="RELU6")
    mve = mult == 1 and in_shape[3] % 4 == 0
    check_host(tmp_path, model, in_shape, ("_mve_params",) if mve else ())


@pytest.mark.parametrize("per_channel,in_zp", [(True, -128), (False, 37)])
def test_depthwise_mve_host_quant(tmp_path, per_channel, in_zp):
    from test_depthwise import dw_model
    model = dw_model("int8", (1, 5, 6, 8), 1, (3, 3), (1, 1), "SAME", act="NONE",
                     per_channel=per_channel, in_zp=in_zp, bias=in_zp != 0)
    check_host(tmp_path, model, (1, 5, 6, 8))


@pytest.mark.parametrize("kw", [dict(), dict(k=(5, 5)), dict(dil=(2, 2), batches=2)],
                         ids=["3x3", "5x5", "dilated-batches"])
def test_mve_inplace_depthwise(tmp_path, kw):
    """Stride-1 depthwise runs in place through its ring of padded input rows."""
    model, shape = dw_chain(**kw)
    (tmp_path / "c.tflite").write_bytes(model)
    rep = compile_model(tmp_path / "c.tflite", target=TARGET, name="c", patch="off").report
    dw = next(o for o in rep["ops"] if o["kind"] == "DEPTHWISE_CONV_2D")
    assert dw["inputs"][0]["offset"] == dw["outputs"][0]["offset"] and dw["scratch_bytes"] > 0
    check_host(tmp_path, model, shape)




@pytest.mark.usefixtures("board_tools")   # fails (never skips) without the tools
@pytest.mark.parametrize("case", ["k3-K27-odd", "pointwise-odd", "pointwise-K8", "kws-first",
                                  "K576-looped", "dead", "fc", "fc-640", "inplace", "dw",
                                  "dw-s2-c20", "dw-c36", "inplace-dw", "inplace-end", "K1035"])
def test_mve_kernels_on_cortex_m55(tmp_path, case):
    """The same kernels on the real MVE instructions (QEMU mps3-an547, Cortex-M55)."""
    from test_fully_connected import fc_model
    geoms = {"k3-K27-odd": CONV_GEOMETRIES[0], "pointwise-odd": CONV_GEOMETRIES[5],
             "pointwise-K8": CONV_GEOMETRIES[6], "kws-first": CONV_GEOMETRIES[9],
             "K576-looped": CONV_GEOMETRIES[12],
             "K1035": ((1, 3, 4, 115), 5, (3, 3), (1, 1), "SAME", (1, 1))}
    if case in geoms:
        in_shape, out_c, k, stride, padding, dil = geoms[case]
        model = conv_model("int8", in_shape, out_c, k, stride, padding, dil, act="RELU6")
    elif case == "dead":
        in_shape = (1, 4, 4, 8)
        model = small_conv(3, 4.0, in_c=8, out_c=6, w_scales=[0.5, 1e-30, 1e-9, 0.25, 1e-7, 0.5])
    elif case in ("dw", "dw-s2-c20", "dw-c36"):
        from test_depthwise import dw_model
        in_shape, mult, k, stride, padding, dil = DW_GEOMETRIES[{"dw": 0, "dw-s2-c20": 1, "dw-c36": 6}[case]]
        model = dw_model("int8", in_shape, mult, k, stride, padding, dil, act="RELU6")
    elif case == "inplace-dw":
        model, in_shape = dw_chain(batches=2, k=(5, 5))
    elif case == "inplace-end":
        model, in_shape = pw_expand_chain(batches=2, hw=(3, 5))
    elif case == "fc":
        in_shape = (2, 37)
        model = fc_model("int8", 2, 37, 11, "RELU", per_channel=True)
    elif case == "fc-640":
        in_shape = (1, 640)
        model = fc_model("int8", 1, 640, 130, "NONE", per_channel=False)
    else:
        in_shape = (1, 6, 5, 4)
        model = pw_chain(False)
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    xs = [random_inputs(list(in_shape), "int8", 3, seed=2)]
    got, rep = run_model(p, xs, board="mps3-an547")
    assert rep["target"] == TARGET
    np.testing.assert_array_equal(got[0], tflm_run(model, xs)[0])


@pytest.mark.parametrize("in_c,mve", [(115, True), (116, False)], ids=["K1035-unrolled", "K1044-dsp"])
def test_conv_mve_longest_unrolled_block(tmp_path, in_c, mve):
    """The 2x4 block's chunks are unrolled up to _mve_asm.MAX_CHUNKS (64 full chunks: K < 1040);
    a longer K keeps the DSP kernel. Both bit-exact."""
    model = conv_model("int8", (1, 3, 4, in_c), 5, (3, 3), (1, 1), "SAME", (1, 1), act="RELU6")
    check_host(tmp_path, model, (1, 3, 4, in_c), ("_weights_mve",) if mve else ())
    text = (tmp_path / "build" / "m.c").read_text()
    assert ("vmladava.s8" in text) == mve


LOOP_GEOMETRIES = [
    # in_shape, out_c, kernel, stride, padding, dilation: out_c % 4 == 0, so the whole group
    # loop is one counted asm loop (_mve_asm.conv_loop_asm) over a weights + parameters stream
    ((1, 7, 9, 3), 8, (3, 3), (1, 1), "SAME", (1, 1)),     # K = 27: zero-padded last chunk, odd pixels
    ((1, 7, 9, 3), 12, (3, 3), (2, 2), "SAME", (1, 1)),    # stride 2
    ((1, 8, 9, 4), 8, (3, 3), (2, 2), "VALID", (1, 1)),
    ((1, 10, 11, 3), 4, (3, 3), (1, 1), "SAME", (2, 2)),   # dilation, one group
    ((2, 4, 5, 8), 36, (3, 3), (1, 1), "SAME", (1, 1)),    # batches, K = 72, 9 groups
    ((1, 5, 5, 20), 12, (1, 1), (1, 1), "VALID", (1, 1)),  # pointwise, K % 16 = 4, odd pixels
    ((1, 6, 5, 8), 16, (1, 1), (2, 2), "SAME", (1, 1)),    # strided pointwise, K = 8
    ((1, 3, 3, 4), 4, (5, 5), (1, 1), "SAME", (1, 1)),     # no interior at all
    ((1, 12, 5, 1), 8, (10, 4), (2, 2), "SAME", (1, 1)),   # kws first layer shape
    ((1, 4, 4, 64), 8, (3, 3), (1, 1), "SAME", (1, 1)),    # K = 576: 36 chunks
    ((1, 2, 3, 1020), 4, (1, 1), (1, 1), "SAME", (1, 1)),  # K = 1020: 64 chunks, the most
    # the zero-point-framed input (_mve_asm.padded_image): row dilation, unused input columns
    # (VALID), batches
    ((1, 9, 7, 2), 8, (3, 2), (1, 1), "SAME", (2, 1)),
    ((1, 9, 8, 1), 4, (4, 4), (2, 3), "VALID", (1, 1)),
    ((2, 6, 5, 2), 8, (3, 3), (1, 1), "SAME", (1, 1)),
    # 7x7 taps of 20 channels: more than _mve_asm.MAX_PIECES row pieces, so two column copies
    # and the interleave instead of the direct im2col
    ((1, 8, 8, 20), 4, (7, 7), (1, 1), "SAME", (1, 1)),
]
# how the geometries above gather their columns: a framed copy of the input, bounds-checked
# pieces straight into the interleaved chunks (_mve_asm.im2col_pieces), or neither
FRAMED = {0, 1, 2, 8, 11, 12, 13}
PIECES = {3, 4, 7, 9}


def test_conv_mve_im2col_forms_chosen(tmp_path):
    for i, (in_shape, out_c, k, stride, padding, dil) in enumerate(LOOP_GEOMETRIES):
        p = tmp_path / f"m{i}.tflite"
        p.write_bytes(conv_model("int8", in_shape, out_c, k, stride, padding, dil))
        text = compile_model(p, target=TARGET, name="m").files["m.c"]
        assert ("framed by its zero point" in text) == (i in FRAMED), LOOP_GEOMETRIES[i]
        assert ("straight into the interleaved chunks" in text) == (i in PIECES), LOOP_GEOMETRIES[i]
        assert ("scratch: the two columns" in text) == (i == 14), LOOP_GEOMETRIES[i]


@pytest.mark.parametrize("geom", LOOP_GEOMETRIES, ids=_conv_id)
def test_conv_mve_group_loop_host(tmp_path, geom):
    """The group loop's plain-C twin (host, UBSan) and the source proof over it."""
    in_shape, out_c, k, stride, padding, dil = geom
    model = conv_model("int8", in_shape, out_c, k, stride, padding, dil, act="RELU6")
    check_host(tmp_path, model, in_shape, ("_weights_mve_params",))


@pytest.mark.usefixtures("board_tools")   # fails (never skips) without the tools
@pytest.mark.parametrize("geom", LOOP_GEOMETRIES, ids=_conv_id)
def test_conv_mve_group_loop_on_cortex_m55(tmp_path, geom):
    """The group loop's assembly in QEMU (mps3-an547), bit-exact with TFLM."""
    in_shape, out_c, k, stride, padding, dil = geom
    model = conv_model("int8", in_shape, out_c, k, stride, padding, dil, act="RELU",
                       in_zp=7, seed=3)
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    assert "_weights_mve_params" in compile_model(p, target=TARGET, name="m").files["m.c"]
    xs = [random_inputs(list(in_shape), "int8", 2, seed=4)]
    got, rep = run_model(p, xs, board="mps3-an547")
    assert rep["target"] == TARGET
    np.testing.assert_array_equal(got[0], tflm_run(model, xs)[0])


@pytest.mark.usefixtures("board_tools")   # fails (never skips) without the tools
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_conv_mve_group_loop_compiles_at_any_optimisation(tmp_path, opt):
    """At -O0 gcc 12 finds no registers for the group loop's operands ("impossible
    constraints"): the kernel takes its plain-C twin there (#if __OPTIMIZE__)."""
    model = conv_model("int8", (1, 7, 9, 3), 8, (3, 3), (1, 1), "SAME", act="RELU6")
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    files = compile_model(p, target=TARGET, name="m").files
    for f, body in files.items():
        (tmp_path / f).write_text(body)
    cmd = ["arm-none-eabi-gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-Wvla", "-pedantic", opt,
           "-mcpu=cortex-m55", "-mthumb", "-mfloat-abi=hard", "-mfpu=auto", "-I.", "-c", "m.c",
           "-o", "m.o"]
    subprocess.run(cmd, cwd=tmp_path, check=True, capture_output=True)
    dis = subprocess.run(["arm-none-eabi-objdump", "-d", "-marmv8.1-m.main", "m.o"], cwd=tmp_path,
                         check=True, capture_output=True, text=True).stdout
    # the assembly loop (its scatter store of pixel q's bytes) only where gcc optimises
    assert bool(re.search(r"vstrb\.32\s+q1, \[\w+, q\d\]", dis)) == (opt != "-O0")
