"""Shapes the ops determine where the file stores others (frontend/tflite_shapes.py): a Keras
dilated Conv1D with an unknown batch, laid out as the converter writes it (SPACE_TO_BATCH_ND
with block [d] and paddings, EXPAND_DIMS, CONV_2D, SQUEEZE, BATCH_TO_SPACE_ND with crops) and
its batch-1 placeholder shapes between the pair. The reference is LiteRT's reference kernels
(TFLM trusts the stored shapes and is wrong here; the test shows that too)."""
import numpy as np
import pytest

from conftest import assert_float_close, eerie_run, random_inputs, tflm_run
from eerie_c.errors import EerieError
from int4_models import litert_run  # one inference per record on LiteRT's reference kernels
from tflite_builder import ACT, PAD, ModelBuilder

QX, QY = dict(scale=0.05, zero_point=-3), dict(scale=0.2, zero_point=5)


def dilated_conv1d(dtype, length, c_in, c_out, k, d, padding="VALID", stored_batch=1, act="RELU",
                   use_reshape=False, seed=0):
    """(model, output shape): TF's dilated conv1d by space-to-batch, the tensors between
    SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND stored with batch `stored_batch` (the converter's
    placeholder 1; d is what the ops make)."""
    rng = np.random.default_rng(seed)
    base = (k - 1) * d if padding == "SAME" else 0
    pad0 = base // 2
    padded = length + base
    extra = -padded % d                    # TF pads the end up to a multiple of the block
    pads, lp = [[pad0, base - pad0 + extra]], (padded + extra) // d
    lc = lp - k + 1                        # VALID conv on each of the d phases
    out_len = length if padding == "SAME" else length - (k - 1) * d
    crops = [[0, lc * d - out_len]]
    q8 = dtype == "int8"
    mb = ModelBuilder()
    x = mb.input([1, length, c_in], dtype, **(QX if q8 else {}))
    s2b = mb.tensor([stored_batch, lp, c_in], dtype, **(QX if q8 else {}))
    mb.op("SPACE_TO_BATCH_ND", [x, mb.const(np.array([d], np.int32), "int32"),
                                mb.const(np.array(pads, np.int32), "int32")], [s2b])
    e = mb.tensor([stored_batch, 1, lp, c_in], dtype, **(QX if q8 else {}))
    if use_reshape:
        mb.op("RESHAPE", [s2b, mb.const(np.array([-1, 1, lp, c_in], np.int32), "int32")], [e])
    else:
        mb.op("EXPAND_DIMS", [s2b, mb.const(np.array(1, np.int32), "int32")], [e])
    wshape = (c_out, 1, k, c_in)
    if q8:
        ws = rng.uniform(0.005, 0.02, c_out)
        w = mb.const(rng.integers(-127, 128, wshape), "int8", scale=ws, zero_point=[0] * c_out, axis=0)
        b = mb.const(rng.integers(-3000, 3000, c_out), "int32", scale=QX["scale"] * ws,
                     zero_point=[0] * c_out, axis=0)
    else:
        w = mb.const(rng.standard_normal(wshape) * 0.4, "float32")
        b = mb.const(rng.standard_normal(c_out), "float32")
    conv = mb.tensor([stored_batch, 1, lc, c_out], dtype, **(QY if q8 else {}))
    mb.op("CONV_2D", [e, w, b], [conv], "Conv2DOptions", padding=PAD["VALID"], strideH=1, strideW=1,
          dilationHFactor=1, dilationWFactor=1, fusedActivationFunction=ACT[act])
    sq = mb.tensor([stored_batch, lc, c_out], dtype, **(QY if q8 else {}))
    mb.op("SQUEEZE", [conv], [sq], "SqueezeOptions", squeezeDims=[1])
    y = mb.tensor([1, out_len, c_out], dtype, **(QY if q8 else {}))
    mb.op("BATCH_TO_SPACE_ND", [sq, mb.const(np.array([d], np.int32), "int32"),
                                mb.const(np.array(crops, np.int32), "int32")], [y])
    mb.output(y)
    return mb.build(), (1, out_len, c_out)




CASES = [  # length, c_in, c_out, k, d, padding
    (20, 3, 4, 3, 2, "VALID"),
    (21, 3, 5, 3, 2, "SAME"),
    (30, 2, 3, 2, 4, "SAME"),
    (17, 4, 4, 3, 3, "VALID"),
]


RUNS = [(c, dt, False) for c in CASES for dt in ("int8", "float32")] + \
    [(CASES[1], dt, True) for dt in ("int8", "float32")]   # RESHAPE [-1, 1, L, C] for EXPAND_DIMS


@pytest.mark.parametrize("case,dtype,use_reshape", RUNS,
                         ids=lambda v: "-".join(map(str, v)) if isinstance(v, tuple) else str(v))
def test_dilated_conv1d_matches_litert(tmp_path, dtype, case, use_reshape):
    length, c_in, c_out, k, d, padding = case
    model, out_shape = dilated_conv1d(dtype, length, c_in, c_out, k, d, padding,
                                      use_reshape=use_reshape)
    xs = random_inputs([1, length, c_in], dtype, 3, seed=2)
    ref = litert_run(model, xs)
    got, rep = eerie_run(model, [xs], tmp_path)
    assert got[0].shape == ref.shape == (3, *out_shape)
    if dtype == "int8":
        np.testing.assert_array_equal(got[0], ref)
        assert len(np.unique(ref)) > 10
    else:
        assert_float_close(got[0], ref)
    # the same layer with the shapes stored right: the same result, no notes
    good, _ = dilated_conv1d(dtype, length, c_in, c_out, k, d, padding, stored_batch=d,
                             use_reshape=use_reshape)
    got2, rep2 = eerie_run(good, [xs], tmp_path, name="good")
    np.testing.assert_array_equal(got2[0], got[0])
    assert not rep2.get("notes")
    # the report names each replaced tensor (S2B, EXPAND_DIMS / RESHAPE, CONV_2D, SQUEEZE outputs)
    notes = [n for n in rep.get("notes", []) if "stored shape" in n]
    assert len(notes) == 4, notes
    assert all(f"replaced by [{d}," in n and "LiteRT" in n for n in notes), notes


def test_tflm_is_wrong_on_placeholder_shapes(tmp_path):
    """Why LiteRT is the reference: TFLM runs the stored batch-1 shapes and differs."""
    model, _ = dilated_conv1d("float32", 20, 3, 4, 3, 2, "VALID")
    xs = random_inputs([1, 20, 3], "float32", 1, seed=2)
    assert not np.allclose(tflm_run(model, [xs])[0], litert_run(model, xs), atol=1e-3)


def test_inconsistent_shapes_refused(tmp_path):
    """A RESHAPE to a fixed shape that cannot hold the d batches SPACE_TO_BATCH_ND makes: no
    shape is consistent, so it is refused in one line."""
    mb = ModelBuilder()
    x = mb.input([1, 8, 2], "float32")
    s = mb.tensor([1, 4, 2], "float32")
    mb.op("SPACE_TO_BATCH_ND", [x, mb.const(np.array([2], np.int32), "int32"),
                                mb.const(np.array([[0, 0]], np.int32), "int32")], [s])
    r = mb.tensor([1, 1, 4, 2], "float32")
    mb.op("RESHAPE", [s, mb.const(np.array([1, 1, 4, 2], np.int32), "int32")], [r])
    mb.output(r)
    with pytest.raises(EerieError, match=r"RESHAPE.*stored shape \[1, 4, 2\] is really \[2, 4, 2\]"):
        eerie_run(mb.build(), [random_inputs([1, 8, 2], "float32", 1)], tmp_path)
