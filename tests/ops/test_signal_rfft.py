"""TFLM's SignalRfft (int16, KISS FFT fixed point; kernels/signal_rfft.py) vs the tflite-micro
runtime: micro_speech's 512-point transform of 480-sample frames, lengths whose halves factor
into every KISS FFT radix (4, 2, 3, 5), several frames per invocation, full-scale noise."""
import numpy as np
import pytest

from conftest import assert_matches_tflm
from tflite_builder import ModelBuilder

from eerie_c.api import compile_model
from eerie_c.errors import EerieError
from eerie_c.kernels.signal_rfft import kiss_factors


def rfft_model(in_shape, length):
    mb = ModelBuilder()
    x = mb.input(in_shape, "int16")
    y = mb.tensor(list(in_shape[:-1]) + [length + 2], "int16")
    mb.custom_op("SignalRfft", [x], [y], {"T": 7, "fft_length": length})   # T: INT16
    mb.output(y)
    return mb.build()


def audio(n, shape, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(-32768, 32768, (n, *shape)).astype(np.int16)
    t = np.arange(shape[-1])
    x[1] = (12000 * np.sin(t * 0.3) + rng.integers(-300, 300, shape)).astype(np.int16)
    x[2] = 0
    x[3] = -32768
    return x


@pytest.mark.parametrize("length,in_shape", [
    (512, [480]),          # micro_speech: radices 4 x 4 x 4 x 4, zero-padded frame
    (64, [2, 64]),         # 4 x 4 x 2, two frames
    (48, [3, 40]),         # 4 x 2 x 3
    (40, [40]),            # 4 x 5
    (30, [30]),            # 3 x 5
    (4, [3]),              # 2
])
def test_rfft(tmp_path, length, in_shape):
    assert_matches_tflm(rfft_model(in_shape, length), [audio(5, in_shape, length)], tmp_path)


def test_kiss_factors():
    assert kiss_factors(256) == [(4, 64), (4, 16), (4, 4), (4, 1)]
    assert kiss_factors(32) == [(4, 8), (4, 2), (2, 1)]
    assert kiss_factors(15) == [(3, 5), (5, 1)]


def test_rfft_refuses_radix_7(tmp_path):
    p = tmp_path / "m.tflite"
    p.write_bytes(rfft_model([28], 28))
    with pytest.raises(EerieError, match="prime factor above 5"):
        compile_model(p)
