"""TFLM's Signal library ops (custom) vs TFLM: SignalWindow, SignalEnergy, SignalFftAutoScale
and SignalFilterBankSquareRoot, with full-range values and their corners (int16 extremes,
-32768 in the auto-scale's maximum, uint64 energies above 2^32 and the 32-bit shortcut)."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, eerie_run, tflm_run
from tflite_builder import ModelBuilder

RNG = np.random.default_rng(0)


def one_op(code, ins, outs, options=None, consts=()):
    """ins: [(shape, dtype)], consts: {index: array}; outs: [(shape, dtype)]."""
    mb = ModelBuilder()
    consts = dict(consts)
    ids = [mb.const(consts[k], dt) if k in consts else mb.input(shape, dt)
           for k, (shape, dt) in enumerate(ins)]
    o = [mb.tensor(shape, dt) for shape, dt in outs]
    mb.custom_op(code, ids, o, options)
    for t in o:
        mb.output(t)
    return mb.build()


@pytest.mark.parametrize("shift,const", [(12, True), (0, False), (15, True)])
def test_window(tmp_path, shift, const):
    win = RNG.integers(-32768, 32768, 8).astype(np.int16)
    model = one_op("SignalWindow", [([24], "int16"), ([8], "int16")], [([24], "int16")],
                   {"shift": shift}, {1: win} if const else {})
    x = RNG.integers(-32768, 32768, (3, 24)).astype(np.int16)
    x[0, :3] = [-32768, 32767, 0]
    feeds = [x] if const else [x, np.stack([win] * 3)]
    assert_matches_tflm(model, feeds, tmp_path)


def test_energy(tmp_path):
    model = one_op("SignalEnergy", [([34], "int16")], [([17], "uint32")],
                   {"start_index": 2, "end_index": 15})
    x = RNG.integers(-32768, 32768, (3, 34)).astype(np.int16)
    x[0, 4:8] = [-32768, -32768, 32767, -32768]       # the int32 sum wraps in the library
    ref = tflm_run(model, [x])[0]
    got, _ = eerie_run(model, [x], tmp_path)
    np.testing.assert_array_equal(got[0][:, 2:15], ref[:, 2:15])   # TFLM writes these bins only
    assert not got[0][:, :2].any() and not got[0][:, 15:].any()


def test_fft_auto_scale(tmp_path):
    model = one_op("SignalFftAutoScale", [([16], "int16")], [([16], "int16"), ([], "int32")])
    x = np.zeros((5, 16), np.int16)
    x[0] = RNG.integers(-300, 300, 16)
    x[1] = RNG.integers(-5, 5, 16)
    x[2, 3] = -32768                                   # the maximum wraps
    x[3] = RNG.integers(-32768, 32768, 16)             # no room: shift 0
    assert_matches_tflm(model, [x], tmp_path)          # x[4]: all zero


@pytest.mark.parametrize("const_shift", [True, False])
def test_filter_bank_square_root(tmp_path, const_shift):
    model = one_op("SignalFilterBankSquareRoot", [([12], "uint64"), ([], "int32")],
                   [([12], "uint32")], None, {1: np.array(3, np.int32)} if const_shift else {})
    x = np.concatenate([RNG.integers(0, 2 ** 32, (3, 6), dtype=np.uint64),
                        RNG.integers(2 ** 32, 2 ** 63, (3, 6), dtype=np.uint64)], 1)
    x[0, :4] = [0, 1, 2 ** 32 - 1, 2 ** 64 - 1]
    feeds = [x] if const_shift else [x, np.array([0, 5, 31], np.int32).reshape(3)]
    assert_matches_tflm(model, feeds, tmp_path)


@pytest.mark.parametrize("corr,scale", [(3, 1600), (0, 1 << 16), (7, 50000)])
def test_filter_bank_log(tmp_path, corr, scale):
    model = one_op("SignalFilterBankLog", [([40], "uint32")], [([40], "int16")],
                   {"input_correction_bits": corr, "output_scale": scale})
    x = np.concatenate([RNG.integers(0, 2 ** 32, (3, 20), dtype=np.uint64),
                        2 ** RNG.integers(0, 32, (3, 20)).astype(np.uint64)
                        + RNG.integers(0, 3, (3, 20)).astype(np.uint64)], 1)
    x = np.minimum(x, 2 ** 32 - 1).astype(np.uint32)
    x[0, :6] = [0, 1, 2, 3, 65535, 65536]
    assert_matches_tflm(model, [x], tmp_path)


def filter_bank_tables(n_ch=6, bins=33):
    """Triangular mel-like bands: channel i spans [start_i, start_{i+1}), weights falling."""
    edges = np.linspace(1, bins - 2, n_ch + 2).astype(int)
    fs, ws, wd, w, uw = [], [], [], [], []
    for i in range(n_ch + 1):
        width = int(edges[i + 1] - edges[i])
        fs.append(edges[i]), ws.append(len(w)), wd.append(width)
        ramp = np.linspace(4096, 0, width, endpoint=False).astype(int)
        w += list(4096 - ramp)
        uw += list(ramp)
    t = [np.array(a, np.int16) for a in (w, uw, fs, ws, wd)]
    t[0][0] = -5                                          # a negative weight wraps in uint64
    return t


def test_filter_bank(tmp_path):
    tables = filter_bank_tables()
    model = one_op("SignalFilterBank", [([33], "uint32")] + [(list(a.shape), "int16") for a in tables],
                   [([6], "uint64")], {"num_channels": 6}, dict(enumerate(tables, start=1)))
    x = RNG.integers(0, 2 ** 32, (3, 33), dtype=np.uint64).astype(np.uint32)
    assert_matches_tflm(model, [x], tmp_path)


@pytest.mark.parametrize("const_lut", [True, False])
def test_pcan(tmp_path, const_lut):
    lut = RNG.integers(-32768, 32768, 125).astype(np.int16)
    model = one_op("SignalPCAN", [([20], "uint32"), ([20], "uint32"), ([125], "int16")],
                   [([20], "uint32")], {"snr_shift": 6}, {2: lut} if const_lut else {})
    x = RNG.integers(0, 2 ** 32, (3, 20), dtype=np.uint64).astype(np.uint32)
    x[:, :10] >>= RNG.integers(0, 32, (3, 10)).astype(np.uint32)
    noise = (2 ** RNG.integers(0, 32, (3, 20)).astype(np.uint64)
             + RNG.integers(0, 1000, (3, 20)).astype(np.uint64))
    noise = np.minimum(noise, 2 ** 32 - 1).astype(np.uint32)
    noise[0, :4] = [0, 1, 2, 3]
    feeds = [x, noise] + ([] if const_lut else [np.stack([lut] * 3)])
    assert_matches_tflm(model, feeds, tmp_path)


@pytest.mark.parametrize("shape,delay", [([2, 10], 3), ([16], 20), ([3, 1, 4], 4)])
def test_delay(tmp_path, shape, delay):
    """History across 4 consecutive invocations; a delay longer than a frame too."""
    model = one_op("SignalDelay", [(shape, "int16")], [(shape, "int16")], {"delay_length": delay})
    x = RNG.integers(-32768, 32768, (4, *shape)).astype(np.int16)
    assert_matches_tflm(model, [x], tmp_path)


@pytest.mark.parametrize("dtype,shape,step", [("int16", [2, 3, 8], 4), ("float32", [4, 6], 2),
                                              ("int16", [1, 5], 5)])
def test_overlap_add(tmp_path, dtype, shape, step):
    out = shape[:-2] + [shape[-2] * step]
    tensor_type = {"int16": 7, "float32": 0}[dtype]        # the TensorType TensorFlow adds as "T"
    model = one_op("SignalOverlapAdd", [(shape, dtype)], [(out, dtype)],
                   {"T": tensor_type, "frame_step": step})
    if dtype == "int16":
        x = RNG.integers(-32768, 32768, (3, *shape)).astype(np.int16)   # sums saturate
    else:
        x = RNG.standard_normal((3, *shape)).astype(np.float32)
    assert_matches_tflm(model, [x], tmp_path)


def compare_valid(got, ref):
    """Outputs (frames, valid): the valid flags agree, and the frames wherever valid (TFLM
    leaves the others as the arena held them)."""
    np.testing.assert_array_equal(got[1], ref[1])
    for k in range(ref[1].shape[0]):
        if ref[1][k]:
            np.testing.assert_array_equal(got[0][k], ref[0][k], err_msg=f"inference {k}")
    assert ref[1].any()          # some frames complete


@pytest.mark.parametrize("shape,size,step,prefill", [([2, 8], 6, 4, True), ([12], 5, 3, False),
                                                      ([4], 8, 2, False)])
def test_framer(tmp_path, shape, size, step, prefill):
    frames = shape[-1] // step
    model = one_op("SignalFramer", [(shape, "int16")],
                   [(shape[:-1] + [frames, size], "int16"), ([], "bool")],
                   {"frame_size": size, "frame_step": step, "prefill": prefill})
    x = RNG.integers(-32768, 32768, (5, *shape)).astype(np.int16)
    ref = tflm_run(model, [x])
    got, _ = eerie_run(model, [x], tmp_path)
    compare_valid(got, ref)


@pytest.mark.parametrize("c,left,right,step", [(4, 2, 1, 1), (3, 0, 2, 2), (2, 1, 0, 1)])
def test_stacker(tmp_path, c, left, right, step):
    model = one_op("SignalStacker", [([c], "int16")], [([c * (left + right + 1)], "int16"), ([], "bool")],
                   {"num_channels": c, "stacker_left_context": left,
                    "stacker_right_context": right, "stacker_step": step})
    x = RNG.integers(-32768, 32768, (7, c)).astype(np.int16)
    ref = tflm_run(model, [x])
    got, _ = eerie_run(model, [x], tmp_path)
    compare_valid(got, ref)


@pytest.mark.parametrize("clamping", [True, False])
def test_spectral_subtraction(tmp_path, clamping):
    opts = dict(alternate_one_minus_smoothing=15000, alternate_smoothing=1384, clamping=clamping,
                min_signal_remaining=655, num_channels=10, one_minus_smoothing=15565,
                smoothing=819, smoothing_bits=10, spectral_subtraction_bits=14)
    model = one_op("SignalFilterBankSpectralSubtraction", [([10], "uint32")],
                   [([10], "uint32"), ([10], "uint32")], opts)
    x = RNG.integers(0, 2 ** 22, (6, 10), dtype=np.uint64).astype(np.uint32)
    x[3] //= 50                                      # a quiet frame: the estimate exceeds it
    assert_matches_tflm(model, [x], tmp_path)
