"""int16 ("16x8" scheme: int16 activations, zero point 0) ADD, SUB, MUL, PAD / PADV2 and
SOFTMAX vs TFLM, bit-exact: broadcasting, fused activations, scales giving large and small
multipliers, full-range int16 inputs, softmax with several betas and row lengths."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, eerie_run, random_inputs
from eerie_c.errors import EerieError
from tflite_builder import ACT, ModelBuilder

OPTS = {"ADD": "AddOptions", "SUB": "SubOptions", "MUL": "MulOptions"}


def binary16(kind, sa, sb, scales, act="NONE", const_b=None):
    mb = ModelBuilder()
    a = mb.input(sa, "int16", scale=scales[0], zero_point=0)
    if const_b is not None:
        b = mb.const(const_b, "int16", scale=scales[1], zero_point=0)
    else:
        b = mb.input(sb, "int16", scale=scales[1], zero_point=0)
    y = mb.tensor(list(np.broadcast_shapes(tuple(sa), tuple(sb))), "int16", scale=scales[2],
                  zero_point=0)
    mb.op(kind, [a, b], [y], OPTS[kind], fusedActivationFunction=ACT[act])
    mb.output(y)
    return mb.build()


def full_range(shape, n, seed):
    """Random int16 values including both extremes."""
    x = random_inputs(shape, "int16", n, seed)
    flat = x.reshape(n, -1)
    flat[:, 0], flat[:, -1] = -32768, 32767
    return x


SHAPES = [([2, 3, 4], [2, 3, 4]), ([2, 3, 4], [4]), ([2, 1, 4], [3, 1]), ([1, 5], [1]),
          ([3], [2, 1, 3])]
# (in1, in2, out) scales: equal, mixed, output much finer / coarser than the inputs
ADD_SCALES = [(1 / 32768, 1 / 32768, 1 / 16384), (0.001, 0.0007, 0.002), (0.01, 0.0003, 0.05),
              (3e-4, 2e-3, 1.5e-4), (0.5, 0.25, 40.0)]
MUL_SCALES = [(1 / 32768, 1 / 32768, 1 / 32768), (0.01, 0.02, 1e-5), (0.3, 0.2, 500.0),
              (1e-3, 7e-4, 3e-7), (0.001, 0.002, 0.004)]


@pytest.mark.parametrize("kind", ["ADD", "SUB", "MUL"])
def test_binary_int16_broadcast(tmp_path, kind):
    scales = (0.001, 0.0007, 0.002) if kind != "MUL" else (0.01, 0.02, 0.01)
    for k, (sa, sb) in enumerate(SHAPES):
        model = binary16(kind, sa, sb, scales)
        assert_matches_tflm(model, [full_range(sa, 3, k), full_range(sb, 3, 10 + k)], tmp_path)


@pytest.mark.parametrize("kind", ["ADD", "SUB", "MUL"])
def test_binary_int16_scales(tmp_path, kind):
    for k, scales in enumerate(MUL_SCALES if kind == "MUL" else ADD_SCALES):
        model = binary16(kind, [2, 8, 8], [8], scales)
        assert_matches_tflm(model, [full_range([2, 8, 8], 3, k), full_range([8], 3, 20 + k)],
                            tmp_path)


@pytest.mark.parametrize("kind", ["ADD", "SUB", "MUL"])
@pytest.mark.parametrize("act", ["RELU", "RELU6", "RELU_N1_TO_1"])
def test_binary_int16_activation(tmp_path, kind, act):
    scales = (0.0005, 0.0003, 0.0004)
    model = binary16(kind, [4, 16], [4, 16], scales, act)
    assert_matches_tflm(model, [full_range([4, 16], 3, 1), full_range([4, 16], 3, 2)], tmp_path)


@pytest.mark.parametrize("kind", ["ADD", "SUB", "MUL"])
def test_binary_int16_constant_operand(tmp_path, kind):
    rng = np.random.default_rng(5)
    c = rng.integers(-32768, 32768, size=(1, 1, 6)).astype(np.int16)
    model = binary16(kind, [2, 3, 6], [1, 1, 6], (0.002, 0.001, 0.003), const_b=c)
    assert_matches_tflm(model, [full_range([2, 3, 6], 3, 4)], tmp_path)


def _float32_multipliers(s1, s2, so):
    """SUB's multipliers as newer TFLM sources derive them: scales divided in float32."""
    from eerie_c.kernels._quant import quantize_multiplier
    s1, s2, so = np.float32(s1), np.float32(s2), np.float32(so)
    twice = np.float32(2) * max(s1, s2)
    reals = [np.float32(s1 / twice), np.float32(s2 / twice),
             np.float32(twice / (np.float32(1 << 15) * so))]
    return [quantize_multiplier(float(r))[0] for r in reals]


@pytest.mark.parametrize("kind", ["ADD", "SUB"])
def test_add_sub_int16_double_multipliers(tmp_path, kind):
    """Scales where float32 and double derivations of a multiplier differ in the last bit:
    the TFLM oracle uses double for both ADD and SUB (so does eerie-c)."""
    from types import SimpleNamespace
    from eerie_c.kernels.elementwise_16x8 import add_sub_multipliers
    rng = np.random.default_rng(0)
    found = []
    for _ in range(20000):
        s = [float(np.float32(v)) for v in rng.uniform(1e-4, 1e-2, 3)]
        s[2] = float(np.float32(s[2] * 3))
        d, _ = add_sub_multipliers(SimpleNamespace(kind=kind, index=0), *map(np.float32, s))
        if d != _float32_multipliers(*s):
            found.append(tuple(s))
        if len(found) == 3:
            break
    assert found, "no scales found where float32 and double multipliers differ"
    for k, scales in enumerate(found):
        model = binary16(kind, [4, 64], [4, 64], scales)
        assert_matches_tflm(model, [full_range([4, 64], 2, k), full_range([4, 64], 2, 9 + k)],
                            tmp_path)


def test_binary_int16_rejects_zero_point(tmp_path):
    mb = ModelBuilder()
    a = mb.input([4], "int16", scale=0.01, zero_point=3)
    b = mb.input([4], "int16", scale=0.01, zero_point=0)
    y = mb.tensor([4], "int16", scale=0.01, zero_point=0)
    mb.op("ADD", [a, b], [y], "AddOptions")
    mb.output(y)
    x = random_inputs([4], "int16", 1)
    with pytest.raises(EerieError, match="zero point 0"):
        eerie_run(mb.build(), [x, x], tmp_path)


def test_add_int16_rejects_output_multiplier_above_one(tmp_path):
    """out_scale below 2 * max_in_scale / 2^15 cannot be expressed by TFLM's 16-bit ADD."""
    model = binary16("ADD", [4], [4], (0.01, 0.01, 1e-7))
    x = random_inputs([4], "int16", 1)
    with pytest.raises(EerieError, match="multiplier"):
        eerie_run(model, [x, x], tmp_path)


@pytest.mark.parametrize("kind", ["PAD", "PADV2"])
def test_pad_int16(tmp_path, kind):
    mb = ModelBuilder()
    x = mb.input([1, 3, 4, 2], "int16", scale=0.001, zero_point=0)
    pads = mb.const(np.array([[0, 0], [1, 2], [2, 0], [0, 1]], np.int32), "int32")
    ins = [x, pads]
    if kind == "PADV2":
        ins.append(mb.const(np.array([-1234], np.int16), "int16", scale=0.001, zero_point=0))
    y = mb.tensor([1, 6, 6, 3], "int16", scale=0.001, zero_point=0)
    mb.op(kind, ins, [y], "PadV2Options" if kind == "PADV2" else "PadOptions")
    mb.output(y)
    assert_matches_tflm(mb.build(), [full_range([1, 3, 4, 2], 3, 0)], tmp_path)


def softmax16(shape, in_scale, beta, in_zp=0):
    mb = ModelBuilder()
    x = mb.input(shape, "int16", scale=in_scale, zero_point=in_zp)
    y = mb.tensor(shape, "int16", scale=1 / 32768, zero_point=0)
    mb.op("SOFTMAX", [x], [y], "SoftmaxOptions", beta=beta)
    mb.output(y)
    return mb.build()


@pytest.mark.parametrize("beta", [1.0, 0.5, 2.7])
@pytest.mark.parametrize("shape", [[1, 10], [2, 3, 5], [4, 1], [1, 300]])
def test_softmax_int16(tmp_path, shape, beta):
    """Full-range inputs; the input scale makes the row differences span the exp table."""
    model = softmax16(shape, 10.0 / 32768, beta)
    assert_matches_tflm(model, [full_range(shape, 3, len(shape))], tmp_path)


@pytest.mark.parametrize("in_scale", [1 / 4096, 0.01, 3e-5, 1.0])
def test_softmax_int16_scales(tmp_path, in_scale):
    """Small and large input scales (right and left shifts of the diff rescale) and a flat
    row."""
    rng = np.random.default_rng(3)
    x = rng.integers(-3000, 3000, size=(3, 2, 16)).astype(np.int16)
    x[0, 0, :] = 7        # a flat row: every exp equal
    model = softmax16([2, 16], in_scale, 1.0)
    assert_matches_tflm(model, [x], tmp_path)


def test_softmax_int16_tables_cover_every_entry(tmp_path):
    """Row differences 0 .. -65535 reach every entry of the exp table, and rows with one to
    many large values reach a wide span of the 1 / (1 + x) table."""
    d = np.arange(0, 65536, 97, dtype=np.int64)
    row = (32767 - d).astype(np.int16)[:256]
    x = np.stack([row, np.roll(row, 7), np.where(np.arange(256) % 3 == 0, 32767, row)])
    x = x.reshape(3, 1, 256).astype(np.int16)
    model = softmax16([1, 256], 10.0 / 65535, 1.0)
    assert_matches_tflm(model, [x], tmp_path)


def test_softmax_int16_lut_matches_tflm_construction():
    """Spot values of the exp table: exp(0) = 1 saturates to 32767, exp(-10) * 32768 ~ 1."""
    from eerie_c.kernels.softmax_16x8 import exp_lut, one_over_one_plus_x_lut
    e, r = exp_lut(), one_over_one_plus_x_lut()
    assert e.shape == r.shape == (513,)
    assert e[-1] == 32767 and 0 <= e[0] <= 2 and np.all(np.diff(e.astype(int)) >= 0)
    assert r[0] == 32767 and r[-1] == 16384 and np.all(np.diff(r.astype(int)) <= 0)


def test_softmax_int16_rejects_output_quantization(tmp_path):
    mb = ModelBuilder()
    x = mb.input([1, 4], "int16", scale=0.001, zero_point=0)
    y = mb.tensor([1, 4], "int16", scale=1 / 65536, zero_point=-32768)
    mb.op("SOFTMAX", [x], [y], "SoftmaxOptions", beta=1.0)
    mb.output(y)
    with pytest.raises(EerieError, match="1/32768"):
        eerie_run(mb.build(), [random_inputs([1, 4], "int16", 1)], tmp_path)


def test_softmax_int16_rejects_input_zero_point(tmp_path):
    with pytest.raises(EerieError, match="zero point 0"):
        eerie_run(softmax16([1, 4], 0.001, 1.0, in_zp=5), [random_inputs([1, 4], "int16", 1)],
                  tmp_path)


def unary16(kind, shape, in_scale, out_scale=1 / 32768):
    mb = ModelBuilder()
    x = mb.input(shape, "int16", scale=in_scale, zero_point=0)
    y = mb.tensor(shape, "int16", scale=out_scale, zero_point=0)
    mb.op(kind, [x], [y])
    mb.output(y)
    return mb.build()


# power-of-two scales (2^-12: a multiply by 3; 2^-11: by 6 for TANH, general for LOGISTIC),
# others through the general multiplier and right shift
ACT16_SCALES = [2 ** -12, 2 ** -11, 2 ** -10, 1 / 32768, 0.001, 3e-4, 1.3]


@pytest.mark.parametrize("kind", ["TANH", "LOGISTIC"])
@pytest.mark.parametrize("in_scale", ACT16_SCALES)
def test_tanh_logistic_int16(tmp_path, kind, in_scale):
    """Every int16 input value (one 65536-element tensor), so every table interval and both
    saturation ends are hit."""
    x = np.arange(-32768, 32768, dtype=np.int16).reshape(1, 256, 256)
    assert_matches_tflm(unary16(kind, [256, 256], in_scale), [x], tmp_path)


def test_tanh_int16_rejects_output_scale(tmp_path):
    with pytest.raises(EerieError, match="2\\^-15"):
        eerie_run(unary16("TANH", [4], 2 ** -12, out_scale=1 / 256),
                  [random_inputs([4], "int16", 1)], tmp_path)
