"""TFLM signal ops on the filter bank (kernels/signal_filter_bank.py, kernels/signal_noise.py)
vs the tflite-micro runtime: SignalFilterBank, SignalFilterBankSquareRoot, SignalFilterBankLog,
SignalFilterBankSpectralSubtraction (its noise estimate persists across invocations: several
frames in a row) and SignalPCAN, on random full-range uint32 inputs and edge values."""
import numpy as np
import pytest

from conftest import assert_matches_tflm
from tflite_builder import ModelBuilder

from eerie_c.api import compile_model
from eerie_c.errors import EerieError

RNG = np.random.default_rng(7)


def bank_tables(channels, bins):
    """Overlapping triangular-ish channels over `bins`: (weights, unweights, frequency starts,
    weight starts, widths), one negative weight (TFLM's uint64 wrap)."""
    fs = np.linspace(1, bins - 6, channels + 1).astype(np.int16)
    wd = RNG.integers(2, 6, channels + 1).astype(np.int16)
    ws = np.concatenate([[0], np.cumsum(wd)[:-1]]).astype(np.int16)
    w = RNG.integers(0, 4096, int(wd.sum())).astype(np.int16)
    w[3] = -5
    return w, (4096 - w).astype(np.int16), fs, ws, wd


def spectra(n, bins, top=2 ** 31):
    x = RNG.integers(0, top, (n, bins), dtype=np.uint64).astype(np.uint32)
    x[1] //= 1 << 20                       # quiet frame
    x[2] = 0
    return x


def test_bank_sqrt_log(tmp_path):
    channels, bins = 12, 40
    mb = ModelBuilder()
    x, bits = mb.input([bins], "uint32"), mb.input([], "int32")
    tables = [mb.const(t, "int16") for t in bank_tables(channels, bins)]
    e, r, lg = mb.tensor([channels], "uint64"), mb.tensor([channels], "uint32"), mb.tensor([channels], "int16")
    mb.custom_op("SignalFilterBank", [x] + tables, [e], {"num_channels": channels})
    mb.custom_op("SignalFilterBankSquareRoot", [e, bits], [r])
    mb.custom_op("SignalFilterBankLog", [r], [lg], {"input_correction_bits": 3, "output_scale": 1600})
    for t in (e, r, lg):
        mb.output(t)
    n = 5
    got, _ = assert_matches_tflm(mb.build(), [spectra(n, bins), np.arange(n, dtype=np.int32) * 3], tmp_path)
    assert got[2].any()


def test_log_edges(tmp_path):
    mb = ModelBuilder()
    x, y = mb.input([16], "uint32"), mb.tensor([16], "int16")
    mb.custom_op("SignalFilterBankLog", [x], [y], {"input_correction_bits": 1, "output_scale": 64000})
    mb.output(y)
    x = np.array([[0, 1, 2, 3, 255, 256, 65535, 65536, 65537, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1,
                   12345, 99999, 7, 1 << 20]], np.uint32)
    x = np.concatenate([x, spectra(3, 16, 2 ** 32)])
    assert_matches_tflm(mb.build(), [x], tmp_path)


@pytest.mark.parametrize("clamping", [False, True])
def test_spectral_subtraction_pcan(tmp_path, clamping):
    channels = 10
    mb = ModelBuilder()
    x = mb.input([channels], "uint32")
    y, est, g = (mb.tensor([channels], "uint32") for _ in range(3))
    mb.custom_op("SignalFilterBankSpectralSubtraction", [x], [y, est], dict(
        num_channels=channels, smoothing=409, one_minus_smoothing=15975, alternate_smoothing=983,
        alternate_one_minus_smoothing=15401, min_signal_remaining=819, smoothing_bits=10,
        spectral_subtraction_bits=14, clamping=clamping))
    lut = mb.const(RNG.integers(-2000, 8000, 125).astype(np.int16), "int16")
    mb.custom_op("SignalPCAN", [y, est, lut], [g], {"snr_shift": 6})
    for t in (y, est, g):
        mb.output(t)
    # loud then quiet frames: the estimate rises above the signal (clamping matters)
    x = RNG.integers(0, 1 << 22, (8, channels)).astype(np.uint32)
    x[4:] //= 64
    x[6, :3] = [0, 1, 2]
    assert_matches_tflm(mb.build(), [x], tmp_path)


def test_filter_bank_refuses_out_of_bounds_tables(tmp_path):
    mb = ModelBuilder()
    x, e = mb.input([20], "uint32"), mb.tensor([4], "uint64")
    w, u, fs, ws, wd = bank_tables(4, 20)
    fs[2] = 19                              # 19 + width runs past the 20 bins
    tables = [mb.const(t, "int16") for t in (w, u, fs, ws, wd)]
    mb.custom_op("SignalFilterBank", [x] + tables, [e], {"num_channels": 4})
    mb.output(e)
    p = tmp_path / "m.tflite"
    p.write_bytes(mb.build())
    with pytest.raises(EerieError, match="out of bounds"):
        compile_model(p)
