"""TFLM's SignalRfft (int16 / int32 KISS FFT fixed point, float32; kernels/signal_rfft.py) vs
the tflite-micro runtime: micro_speech's 512-point transform of 480-sample frames, lengths
whose halves factor into every KISS FFT radix (4, 2, 3, 5), several frames per invocation,
full-scale noise and the extremes where KISS FFT's int16 / int32 sums wrap."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, eerie_run, tflm_run
from tflite_builder import ModelBuilder

from eerie_c.api import compile_model
from eerie_c.errors import EerieError
from eerie_c.kernels.signal_rfft import kiss_factors

T_CODE = {"float32": 0, "int32": 2, "int16": 7}


def rfft_model(in_shape, length, dtype="int16", t_code=None):
    mb = ModelBuilder()
    x = mb.input(in_shape, dtype)
    y = mb.tensor(list(in_shape[:-1]) + [length + 2], dtype)
    mb.custom_op("SignalRfft", [x], [y], {"T": T_CODE[dtype] if t_code is None else t_code,
                                          "fft_length": length})
    mb.output(y)
    return mb.build()


def signals(n, shape, seed, dtype="int16"):
    """Full-scale noise, a sine with noise, zeros, the most negative value, the largest."""
    rng = np.random.default_rng(seed)
    t = np.arange(shape[-1])
    if dtype == "float32":
        x = (rng.standard_normal((n, *shape)) * 1000).astype(np.float32)
        x[1] = (3000 * np.sin(t * 0.3) + rng.standard_normal(shape)).astype(np.float32)
        x[2] = 0
        x[3] = -1e30
        x[4] = rng.uniform(-1, 1, shape).astype(np.float32)
        return x
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, (n, *shape), endpoint=True).astype(dtype)
    x[1] = (0.37 * info.max * np.sin(t * 0.3) + rng.integers(-300, 300, shape)).astype(dtype)
    x[2] = 0
    x[3] = info.min
    x[4] = info.max
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
    assert_matches_tflm(rfft_model(in_shape, length), [signals(5, in_shape, length)], tmp_path)


@pytest.mark.parametrize("dtype", ["int32", "float32"])
@pytest.mark.parametrize("length,in_shape", [
    (512, [2, 400]),       # 4 x 4 x 4 x 4, two zero-padded frames
    (96, [96]),            # 4 x 4 x 3
    (60, [2, 3, 57]),      # 2 x 3 x 5, six frames
    (20, [20]),            # 2 x 5
    (4, [4]),              # 2
])
def test_rfft_int32_float(tmp_path, dtype, length, in_shape):
    """int32 bit-exact; float32 bit-exact too (KISS FFT's float order, no fused multiply-adds)."""
    model, xs = rfft_model(in_shape, length, dtype), [signals(5, in_shape, length, dtype)]
    ref = tflm_run(model, xs)[0]
    got, _ = eerie_run(model, xs, tmp_path)
    np.testing.assert_array_equal(got[0], ref)


def test_kiss_factors():
    assert kiss_factors(256) == [(4, 64), (4, 16), (4, 4), (4, 1)]
    assert kiss_factors(32) == [(4, 8), (4, 2), (2, 1)]
    assert kiss_factors(15) == [(3, 5), (5, 1)]
    assert kiss_factors(30) == [(2, 15), (3, 5), (5, 1)]


def test_rfft_refuses_radix_7(tmp_path):
    p = tmp_path / "m.tflite"
    p.write_bytes(rfft_model([28], 28))
    with pytest.raises(EerieError, match="prime factor above 5"):
        compile_model(p)


def test_rfft_refuses_a_type_option_tflm_refuses(tmp_path):
    """T names the kernel TFLM instantiates; its Prepare then fails on int32 tensors."""
    p = tmp_path / "m.tflite"
    p.write_bytes(rfft_model([16], 16, "int32", t_code=T_CODE["int16"]))
    with pytest.raises(EerieError, match="option T = 7"):
        compile_model(p)
    with pytest.raises(RuntimeError, match="failed to allocate tensors"):   # Prepare fails
        tflm_run(p, [np.zeros((1, 16), np.int32)])
