"""TFLM's SignalIrfft (int16 / int32 KISS FFT fixed point, float32; kernels/signal_irfft.py) vs
the tflite-micro runtime, bit for bit: every KISS FFT radix (4, 2, 3, 5) in the inverse
direction, several frames per invocation (an odd last axis too, whose frames straddle rows as
TFLM's loop does), full-scale spectra where KISS FFT's sums wrap, and the spectrum of a real
signal (SignalRfft then SignalIrfft)."""
import numpy as np
import pytest

from conftest import eerie_run, tflm_run
from tflite_builder import ModelBuilder
from test_signal_rfft import T_CODE, signals

from eerie_c.api import compile_model
from eerie_c.errors import EerieError


def irfft_model(in_shape, out_shape, length, dtype):
    mb = ModelBuilder()
    x = mb.input(in_shape, dtype)
    y = mb.tensor(out_shape, dtype)
    mb.custom_op("SignalIrfft", [x], [y], {"T": T_CODE[dtype], "fft_length": length})
    mb.output(y)
    return mb.build()


def round_trip_model(in_shape, length, dtype):
    mb = ModelBuilder()
    x = mb.input(in_shape, dtype)
    s = mb.tensor(list(in_shape[:-1]) + [length + 2], dtype)
    y = mb.tensor(list(in_shape[:-1]) + [length], dtype)
    mb.custom_op("SignalRfft", [x], [s], {"T": T_CODE[dtype], "fft_length": length})
    mb.custom_op("SignalIrfft", [s], [y], {"T": T_CODE[dtype], "fft_length": length})
    mb.output(y)
    return mb.build()


def assert_bit_exact(model, xs, tmp_path, length=None):
    """Outputs equal; with `length`, only the first `length` samples of each output frame,
    the ones TFLM writes (it leaves the rest of a longer frame as it was; eerie-c zeroes it)."""
    ref = tflm_run(model, xs)[0]
    got, _ = eerie_run(model, xs, tmp_path)
    if length is not None:
        assert not got[0][..., length:].any()
        got, ref = [got[0][..., :length]], ref[..., :length]
    np.testing.assert_array_equal(got[0], ref)


DTYPES = ["int16", "int32", "float32"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("length,in_shape,out_shape", [
    (512, [514], [512]),             # micro_speech's length: 4 x 4 x 4 x 4
    (64, [2, 66], [2, 64]),          # 4 x 4 x 2, two frames
    (48, [3, 52], [3, 50]),          # 4 x 2 x 3, longer frames than the transform needs
    (40, [42], [40]),                # 4 x 5
    (30, [2, 2, 32], [2, 2, 30]),    # 3 x 5, four frames
    (4, [6], [4]),                   # 2
])
def test_irfft(tmp_path, dtype, length, in_shape, out_shape):
    assert_bit_exact(irfft_model(in_shape, out_shape, length, dtype),
                     [signals(5, in_shape, length + 1, dtype)], tmp_path, length)


def test_irfft_odd_last_axis(tmp_path):
    """TFLM steps through the input as complex values, last axis / 2 at a time: [18, 19] int16
    is 171 complex values read 9 at a time, 19 frames that straddle the rows. [2, 19] would
    have TFLM read its third frame past the tensor: refused."""
    model = irfft_model([18, 19], [19, 16], 16, "int16")
    assert_bit_exact(model, [signals(5, [18, 19], 3, "int16")], tmp_path)
    p = tmp_path / "short.tflite"
    p.write_bytes(irfft_model([2, 19], [3, 16], 16, "int16"))
    with pytest.raises(EerieError, match="frame 2 would read past the tensor"):
        compile_model(p)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("length,in_shape", [(256, [2, 200]), (60, [60])])
def test_rfft_then_irfft(tmp_path, dtype, length, in_shape):
    assert_bit_exact(round_trip_model(in_shape, length, dtype),
                     [signals(5, in_shape, length, dtype)], tmp_path)


def test_irfft_refuses_short_frames(tmp_path):
    p = tmp_path / "m.tflite"
    p.write_bytes(irfft_model([16], [16], 16, "int16"))          # 8 bins, 9 needed
    with pytest.raises(EerieError, match="fewer than the 9 bins"):
        compile_model(p)
    p.write_bytes(irfft_model([18], [14], 16, "float32"))        # 14 samples, 16 written
    with pytest.raises(EerieError, match="no room"):
        compile_model(p)
