"""TFLM's micro_speech audio preprocessor (examples/micro_speech/models/
audio_preprocessor_int8.tflite, from tflite-micro: every signal-library op of the audio front
end plus CAST / STRIDED_SLICE / CONCATENATION / int32 arithmetic, UINT32 and UINT64 tensors)
bit-exact with the tflite-micro runtime over consecutive 30 ms frames (its noise estimate
carries from frame to frame), on the host and in QEMU on mps2-an386 (Cortex-M4) and microbit (Cortex-M0)."""
import wave
from pathlib import Path

import numpy as np
import pytest

from conftest import eerie_run, tflm_run

EX = Path(__file__).resolve().parents[2] / "examples" / "micro_speech"
MODEL = EX / "models" / "audio_preprocessor_int8.tflite"


def clip_frames(name: str, n: int) -> np.ndarray:
    """The first n 30 ms frames (480 samples, 20 ms apart) of a 16 kHz clip, as [n, 1, 480]."""
    with wave.open(str(EX / "audio" / name)) as w:
        a = np.frombuffer(w.readframes(w.getnframes()), np.int16)
    return np.stack([a[i * 320:i * 320 + 480] for i in range(n)]).reshape(n, 1, 480)


def frames(n: int) -> np.ndarray:
    """Speech, then loud noise, silence and full-scale frames."""
    x = np.concatenate([clip_frames("yes_1000ms.wav", n - 4),
                        np.random.default_rng(0).integers(-32768, 32768, (4, 1, 480)).astype(np.int16)])
    x[-2] = 0
    x[-1, 0, ::2] = -32768
    return x


def test_preprocessor_host(tmp_path):
    x = frames(40)
    ref = tflm_run(MODEL, [x])[0]
    got, report = eerie_run(MODEL, [x], tmp_path)
    np.testing.assert_array_equal(got[0], ref)
    assert report["state_bytes"] == 40 * 4          # the spectral subtraction's noise estimate
    assert len(np.unique(ref)) > 20


@pytest.mark.parametrize("board", ["mps2-an386", "microbit"])   # Cortex-M4, and M0: 64-bit via libgcc
def test_preprocessor_on_board(tmp_path, board_tools, board):
    x = frames(12)
    got, report = eerie_run(MODEL, [x], tmp_path, board=board)
    np.testing.assert_array_equal(got[0], tflm_run(MODEL, [x])[0])
    assert report["board"] == board
