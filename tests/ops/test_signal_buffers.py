"""TFLM signal ops with history across invocations (kernels/signal_buffers.py): SignalDelay,
SignalFramer, SignalStacker, SignalOverlapAdd vs the tflite-micro runtime over several
consecutive invocations (their state carries from one to the next)."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, eerie_run, tflm_run
from tflite_builder import ModelBuilder

RNG = np.random.default_rng(11)


def one_op(name, in_shape, in_dtype, outs, options):
    mb = ModelBuilder()
    x = mb.input(in_shape, in_dtype)
    ys = [mb.tensor(shape, dt) for shape, dt in outs]
    mb.custom_op(name, [x], ys, options)
    for y in ys:
        mb.output(y)
    return mb.build()


def audio(n, shape):
    return RNG.integers(-32768, 32768, (n, *shape)).astype(np.int16)


@pytest.mark.parametrize("shape,delay", [([2, 6], 4), ([5], 9), ([3], 0)])
def test_delay(tmp_path, shape, delay):
    model = one_op("SignalDelay", shape, "int16", [(shape, "int16")], {"delay_length": delay})
    assert_matches_tflm(model, [audio(5, shape)], tmp_path)


@pytest.mark.parametrize("prefill", [True, False])
def test_framer(tmp_path, prefill):
    # rows of 8 samples, frames of 6 every 4: two frames per row and call
    model = one_op("SignalFramer", [2, 8], "int16", [([2, 2, 6], "int16"), ([], "bool")],
                   {"frame_size": 6, "frame_step": 4, "prefill": prefill})
    x = audio(5, [2, 8])
    ref, (got, _) = tflm_run(model, [x]), eerie_run(model, [x], tmp_path)
    np.testing.assert_array_equal(got[1], ref[1])
    assert ref[1].tolist() == [prefill, True, True, True, True]
    valid = ref[1].astype(bool)        # an incomplete frame's output is whatever it was
    np.testing.assert_array_equal(got[0][valid], ref[0][valid])


@pytest.mark.parametrize("left,right,step", [(2, 1, 1), (0, 2, 3), (3, 0, 2)])
def test_stacker(tmp_path, left, right, step):
    channels = 5
    span = left + right + 1
    model = one_op("SignalStacker", [channels], "int16", [([channels * span], "int16"), ([], "bool")],
                   {"num_channels": channels, "stacker_left_context": left,
                    "stacker_right_context": right, "stacker_step": step})
    x = audio(7, [channels])
    ref, (got, _) = tflm_run(model, [x]), eerie_run(model, [x], tmp_path)
    np.testing.assert_array_equal(got[1], ref[1])
    valid = ref[1].astype(bool)
    assert valid.sum() >= 2
    np.testing.assert_array_equal(got[0][valid], ref[0][valid])


@pytest.mark.parametrize("dtype,code", [("int16", 7), ("float32", 0)])
def test_overlap_add(tmp_path, dtype, code):
    shape = [2, 3, 8]                  # 2 rows of 3 frames of 8, step 3
    model = one_op("SignalOverlapAdd", shape, dtype, [([2, 9], dtype)], {"T": code, "frame_step": 3})
    x = audio(4, shape) if dtype == "int16" else RNG.standard_normal((4, *shape)).astype(np.float32)
    assert_matches_tflm(model, [x], tmp_path)
