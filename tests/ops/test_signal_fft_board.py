"""SignalRfft and SignalIrfft in every dtype TFLM runs, built once as firmware and run in QEMU
on mps2-an386 (Cortex-M4F, hard float) and riscv-virt (RV32IMAFC, hard float): bit-exact with the tflite-micro runtime on the host,
float32 included (single-precision IEEE operations in KISS FFT's order, no fused multiply-adds
under -std=c99). One model, three chains: int16 at micro_speech's 512 points (radix 4 only),
int32 at 60 (2 x 3 x 5), float32 at 40 (4 x 5) then an inverse of 12 (2 x 3). Fails, never
skips, without the cross toolchain and QEMU."""
import numpy as np
import pytest

from conftest import eerie_run, require_board_tools, tflm_run
from tflite_builder import ModelBuilder
from test_signal_rfft import T_CODE, signals

# dtype -> (input frame shape, forward length, inverse length)
CHAINS = {"int16": ([2, 480], 512, 512), "int32": ([3, 60], 60, 60), "float32": ([40], 40, 12)}


def fft_chains_model():
    """Per dtype: x -> SignalRfft -> spectrum (an output) -> SignalIrfft -> signal (an output)."""
    mb = ModelBuilder()
    for dtype, (shape, fwd, inv) in CHAINS.items():
        x = mb.input(shape, dtype)
        s = mb.tensor(shape[:-1] + [fwd + 2], dtype)
        y = mb.tensor(shape[:-1] + [inv], dtype)
        mb.custom_op("SignalRfft", [x], [s], {"T": T_CODE[dtype], "fft_length": fwd})
        # the inverse reads the first inv / 2 + 1 bins of each spectrum frame (fwd + 2 values)
        mb.custom_op("SignalIrfft", [s], [y], {"T": T_CODE[dtype], "fft_length": inv})
        mb.output(s)
        mb.output(y)
    return mb.build()


@pytest.mark.parametrize("board", ["mps2-an386", "riscv-virt"])
def test_fft_chains_on_board(tmp_path, board):
    require_board_tools(board)
    model = fft_chains_model()
    feeds = [signals(5, shape, fwd, dtype) for dtype, (shape, fwd, _) in CHAINS.items()]
    ref = tflm_run(model, feeds)
    got, report = eerie_run(model, feeds, tmp_path, board=board)
    assert report["board"] == board
    assert len(got) == len(ref) == 6
    for k, (g, r) in enumerate(zip(got, ref)):
        assert g.dtype == r.dtype, k
        np.testing.assert_array_equal(g, r, err_msg=f"output {k}")
