"""--optimize size on the DSP targets (eerie_c/kernels/_conv_pack.py, helpers/conv_pack.c.j2,
kernels/conv2d_s8_packed.c.j2): CONV_2D weights packed per channel in the bits each channel
needs (1..8, all-zero channels, -128) and unpacked in blocks of channels, the "rq" format
(int8 weights, requantization from 9 bytes per channel) and the DSP depthwise table from 9
bytes per channel and int8 weights expanded at run time, vs TFLM: odd shapes and channel counts, padding, strides, dilation,
batches > 1, several blocks with an odd last one. Built for the host (plain-C branch with
UBSan and the source proof) and run in QEMU on mps2-an386 (M4) and mps2-an500 (M7), and the
packed conv on mps3-an547 (M55: size mode takes it over the Helium kernel where packing is
the layer's smallest format)."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import assert_board_matches_tflm, random_inputs
from eerie_c.api import compile_model
from eerie_c.kernels import _conv_pack
from tflite_builder import ACT, PAD, ModelBuilder
from test_depthwise import dw_model
from test_dsp_kernels import check_dsp_target


def _out(padding, size, k, stride, dil):
    eff = (k - 1) * dil + 1
    return (size + stride - 1) // stride if padding == "SAME" else (size + stride - eff) // stride


def channel_weights(out_c: int, taps: int, seed: int) -> np.ndarray:
    """[out_c][taps] int8 rows needing 1, 2, ..., 8 bits in turn; channel 3 all zero, channel
    5 holds -128 (8 bits), every row reaches both ends of its range. (packed_conv_model makes
    channel 7 dead; channels 3 and 7 then take no weight bits at all.)"""
    rng = np.random.default_rng(seed)
    rows = []
    for c in range(out_c):
        b = c % 8 + 1
        lo, hi = -(1 << (b - 1)), (1 << (b - 1)) - 1
        r = rng.integers(lo, hi + 1, taps)
        r[0], r[-1] = lo, hi
        if c == 3:
            r[:] = 0
        if c == 5:
            r[1] = -128
        rows.append(r)
    return np.array(rows, np.int64)


def packed_conv_model(in_shape, out_c, k, stride=(1, 1), padding="SAME", dil=(1, 1), act="RELU",
                      seed=0, in_zp=-7):
    rng = np.random.default_rng(seed)
    n, h, w_, c = in_shape
    kh, kw = k
    wt = channel_weights(out_c, kh * kw * c, seed).reshape(out_c, kh, kw, c)
    span = np.maximum(np.abs(wt).reshape(out_c, -1).max(axis=1), 1)
    wscale = 1.2 / span / np.sqrt(kh * kw * c)        # similar output magnitude per channel
    if out_c > 7:
        wscale[7] = 1e-9    # a dead channel (output always the zero point): weights dropped
    mb = ModelBuilder()
    x = mb.input(list(in_shape), "int8", scale=0.05, zero_point=in_zp)
    w = mb.const(wt, "int8", scale=wscale, zero_point=[0] * out_c, axis=0)
    bscale = 0.05 * np.asarray(wscale, np.float32)
    b = mb.const(rng.integers(-300, 300, out_c), "int32", scale=bscale,   # unsaturated constants
                 zero_point=[0] * out_c, axis=0)
    y = mb.tensor([n, _out(padding, h, kh, stride[0], dil[0]), _out(padding, w_, kw, stride[1], dil[1]),
                   out_c], "int8", scale=0.04, zero_point=3)
    mb.op("CONV_2D", [x, w, b], [y], "Conv2DOptions", padding=PAD[padding], strideH=stride[0],
          strideW=stride[1], dilationHFactor=dil[0], dilationWFactor=dil[1],
          fusedActivationFunction=ACT[act])
    mb.output(y)
    return mb.build()


# in_shape, out_c, kernel, stride, padding, dilation, act
CASES = {
    "pw-odd-c": ((1, 5, 3, 20), 13, (1, 1), (1, 1), "SAME", (1, 1), "RELU6"),
    "k3-s2-batch2": ((2, 6, 5, 7), 11, (3, 3), (2, 2), "SAME", (1, 1), "NONE"),
    "k3-dil2": ((1, 7, 6, 5), 9, (3, 3), (1, 1), "SAME", (2, 2), "RELU"),
    "pw-valid-s2": ((1, 7, 6, 16), 16, (1, 1), (2, 2), "VALID", (1, 1), "RELU"),
    "k2x4-pad": ((1, 6, 9, 3), 17, (2, 4), (1, 1), "SAME", (1, 1), "NONE"),
}


def _model(case):
    in_shape, out_c, k, s, pad, dil, act = CASES[case]
    return in_shape, packed_conv_model(in_shape, out_c, k, s, pad, dil, act, seed=len(case))


@pytest.fixture
def size_mode(monkeypatch):
    """Compiles that take no optimize argument (dsp_target_run) use size; small blocks so
    the test shapes need several (the last one odd where out_c is)."""
    import eerie_c.kernels as kernels
    orig = kernels.LowerCtx.__init__

    def init(self, graph, target="host", optimize="balanced"):
        orig(self, graph, target, "size")
    monkeypatch.setattr(kernels.LowerCtx, "__init__", init)
    monkeypatch.setattr(_conv_pack, "BLOCK_BYTES", 300)

    def force(fmt):
        monkeypatch.setattr(_conv_pack, "FORCE", fmt)
    return force


def test_pack_round_trip():
    w = channel_weights(24, 37, seed=1)
    bits = _conv_pack.bits_needed(w)
    assert bits.tolist() == [1, 2, 3, 1, 5, 8, 7, 8] + list(range(1, 9)) * 2   # zeros: 1 bit; -128: 8
    data = _conv_pack.pack_rows(w, bits)
    assert data.size == sum((37 * b + 7) // 8 for b in bits.tolist())
    np.testing.assert_array_equal(_conv_pack.unpack_rows(data, bits, 37), w)


@pytest.mark.parametrize("fmt", ["packed", "rq"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_conv_size_host(tmp_path, size_mode, case, fmt):
    size_mode(fmt)
    in_shape, model = _model(case)
    src = tmp_path / "m.tflite"
    src.write_bytes(model)
    res = compile_model(src, target="cortex-m4", name="m", optimize="size")
    code = res.files["m.c"]
    if fmt == "packed":
        assert "eerie_conv_unpack_w(src" in code and "weights_packed" in code
        choice = res.report["ops"][0]["choice"]
        assert "unpacked in" in choice and "bits per channel 0: 2," in choice, choice
    else:
        assert "eerie_conv_unpack_rq(l0" in code and "eerie_conv_unpack_w(src" not in code
    check_dsp_target(tmp_path, model, in_shape)


@pytest.mark.parametrize("board,core", [("mps2-an386", "cortex-m4"), ("mps2-an500", "cortex-m7"),
                                        ("mps3-an547", "cortex-m55")])
@pytest.mark.parametrize("case", sorted(CASES))
def test_conv_packed_qemu(tmp_path, size_mode, case, board, core):
    size_mode("packed")
    in_shape, model = _model(case)
    xs = [random_inputs(list(in_shape), "int8", 2, seed=4)]
    assert_board_matches_tflm(model, xs, tmp_path, board, core, optimize="size", out_dir=tmp_path / "fw")
    assert "eerie_conv_unpack_w(src" in (tmp_path / "fw" / "m.c").read_text()


def test_conv_rq_qemu(tmp_path, size_mode):
    size_mode("rq")
    in_shape, model = _model("k3-s2-batch2")
    xs = [random_inputs(list(in_shape), "int8", 2, seed=5)]
    assert_board_matches_tflm(model, xs, tmp_path, "mps2-an386", "cortex-m4", optimize="size",
                              out_dir=tmp_path / "fw")
    code = (tmp_path / "fw" / "m.c").read_text()
    assert "eerie_conv_unpack_rq(l0" in code and "eerie_conv_unpack_w(src" not in code


# DSP depthwise with the requantization table: stride 1 (rows kernel) and >= 32 channels strided
# (enough channels that the table's 7 B per channel also pay for eerie_dw_unpack_rq's code)
DW_CASES = {
    "s1-k3-batch2": ((2, 5, 6, 36), (3, 3), (1, 1), "SAME", "RELU"),
    "s2-c48-valid": ((1, 7, 8, 48), (3, 3), (2, 2), "VALID", "RELU6"),
    "s1-k5x3-odd": ((1, 7, 5, 40), (5, 3), (1, 1), "SAME", "NONE"),
}


def _dw(case):
    in_shape, k, s, pad, act = DW_CASES[case]
    return in_shape, dw_model("int8", in_shape, 1, k, s, pad, act=act, seed=3)


@pytest.mark.parametrize("case", sorted(DW_CASES))
def test_depthwise_size_host(tmp_path, size_mode, case):
    in_shape, model = _dw(case)
    src = tmp_path / "m.tflite"
    src.write_bytes(model)
    res = compile_model(src, target="cortex-m4", name="m", optimize="size")
    assert "eerie_dw_unpack_rq(l0" in res.files["m.c"]
    assert res.report["ops"][0]["choice"].startswith("weights int8 (expanded at run time), "
                                                      "requantization 9 B per channel")
    assert "eerie_dw_unpack_w(l0" in res.files["m.c"]
    check_dsp_target(tmp_path, model, in_shape)


@pytest.mark.parametrize("case", sorted(DW_CASES))
def test_depthwise_size_qemu(tmp_path, case):
    in_shape, model = _dw(case)
    xs = [random_inputs(list(in_shape), "int8", 2, seed=6)]
    rep = assert_board_matches_tflm(model, xs, tmp_path, "mps2-an386", "cortex-m4", optimize="size")
    assert rep["ops"][0]["choice"].startswith("weights int8 (expanded at run time), "
                                              "requantization 9 B per channel")


# CONV_2D_ADD (the fused residual ADD): only the "rq" format applies there
@pytest.mark.parametrize("case", ["residual-larger-batch2", "downsample", "conv-larger-odd-none"])
def test_conv_add_rq_host(tmp_path, size_mode, case):
    from test_conv_add_dsp import CASES as ADD_CASES
    size_mode("rq")
    model, shape = ADD_CASES[case]()
    src = tmp_path / "m.tflite"
    src.write_bytes(model)
    res = compile_model(src, target="cortex-m4", name="m", optimize="size", patch="off")
    adds = [op for op in res.report["ops"] if op["kind"] == "CONV_2D_ADD"]
    assert adds and all(op["choice"].startswith("weights int8, requantization 9 B") for op in adds)
    assert "eerie_conv_unpack_rq(l" in res.files["m.c"]
    check_dsp_target(tmp_path, model, shape)


@pytest.mark.parametrize("case", ["residual-larger-batch2", "downsample"])
def test_conv_add_rq_qemu(tmp_path, size_mode, case):
    from test_conv_add_dsp import CASES as ADD_CASES
    size_mode("rq")
    model, shape = ADD_CASES[case]()
    xs = [random_inputs(shape, "int8", 2, seed=7)]
    rep = assert_board_matches_tflm(model, xs, tmp_path, "mps2-an386", "cortex-m4", optimize="size")
    assert any(op["kind"] == "CONV_2D_ADD" and op["choice"].startswith("weights int8, requantization 9 B")
               for op in rep["ops"])


def test_m55_size_keeps_helium_unless_packed(tmp_path):
    """On the M55 a layer leaves its Helium kernel in size mode only for packed weights: 8-bit
    weights (nothing to pack) stay on Helium."""
    model = packed_conv_model((1, 6, 5, 32), 32, (1, 1), act="RELU", seed=2)
    src = tmp_path / "m.tflite"
    src.write_bytes(model)
    small = compile_model(src, target="cortex-m55", name="m", optimize="size")
    assert "eerie_conv_unpack_w(src" in small.files["m.c"]
    from test_conv import conv_model
    src.write_bytes(conv_model("int8", (1, 6, 5, 32), 32, (1, 1), act="RELU"))
    wide = compile_model(src, target="cortex-m55", name="m", optimize="size")
    assert "eerie_conv_unpack" not in wide.files["m.c"] and "vmladav" in wide.files["m.c"].lower()


@pytest.mark.parametrize("case", ["small", "packs"])
def test_size_never_grows_the_firmware(tmp_path, case, monkeypatch):
    """A shared helper is paid once per model: a model whose one layer would save 88 B with
    the compact requantization (more than MIN_SAVED, less than eerie_conv_unpack_rq's code)
    is lowered again without it, so it keeps the default format and the same flash; one whose
    layer packs well is smaller. Whole-firmware flash (text + data) of the mps2-an386 build,
    bit-exact both."""
    import eerie_c.kernels.conv as conv
    from test_conv import conv_model
    # balanced with int8 weights, the format size keeps (small layers' weights would
    # otherwise be stored sign-extended under balanced: conv.py WIDE_BALANCED_BYTES)
    monkeypatch.setattr(conv, "WIDE_BALANCED_BYTES", 0)
    if case == "small":    # 8-bit weights: nothing to pack
        shape = (1, 4, 4, 16)
        model = conv_model("int8", shape, 16, (1, 1), act="RELU")
    else:
        shape = (1, 4, 4, 64)
        model = packed_conv_model(shape, 64, (1, 1), seed=1)
    xs = [random_inputs(list(shape), "int8", 1, seed=2)]
    flash = {}
    for mode in ("balanced", "size"):
        (tmp_path / mode).mkdir()
        rep = assert_board_matches_tflm(model, xs, tmp_path / mode, "mps2-an386", "cortex-m4",
                                        optimize=mode, out_dir=tmp_path / mode / "fw")
        flash[mode] = rep["flash_bytes"]
        code = (tmp_path / mode / "fw" / "m.c").read_text()
        assert ("eerie_conv_unpack" in code) == (mode == "size" and case == "packs")
    assert (flash["size"] == flash["balanced"]) if case == "small" else (flash["size"] < flash["balanced"])


def _inplace_chain():
    """stem 3x3 conv -> 1x1 conv 16 -> 16 (may run in place) -> 1x1 conv 16 -> 24"""
    from test_inplace_conv_add import Block
    b = Block((1, 5, 6, 16), 0)
    x = b.conv(b.x, 16, k=3)
    return b.build(b.conv(b.conv(x, 16, k=1), 24, k=1)), [1, 5, 6, 16]


@pytest.mark.parametrize("block_bytes", [4096, 300])
def test_packed_in_place_only_in_one_block(tmp_path, size_mode, monkeypatch, block_bytes):
    """A packed 1x1 layer runs in place (its output over its input) only when its channels fit
    one block (the default loop order); with several blocks a pixel's input is still read by
    later blocks, so it gets its own output buffer. Bit-exact either way, host and QEMU."""
    size_mode("packed")
    monkeypatch.setattr(_conv_pack, "BLOCK_BYTES", block_bytes)
    model, shape = _inplace_chain()
    xs = [random_inputs(shape, "int8", 2, seed=8)]
    rep = assert_board_matches_tflm(model, xs, tmp_path, "mps2-an386", "cortex-m4", optimize="size")
    op = rep["ops"][1]
    assert ("in 1 block(s)" in op["choice"]) == (block_bytes == 4096), op["choice"]
    same = op["inputs"][0]["offset"] == op["outputs"][0]["offset"]
    assert same == (block_bytes == 4096), op
    host = tmp_path / "host"
    host.mkdir()
    check_dsp_target(host, model, shape)


@pytest.mark.parametrize("seed", range(8))
def test_packed_random_shapes_host(tmp_path, size_mode, seed):
    """Random geometries (1 to 21 output channels, any K, kernel 1-3, stride 1-2, SAME/VALID,
    batch 1-2) with every bit width, packed in small blocks, on the host build."""
    size_mode("packed")
    rng = np.random.default_rng(100 + seed)
    k = int(rng.integers(1, 4))
    shape = (int(rng.integers(1, 3)), int(rng.integers(k, 8)), int(rng.integers(k, 8)),
             int(rng.integers(-(-16 // (k * k)), 24)))     # K >= 16: the shared kernel's range
    s = int(rng.integers(1, 3))
    model = packed_conv_model(shape, int(rng.integers(1, 22)), (k, k), (s, s),
                              ["SAME", "VALID"][seed % 2], act=["NONE", "RELU"][seed // 4], seed=seed)
    src = tmp_path / "m.tflite"
    src.write_bytes(model)
    assert "eerie_conv_unpack_w(src" in compile_model(src, target="cortex-m4", name="m",
                                                      optimize="size").files["m.c"]
    check_dsp_target(tmp_path, model, shape)
