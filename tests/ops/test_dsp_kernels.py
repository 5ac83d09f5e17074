"""The int8 kernels generated for DSP targets (SXTB16/SMLAD/SMMULR building blocks) vs TFLM.

The C generated for cortex-m4 uses the DSP instructions where the compiler defines
__ARM_FEATURE_DSP and plain-C definitions with the same results elsewhere. Built on the host,
its code paths (im2col columns, 2x2 blocks, odd pixel/channel tails, padded taps, fast and
general requantization, dead and constant channels) are checked bit for bit on many shapes
quickly, and the source proof runs over it; a few shapes also run on the real instructions
in QEMU (mps2-an386, Cortex-M4). The portable kernels are what tests/ops/test_conv.py etc.
check (host target).
"""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

from conftest import random_inputs, tflm_run
from eerie_c import __version__
from eerie_c.api import compile_model, run_model
from eerie_c.emit import render
from eerie_c.emit.c import io_info
from eerie_c.plan import plan_memory, prove_plan
from eerie_c.verify.ast_proof import prove_c
from tflite_builder import ACT, PAD, ModelBuilder

from test_conv import conv_model


def dsp_target_run(model: bytes, inputs: list[np.ndarray], tmp_path, need_dsp: bool = True
                   ) -> list[np.ndarray]:
    """Compile for cortex-m4, build that C on the host (with UBSan), run."""
    src = tmp_path / "m.tflite"
    src.write_bytes(model)
    res = compile_model(src, target="cortex-m4", name="m", patch="off")   # the kernels, not a patch stage
    assert ("eerie_sxtb16" in res.files["m.c"]) == need_dsp, "DSP kernel generated or not as expected"
    work = tmp_path / "build"
    work.mkdir()
    for f, text in res.files.items():
        (work / f).write_text(text)
    g = res.graph
    (work / "host_main.c").write_text(render("host_main.c.j2", name="m", version=__version__,
                                             inputs=io_info(g, g.inputs), outputs=io_info(g, g.outputs)))
    # what the pipeline proves for every compile, checked here on purpose
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


def check_dsp_target(tmp_path, model: bytes, shape, n=3, seed=1, need_dsp=True):
    xs = [random_inputs(list(shape), "int8", n, seed=seed)]
    ref = tflm_run(model, xs)
    got = dsp_target_run(model, xs, tmp_path, need_dsp)
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(g, r)



DSP_BOARDS = {"mps2-an386": "cortex-m4", "mps2-an500": "cortex-m7"}   # board -> its DSP target


def check_dsp_board(tmp_path, model: bytes, shape, board: str, seed: int, n: int = 2, **kw) -> str:
    """`model` on a DSP board in QEMU (kw: run_model's, e.g. optimize): the board's core, and
    outputs bit-exact with TFLM on n random records. Returns the generated m.c, for the
    caller's check of which kernel ran."""
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    xs = [random_inputs(list(shape), "int8", n, seed=seed)]
    got, rep = run_model(p, xs, board=board, out_dir=tmp_path / "fw", name="m", **kw)
    assert rep["target"] == DSP_BOARDS[board]
    np.testing.assert_array_equal(got[0], tflm_run(model, xs)[0])
    return (tmp_path / "fw" / "m.c").read_text()

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
def test_conv_dsp_target(tmp_path, geom):
    in_shape, out_c, k, stride, padding, dil = geom
    model = conv_model("int8", in_shape, out_c, k, stride, padding, dil, act="RELU6")
    check_dsp_target(tmp_path, model, in_shape)


@pytest.mark.parametrize("act", ["NONE", "RELU"])
@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("in_zp", [-128, 0, 37])
def test_conv_dsp_target_quant(tmp_path, act, per_channel, in_zp):
    model = conv_model("int8", (1, 5, 6, 4), 5, (3, 3), (1, 1), "SAME", act=act,
                       per_channel=per_channel, in_zp=in_zp, bias=in_zp != 0)
    check_dsp_target(tmp_path, model, (1, 5, 6, 4))


def small_conv(k, out_scale, in_c=4, out_c=4, seed=0, w_scales=None):
    """A conv whose requantization multiplier in_scale * w_scale / out_scale we choose."""
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    x = mb.input([1, 4, 4, in_c], "int8", scale=0.5, zero_point=3)
    w = mb.const(rng.integers(-127, 128, (out_c, k, k, in_c)), "int8",
                 scale=list(w_scales) if w_scales is not None else [0.5] * out_c,
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
    check_dsp_target(tmp_path, small_conv(3, out_scale), (1, 4, 4, 4))


@pytest.mark.parametrize("k,in_c", [(1, 8), (3, 8)], ids=["inline", "shared"])
def test_conv_dsp_dead_and_tiny_channels(tmp_path, k, in_c):
    """Channels with multiplier 0 (scale underflow) or a right shift past every possible
    accumulator (as in vww_96_int8) take the fast path as constant zero-point outputs."""
    scales = [0.5, 1e-30, 1e-9, 0.25, 1e-7, 0.5]
    check_dsp_target(tmp_path, small_conv(k, 0.5, in_c=in_c, out_c=6, w_scales=scales), (1, 4, 4, in_c))


def conv_with(weights, bias, wscales, op="CONV_2D", in_c=8):
    """A 5x5 SAME conv/depthwise with the given weights, int32 bias and weight scales."""
    mb = ModelBuilder()
    n = len(wscales)
    x = mb.input([1, 5, 5, in_c], "int8", scale=0.5, zero_point=3)
    axis = 0 if op == "CONV_2D" else 3
    w = mb.const(weights, "int8", scale=wscales, zero_point=[0] * n, axis=axis)
    b = mb.const(bias, "int32", scale=[0.5 * s_ for s_ in wscales], zero_point=[0] * n, axis=0)
    y = mb.tensor([1, 5, 5, n], "int8", scale=0.5, zero_point=-2)
    if op == "CONV_2D":
        mb.op(op, [x, w, b], [y], "Conv2DOptions", padding=PAD["SAME"], strideH=1, strideW=1,
              dilationHFactor=1, dilationWFactor=1, fusedActivationFunction=ACT["RELU"])
    else:
        mb.op(op, [x, w, b], [y], "DepthwiseConv2DOptions", padding=PAD["SAME"], strideH=1,
              strideW=1, dilationHFactor=1, dilationWFactor=1, depthMultiplier=1,
              fusedActivationFunction=ACT["RELU"])
    mb.output(y)
    return mb.build()


@pytest.mark.parametrize("op,k", [("CONV_2D", 1), ("CONV_2D", 3), ("DEPTHWISE_CONV_2D", 3)])
def test_dsp_constant_channels(tmp_path, op, k):
    """All-zero weights with a bias near 2^30 (as in vww_96_int8): constant outputs, which
    the DSP variants produce from their requantization constants."""
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
    model = conv_with(wts, bias, scales, op)
    (tmp_path / "c.tflite").write_bytes(model)
    text = compile_model(tmp_path / "c.tflite", target="cortex-m4", name="c").files["c.c"]
    assert "eerie_requantize(" not in text.split("/* ---- layers ---- */")[1]   # fast path taken
    check_dsp_target(tmp_path, model, (1, 5, 5, 8))


def test_depthwise_dsp_dead_channels(tmp_path):
    from test_depthwise import dw_model  # noqa: F401  (same builder conventions)
    rng = np.random.default_rng(3)
    mb = ModelBuilder()
    x = mb.input([1, 5, 5, 8], "int8", scale=0.5, zero_point=3)
    scales = [0.5, 1e-30, 1e-9, 0.25, 1e-7, 0.5, 0.01, 1e-12]
    w = mb.const(rng.integers(-127, 128, (1, 3, 3, 8)), "int8", scale=scales, zero_point=[0] * 8, axis=3)
    b = mb.const(rng.integers(-2**28, 2**28, 8), "int32", scale=[0.25 * s_ for s_ in scales],
                 zero_point=[0] * 8, axis=0)
    y = mb.tensor([1, 5, 5, 8], "int8", scale=0.5, zero_point=-2)
    mb.op("DEPTHWISE_CONV_2D", [x, w, b], [y], "DepthwiseConv2DOptions", padding=PAD["SAME"],
          strideH=1, strideW=1, dilationHFactor=1, dilationWFactor=1, depthMultiplier=1,
          fusedActivationFunction=ACT["NONE"])
    mb.output(y)
    model = mb.build()
    check_dsp_target(tmp_path, model, (1, 5, 5, 8))


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


@pytest.mark.parametrize("geom", DW_GEOMETRIES, ids=_dw_id)
def test_depthwise_dsp_target(tmp_path, geom):
    from test_depthwise import dw_model
    in_shape, mult, k, stride, padding, dil = geom
    model = dw_model("int8", in_shape, mult, k, stride, padding, dil, act="RELU6")
    check_dsp_target(tmp_path, model, in_shape, need_dsp=geom[1] == 1 and in_shape[3] % 4 == 0)


@pytest.mark.parametrize("act", ["NONE", "RELU"])
@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("in_zp", [-128, 0, 37])
def test_depthwise_dsp_target_quant(tmp_path, act, per_channel, in_zp):
    from test_depthwise import dw_model
    model = dw_model("int8", (1, 5, 6, 8), 1, (3, 3), (1, 1), "SAME", act=act,
                     per_channel=per_channel, in_zp=in_zp, bias=in_zp != 0)
    check_dsp_target(tmp_path, model, (1, 5, 6, 8))


@pytest.mark.parametrize("batches,depth,units", [(1, 64, 12), (2, 37, 11), (1, 8, 1), (3, 640, 130)])
@pytest.mark.parametrize("per_channel", [False, True])
def test_fc_dsp_target(tmp_path, batches, depth, units, per_channel):
    from test_fully_connected import fc_model
    model = fc_model("int8", batches, depth, units, "RELU", per_channel=per_channel)
    check_dsp_target(tmp_path, model, (batches, depth))


@pytest.mark.parametrize("act", ["NONE", "RELU6", "RELU_N1_TO_1"])
def test_fc_dsp_target_activations(tmp_path, act):
    from test_fully_connected import fc_model
    model = fc_model("int8", 1, 20, 7, act, per_channel=True, bias=False)
    check_dsp_target(tmp_path, model, (1, 20))


def pw_chain(residual: bool):
    """3x3 conv -> 1x1 conv (8 -> 8) -> 1x1 conv (8 -> 6), optionally adding the 3x3 conv's
    output to the first 1x1 conv's (so that 1x1 conv's input is read later)."""
    rng = np.random.default_rng(11)
    mb = ModelBuilder()
    x = mb.input([1, 6, 5, 4], "int8", scale=0.05, zero_point=-3)

    def conv(inp, cin, cout, k, out_scale):
        w = mb.const(rng.integers(-127, 128, (cout, k, k, cin)), "int8",
                     scale=list(rng.uniform(0.002, 0.02, cout)), zero_point=[0] * cout, axis=0)
        y = mb.tensor([1, 6, 5, cout], "int8", scale=out_scale, zero_point=2)
        mb.op("CONV_2D", [inp, w, -1], [y], "Conv2DOptions", padding=PAD["SAME"], strideH=1,
              strideW=1, dilationHFactor=1, dilationWFactor=1, fusedActivationFunction=ACT["NONE"])
        return y

    t = conv(x, 4, 8, 3, 0.2)
    u = conv(t, 8, 8, 1, 0.3)
    if residual:
        s = mb.tensor([1, 6, 5, 8], "int8", scale=0.4, zero_point=1)
        mb.op("ADD", [u, t], [s], "AddOptions", fusedActivationFunction=ACT["NONE"])
        u = s
    v = conv(u, 8, 6, 1, 0.3)
    mb.output(v)
    return mb.build()


@pytest.mark.parametrize("residual", [False, True])
def test_inplace_pointwise(tmp_path, residual):
    """The 1x1 convs run in place (output at the input's offset) exactly when the rule allows:
    never while a later op still reads the input. Outputs stay bit-exact and the proof holds."""
    model = pw_chain(residual)
    (tmp_path / "c.tflite").write_bytes(model)
    rep = compile_model(tmp_path / "c.tflite", target="cortex-m4", name="c", patch="off").report
    # with the residual, the ADD is fused into the 1x1 conv (CONV_2D_ADD, residual = its own
    # input, read through two operands: not in place either)
    convs = [o for o in rep["ops"] if o["kind"] in ("CONV_2D", "CONV_2D_ADD")]
    same = [o["inputs"][0]["storage"] == "arena" == o["outputs"][0]["storage"]
            and o["inputs"][0]["offset"] == o["outputs"][0]["offset"] for o in convs]
    assert same == [False, not residual, False]   # the last conv writes the graph output
    assert any(c["check"] == "arena_plan" and c["ok"] for c in rep["verified"])
    host = compile_model(tmp_path / "c.tflite", name="c", patch="off").report   # no DSP kernel: no in-place
    assert all(o["inputs"][0]["offset"] != o["outputs"][0]["offset"]
               for o in host["ops"] if o["inputs"][0]["storage"] == "arena" == o["outputs"][0]["storage"])
    check_dsp_target(tmp_path, model, (1, 6, 5, 4))


def pw_expand_chain(batches=1, hw=(6, 5), cmid=24, cout=32, stride=1):
    """3x3 conv (4 -> 8) -> 1x1 conv (8 -> cmid) -> 1x1 conv (cmid -> cout) -> 1x1 conv
    (cout -> 4): the two expanding 1x1 convs may run in place with their input at the tail of
    their output ("end"); each grows by a multiple of 16 bytes."""
    rng = np.random.default_rng(17)
    mb = ModelBuilder()
    x = mb.input([batches, *hw, 4], "int8", scale=0.05, zero_point=-3)

    def conv(inp, cin, c, k, out_scale, s=1, shape=hw):
        w = mb.const(rng.integers(-127, 128, (c, k, k, cin)), "int8",
                     scale=list(rng.uniform(0.002, 0.02, c)), zero_point=[0] * c, axis=0)
        y = mb.tensor([batches, *shape, c], "int8", scale=out_scale, zero_point=2)
        mb.op("CONV_2D", [inp, w, -1], [y], "Conv2DOptions", padding=PAD["SAME"], strideH=s,
              strideW=s, dilationHFactor=1, dilationWFactor=1, fusedActivationFunction=ACT["RELU"])
        return y

    t = conv(x, 4, 8, 3, 0.2)
    u = conv(t, 8, cmid, 1, 0.3)
    out_hw = tuple(-(-n // stride) for n in hw)
    v = conv(u, cmid, cout, 1, 0.4, stride, out_hw)
    y = conv(v, cout, 4, 1, 0.3, 1, out_hw)
    mb.output(y)
    return mb.build(), (batches, *hw, 4)


@pytest.mark.parametrize("kw", [dict(), dict(batches=2, hw=(3, 5)), dict(hw=(3, 3), cout=40), dict(stride=2)],
                         ids=["6x5", "batches-odd-pixels", "3x3-cout40", "stride2-not-in-place"])
def test_inplace_pointwise_expanding(tmp_path, kw):
    """1x1 convs with more output than input channels run with their input at the tail of the
    output ("end" layout: input offset = output offset + output bytes - input bytes) when that
    makes the arena smaller; strided ones never do ("start" instead). Bit-exact, and the arena proof holds."""
    model, shape = pw_expand_chain(**kw)
    (tmp_path / "c.tflite").write_bytes(model)
    res = compile_model(tmp_path / "c.tflite", target="cortex-m4", name="c", patch="off")
    strided = kw.get("stride", 1) > 1
    declared = [op.attrs.get("inplace_of_input") for op in res.graph.ops if op.kind == "CONV_2D"]
    # strided: "start" (_conv_rules.pointwise_inplace: each pixel's output ends before the
    # next pixel's input starts, 32 * q <= 24 * (its input pixel) here)
    assert declared == [False, "end", "start" if strided else "end", "start"]
    convs = [o for o in res.report["ops"] if o["kind"] == "CONV_2D"]
    tail = [o["inputs"][0]["storage"] == "arena" == o["outputs"][0]["storage"]
            and o["inputs"][0]["offset"] + o["inputs"][0]["bytes"] == o["outputs"][0]["offset"] + o["outputs"][0]["bytes"]
            and o["inputs"][0]["bytes"] < o["outputs"][0]["bytes"] for o in convs]
    assert any(c["check"] == "arena_plan" and c["ok"] for c in res.report["verified"])
    plan = res.extra["plan"]
    # the planner's choice of "end" layouts is what the report shows
    assert tail == [o["step"] in plan.tail_inplace for o in convs]
    if not strided:
        # used where it pays: a smaller arena than with no "end" layout at all
        assert plan.tail_inplace
        scratch = {b.start: (b.key[len("scratch:"):], b.size) for b in plan.buffers
                   if b.key.startswith("scratch:")}
        plain = plan_memory(res.graph, scratch, tail=frozenset())
        assert plan.arena_bytes < plain.arena_bytes
        # and with every "end" layout the arena holds the widest 1x1 conv's output alone at
        # its step (plus scratch), not its input and output side by side
        every = plan_memory(res.graph, scratch, tail=frozenset(o["step"] for o in convs[1:3]))
        prove_plan(res.graph, every, {n: st for st, (n, _) in scratch.items()})
        n = shape[0] * shape[1] * shape[2]
        assert every.arena_bytes < n * (24 + kw.get("cout", 32))
    else:
        assert not tail[2]
    check_dsp_target(tmp_path, model, shape)


def dw_chain(batches=1, k=(3, 3), dil=(1, 1), hw=(6, 5), c=8):
    """1x1 conv (4 -> c) -> depthwise (stride 1, SAME) -> 1x1 conv (c -> 4): the depthwise
    input is an intermediate read by nobody else, so it may run in place."""
    rng = np.random.default_rng(13)
    mb = ModelBuilder()
    shape = [batches, *hw]
    x = mb.input(shape + [4], "int8", scale=0.05, zero_point=-3)
    w1 = mb.const(rng.integers(-127, 128, (c, 1, 1, 4)), "int8", scale=[0.01] * c, zero_point=[0] * c, axis=0)
    t = mb.tensor(shape + [c], "int8", scale=0.1, zero_point=2)
    mb.op("CONV_2D", [x, w1, -1], [t], "Conv2DOptions", padding=PAD["SAME"], strideH=1, strideW=1,
          dilationHFactor=1, dilationWFactor=1, fusedActivationFunction=ACT["NONE"])
    wd = mb.const(rng.integers(-127, 128, (1, *k, c)), "int8", scale=list(rng.uniform(0.002, 0.02, c)),
                  zero_point=[0] * c, axis=3)
    bd = mb.const(rng.integers(-2000, 2000, c), "int32", scale=[0.001] * c, zero_point=[0] * c, axis=0)
    u = mb.tensor(shape + [c], "int8", scale=0.2, zero_point=-1)
    mb.op("DEPTHWISE_CONV_2D", [t, wd, bd], [u], "DepthwiseConv2DOptions", padding=PAD["SAME"],
          strideH=1, strideW=1, dilationHFactor=dil[0], dilationWFactor=dil[1], depthMultiplier=1,
          fusedActivationFunction=ACT["RELU"])
    w2 = mb.const(rng.integers(-127, 128, (4, 1, 1, c)), "int8", scale=[0.01] * 4, zero_point=[0] * 4, axis=0)
    v = mb.tensor(shape + [4], "int8", scale=0.3, zero_point=0)
    mb.op("CONV_2D", [u, w2, -1], [v], "Conv2DOptions", padding=PAD["SAME"], strideH=1, strideW=1,
          dilationHFactor=1, dilationWFactor=1, fusedActivationFunction=ACT["NONE"])
    mb.output(v)
    return mb.build(), (batches, *hw, 4)


@pytest.mark.parametrize("kw", [dict(), dict(k=(5, 5)), dict(k=(2, 4)), dict(dil=(2, 2)),
                                dict(batches=2), dict(hw=(1, 3), k=(3, 3)), dict(hw=(9, 7), c=12)],
                         ids=["3x3", "5x5-lag2", "2x4-lag0", "dilated", "batches", "one-row", "9x7x12"])
def test_inplace_depthwise(tmp_path, kw):
    model, shape = dw_chain(**kw)
    (tmp_path / "c.tflite").write_bytes(model)
    rep = compile_model(tmp_path / "c.tflite", target="cortex-m4", name="c", patch="off").report
    dw = next(o for o in rep["ops"] if o["kind"] == "DEPTHWISE_CONV_2D")
    assert dw["inputs"][0]["offset"] == dw["outputs"][0]["offset"] and dw["scratch_bytes"] > 0
    check_dsp_target(tmp_path, model, shape)


def test_inplace_proof_rejects_broken_plans(tmp_path):
    """The independent proof accepts the in-place pair only under its rule."""
    import copy
    from eerie_c.errors import CompilerBug
    from eerie_c.plan.proof import prove_plan
    (tmp_path / "c.tflite").write_bytes(pw_chain(False))
    res = compile_model(tmp_path / "c.tflite", target="cortex-m4", name="c", patch="off")
    g, plan = res.graph, res.extra["plan"]
    op = next(o for o in g.ops if o.attrs.get("inplace_of_input"))
    a, b = op.inputs[0], op.outputs[0]
    assert plan.tensors[a].offset == plan.tensors[b].offset
    steps = {n: k for k, o in enumerate(g.ops) for n in plan.scratch if n.startswith(f"l{o.index}_")}
    prove_plan(g, plan, steps)                       # as planned: fine
    # the output moved by 16 bytes (still overlapping its input): not the same start
    bad = copy.deepcopy(plan)
    bad.tensors[b].offset += 16
    bad.arena_bytes = max(bad.arena_bytes, bad.tensors[b].offset + bad.tensors[b].size + 15) // 16 * 16
    with pytest.raises(CompilerBug, match="overlap|outside"):
        prove_plan(g, bad, steps)
    # the kernel did not declare itself in-place safe
    op.attrs["inplace_of_input"] = False
    try:
        with pytest.raises(CompilerBug, match="overlap"):
            prove_plan(g, plan, steps)
    finally:
        op.attrs["inplace_of_input"] = True




@pytest.mark.usefixtures("board_tools")   # fails (never skips) without the tools
@pytest.mark.parametrize("case", ["k3-K27", "pointwise-odd", "kws-first", "K144-shared", "dw",
                                  "fc", "fc-odd", "inplace", "inplace-dw", "inplace-end"])
def test_dsp_kernels_on_cortex_m4(tmp_path, case):
    """The same kernels on the real instructions (QEMU mps2-an386, Cortex-M4)."""
    from test_depthwise import dw_model
    from test_fully_connected import fc_model
    geoms = {"k3-K27": CONV_GEOMETRIES[0], "pointwise-odd": CONV_GEOMETRIES[5],
             "kws-first": CONV_GEOMETRIES[9], "K144-shared": CONV_GEOMETRIES[10]}
    if case in geoms:
        in_shape, out_c, k, stride, padding, dil = geoms[case]
        model = conv_model("int8", in_shape, out_c, k, stride, padding, dil, act="RELU6")
    elif case == "dw":
        in_shape = (1, 7, 9, 8)
        model = dw_model("int8", in_shape, 1, (3, 3), (1, 1), "SAME", act="RELU6")
    elif case == "fc":
        in_shape = (2, 37)
        model = fc_model("int8", 2, 37, 11, "RELU", per_channel=True)
    elif case == "fc-odd":   # 11 groups of 4 inputs: the 4-group loop, a pair and a single one; SSAT clamp
        in_shape = (2, 44)
        model = fc_model("int8", 2, 44, 6, "NONE")
    elif case == "inplace":
        in_shape = (1, 6, 5, 4)
        model = pw_chain(False)
    elif case == "inplace-end":
        model, in_shape = pw_expand_chain(batches=2, hw=(3, 5))
    else:
        model, in_shape = dw_chain(batches=2, k=(5, 5))
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    xs = [random_inputs(list(in_shape), "int8", 3, seed=2)]
    got, rep = run_model(p, xs, board="mps2-an386")
    assert rep["target"] == "cortex-m4"
    np.testing.assert_array_equal(got[0], tflm_run(model, xs)[0])
