"""TFLM signal ops SignalWindow, SignalFftAutoScale and SignalEnergy (kernels/signal_window.py)
vs the tflite-micro runtime, which registers the signal library: random int16 audio frames,
silence, full-scale and -32768 samples (TFLM's int16 running maximum wraps there)."""
import numpy as np
import pytest

from conftest import assert_matches_tflm
from tflite_builder import ModelBuilder

from eerie_c.api import compile_model
from eerie_c.errors import EerieError


def frames(n, size, seed=0):
    """n int16 frames: loud and quiet random audio, silence, full scale, a -32768 sample."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-32768, 32768, (n, size)).astype(np.int16)
    x[1] //= 300                              # quiet: a large auto-scale shift
    x[2] = 0
    x[3] = np.where(np.arange(size) % 2, 32767, -32767)
    x[4, size // 3] = -32768
    return x


def window_model(shape, n, shift):
    mb = ModelBuilder()
    x = mb.input(shape, "int16")
    w = mb.const(np.round(np.hanning(n) * 4095).astype(np.int16) + 1, "int16")
    y = mb.tensor(shape, "int16")
    mb.custom_op("SignalWindow", [x, w], [y], {"shift": shift})
    mb.output(y)
    return mb


def test_window_then_auto_scale(tmp_path):
    mb = window_model([48], 48, 12)
    y = mb.outputs[0]
    s, bits = mb.tensor([48], "int16"), mb.tensor([], "int32")
    mb.custom_op("SignalFftAutoScale", [y], [s, bits])
    mb.output(s)
    mb.output(bits)
    got, _ = assert_matches_tflm(mb.build(), [frames(6, 48)], tmp_path)
    assert got[2][1] > 0 and got[2][2] == 0    # the quiet frame is scaled up, silence is not


@pytest.mark.parametrize("shift", [0, 3])
def test_window_frames_saturate(tmp_path, shift):
    # [2, 3, 16]: six frames of the window's 16 per inference; shift 0 saturates
    x = frames(5, 96).reshape(5, 2, 3, 16)
    assert_matches_tflm(window_model([2, 3, 16], 16, shift).build(), [x], tmp_path)


def test_auto_scale_alone(tmp_path):
    mb = ModelBuilder()
    x = mb.input([33], "int16")
    s, bits = mb.tensor([33], "int16"), mb.tensor([], "int32")
    mb.custom_op("SignalFftAutoScale", [x], [s, bits])
    mb.output(s)
    mb.output(bits)
    x = frames(6, 33, seed=1)
    x[5] = 1
    assert_matches_tflm(mb.build(), [x], tmp_path)


def energy_model(bins, start, end):
    mb = ModelBuilder()
    x = mb.input([2 * bins], "int16")
    y = mb.tensor([bins], "uint32")
    mb.custom_op("SignalEnergy", [x], [y], {"start_index": start, "end_index": end})
    mb.output(y)
    return mb.build()


def test_energy_all_bins(tmp_path):
    x = frames(5, 2 * 40, seed=2)
    x[0, :2] = -32768                        # |(-32768, -32768)|^2 = 2^31: wraps int32 in TFLM
    got, _ = assert_matches_tflm(energy_model(40, 0, 40), [x], tmp_path)
    assert got[0].dtype == np.uint32 and got[0][0, 0] == 2 ** 31


def test_energy_reshaped(tmp_path):
    """A uint32 tensor through RESHAPE (an alias) to the graph output."""
    mb = ModelBuilder()
    x, y = mb.input([2 * 12], "int16"), mb.tensor([12], "uint32")
    mb.custom_op("SignalEnergy", [x], [y], {"start_index": 0, "end_index": 12})
    z = mb.tensor([3, 4], "uint32")
    mb.op("RESHAPE", [y, mb.const(np.array([3, 4], np.int32), "int32")], [z])
    mb.output(z)
    assert_matches_tflm(mb.build(), [frames(5, 24, seed=4)], tmp_path)


def test_energy_range(tmp_path):
    # TFLM leaves bins outside [start, end) as the arena held them: compare the range only
    from conftest import eerie_run, tflm_run
    model, x = energy_model(40, 5, 33), frames(5, 80, seed=3)
    ref, (got, _) = tflm_run(model, [x])[0], eerie_run(model, [x], tmp_path)
    np.testing.assert_array_equal(got[0][:, 5:33], ref[:, 5:33])
    assert not got[0][:, :5].any() and not got[0][:, 33:].any()


def test_window_shift_out_of_range(tmp_path):
    p = tmp_path / "m.tflite"
    p.write_bytes(window_model([16], 16, 40).build())
    with pytest.raises(EerieError, match="shift = 40"):
        compile_model(p)
