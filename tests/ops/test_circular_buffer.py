"""CIRCULAR_BUFFER (TFLM's custom op) vs TFLM: the int8 buffer is a variable tensor carried
across consecutive invocations (one interpreter / one firmware run), period 1 given by the
options or by TFLM's rule for 5 / 13 / 25 slots; other periods are refused."""
import numpy as np
import pytest

from conftest import assert_matches_tflm
from tflite_builder import ModelBuilder

from eerie_c.api import compile_model
from eerie_c.errors import EerieError

Q = dict(scale=0.05, zero_point=-7)


def cb_model(slots, h, w, options, variable=True):
    mb = ModelBuilder()
    x = mb.input([1, 1, h, w], "int8", **Q)
    buf = mb.tensor([1, slots, h, w], "int8", variable=variable, **Q)
    mb.custom_op("CIRCULAR_BUFFER", [x], [buf], options)
    y = mb.tensor([1, slots, h, w], "int8", scale=0.1, zero_point=3)
    mb.op("QUANTIZE", [buf], [y])          # the buffer itself cannot be a model output
    mb.output(y)
    return mb.build()


@pytest.mark.parametrize("slots,h,w,options", [(4, 1, 8, {"cycles_max": 1}), (5, 2, 3, None),
                                               (13, 1, 1, {"cycles_max": 0})])
def test_circular_buffer(tmp_path, slots, h, w, options):
    xs = np.random.default_rng(slots).integers(-128, 128, (slots + 3, 1, 1, h, w)).astype(np.int8)
    got, _ = assert_matches_tflm(cb_model(slots, h, w, options), [xs], tmp_path)
    assert len(np.unique(got[0][-1])) > 1     # the buffer filled up


@pytest.mark.parametrize("options,variable,match", [({"cycles_max": 2}, True, "period of 2"),
                                                    (None, True, "TFLM-guessed 2"),
                                                    ({"cycles_max": 1}, False, "variable tensor")])
def test_refused(tmp_path, options, variable, match):
    p = tmp_path / "cb.tflite"
    p.write_bytes(cb_model(4, 1, 8, options, variable))
    with pytest.raises(EerieError, match=match):
        compile_model(p)
