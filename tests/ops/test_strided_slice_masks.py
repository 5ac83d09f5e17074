"""STRIDED_SLICE mask combinations vs TFLM: shrink_axis_mask together with begin / end masks,
negative begins and strides, every dim shrunk (a scalar), on int8, float32, int16, int32
and bool.

TFLM does not implement ellipsis_mask or new_axis_mask: its StridedSlice forces both to 0
and then insists the output shape matches that reading, so a model relying on them fails to
prepare there. eerie-c rejects both masks with a one-line EerieError (checked here together
with TFLM's own failure on the same models). A shrunk dim takes index 0 under begin_mask, as
TFLM does; shrinking a dim with a negative stride is rejected (TFLM writes no output)."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, eerie_run, random_inputs, tflm_run
from eerie_c.errors import EerieError
from tflite_builder import ModelBuilder

QUANT = {"int8": dict(scale=0.05, zero_point=-4), "int16": dict(scale=0.001, zero_point=0)}


def ss_model(dtype, shape, begin, end, strides, out_shape, **masks):
    mb = ModelBuilder()
    q = QUANT.get(dtype, {})
    x = mb.input(list(shape), dtype, **q)
    ins = [x] + [mb.const(np.array(v, np.int32), "int32") for v in (begin, end, strides)]
    y = mb.tensor(list(out_shape), dtype, **q)
    mb.op("STRIDED_SLICE", ins, [y], "StridedSliceOptions", **masks)
    mb.output(y)
    return mb.build()


def inputs_for(shape, dtype):
    if dtype == "int32":
        return np.random.default_rng(0).integers(-1000, 1000, (2, *shape)).astype(np.int32)
    if dtype == "bool":
        return np.random.default_rng(0).integers(0, 2, (2, *shape)).astype(np.bool_)
    return random_inputs(shape, dtype, 2)


def cases_model(dtype, cases):
    """One STRIDED_SLICE per case, each on its own input, in one model (one compile)."""
    mb = ModelBuilder()
    q = QUANT.get(dtype, {})
    for shape, begin, end, strides, out_shape, masks in cases:
        x = mb.input(list(shape), dtype, **q)
        ins = [x] + [mb.const(np.array(v, np.int32), "int32") for v in (begin, end, strides)]
        y = mb.tensor(list(out_shape), dtype, **q)
        mb.op("STRIDED_SLICE", ins, [y], "StridedSliceOptions", **masks)
        mb.output(y)
    return mb.build()


# shape, begin, end, strides, output shape, masks
SHRINK = [
    ((4, 6), (-1, 0), (0, 6), (1, 1), (6,), dict(shrinkAxisMask=1)),
    ((2, 3, 4), (0, -2, 1), (0, 0, 0), (1, 1, 1), (2, 4),
     dict(beginMask=5, endMask=5, shrinkAxisMask=2)),
    ((3, 4, 5), (2, -1, 0), (0, -5, 5), (1, -1, 2), (4, 3), dict(shrinkAxisMask=1)),
    ((2, 3), (1, -1), (0, 0), (1, 1), (), dict(shrinkAxisMask=3)),
    ((3, 4), (0, 2), (3, 3), (1, 1), (3,), dict(beginMask=2, shrinkAxisMask=2)),
    ((3, 4), (0, -3), (3, 0), (1, 1), (3,), dict(endMask=2, shrinkAxisMask=2)),
    ((2, 3, 4, 5), (1, 0, 1, -2), (2, 3, 0, 0), (1, 2, 1, 1), (2, 3),
     dict(endMask=4, shrinkAxisMask=9)),
    ((5, 4), (4, 1), (0, 3), (-2, 1), (3,), dict(endMask=1, shrinkAxisMask=2)),
]


@pytest.mark.parametrize("dtype", ["int8", "float32", "int16", "int32", "bool"])
def test_strided_slice_shrink_with_masks(tmp_path, dtype):
    got, _ = assert_matches_tflm(cases_model(dtype, SHRINK),
                                 [inputs_for(c[0], dtype) for c in SHRINK], tmp_path)
    assert [g.shape[1:] for g in got] == [c[4] for c in SHRINK]


# models whose TFLite meaning needs the mask (the output shape differs when it is ignored)
UNSUPPORTED = [
    ("ellipsis_mask", ((2, 3, 4), (1, 0, 0), (2, 3, 4), (1, 1, 1), (2, 3, 4),
                       dict(ellipsisMask=1))),
    ("ellipsis_mask", ((2, 3, 4), (0, 0, 1), (0, 0, 3), (1, 1, 1), (2, 3, 2),
                       dict(ellipsisMask=2, shrinkAxisMask=0))),
    ("new_axis_mask", ((2, 3), (0, 0), (1, 3), (1, 1), (1, 2, 3), dict(newAxisMask=1))),
    ("new_axis_mask", ((2, 3), (0, 1), (2, 0), (1, 1), (2, 1, 3),
                       dict(newAxisMask=2, endMask=2))),
]


@pytest.mark.parametrize("mask,case", UNSUPPORTED)
def test_strided_slice_ellipsis_new_axis_rejected(tmp_path, mask, case):
    shape, b, e, s, out, masks = case
    model = ss_model("float32", shape, b, e, s, out, **masks)
    x = inputs_for(shape, "float32")
    with pytest.raises(RuntimeError):
        tflm_run(model, [x])          # TFLM cannot run it either
    with pytest.raises(EerieError, match=mask):
        eerie_run(model, [x], tmp_path)


def test_strided_slice_shrink_negative_stride_rejected(tmp_path):
    model = ss_model("float32", (3, 4), (0, 1), (3, 0), (1, -1), (3,), shrinkAxisMask=2)
    with pytest.raises(EerieError, match="negative stride"):
        eerie_run(model, [inputs_for((3, 4), "float32")], tmp_path)
