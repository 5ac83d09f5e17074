"""SPACE_TO_DEPTH, DEPTH_TO_SPACE, BATCH_TO_SPACE_ND (crops), SPACE_TO_BATCH_ND (padding)
vs TFLM, float32 and int8, 3-D and 4-D, block sizes 1..3.

TFLM's SPACE_TO_BATCH_ND pads with an uninitialised value (its params.output_offset is never
set), so padding positions are checked against real 0 (the zero point for int8) with a numpy
reference, and every other position bit-exact against TFLM."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, eerie_run, random_inputs, tflm_run
from tflite_builder import ModelBuilder

Q = dict(scale=0.05, zero_point=-4)


def model(dtype, kind, in_shape, out_shape, extra=(), options=None, **fields):
    mb = ModelBuilder()
    q = Q if dtype == "int8" else {}
    x = mb.input(list(in_shape), dtype, **q)
    ins = [x] + [mb.const(np.array(v, np.int32), "int32") for v in extra]
    y = mb.tensor(list(out_shape), dtype, **q)
    mb.op(kind, ins, [y], options, **fields)
    mb.output(y)
    return mb.build()


def run(tmp_path, dtype, kind, in_shape, out_shape, extra=(), options=None, **fields):
    assert_matches_tflm(model(dtype, kind, in_shape, out_shape, extra, options, **fields),
                        [random_inputs(in_shape, dtype, 2)], tmp_path)


@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("shape,bs", [((1, 4, 6, 2), 2), ((2, 6, 3, 5), 3), ((1, 2, 2, 1), 2),
                                      ((1, 3, 3, 4), 1)])
def test_space_to_depth(tmp_path, dtype, shape, bs):
    b, h, w, c = shape
    run(tmp_path, dtype, "SPACE_TO_DEPTH", shape, (b, h // bs, w // bs, c * bs * bs),
        options="SpaceToDepthOptions", blockSize=bs)


@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("shape,bs", [((1, 2, 3, 8), 2), ((2, 2, 1, 18), 3), ((1, 1, 1, 4), 2)])
def test_depth_to_space(tmp_path, dtype, shape, bs):
    b, h, w, c = shape
    run(tmp_path, dtype, "DEPTH_TO_SPACE", shape, (b, h * bs, w * bs, c // (bs * bs)),
        options="DepthToSpaceOptions", blockSize=bs)


B2S = [  # input shape, block, crops, output shape
    ((4, 2, 3, 2), [2, 2], [[0, 0], [0, 0]], (1, 4, 6, 2)),
    ((8, 2, 3, 3), [2, 2], [[1, 0], [0, 2]], (2, 3, 4, 3)),
    ((6, 3, 2, 1), [3, 2], [[2, 1], [1, 1]], (1, 6, 2, 1)),
    ((6, 4, 5), [3], [[1, 2]], (2, 9, 5)),
]


@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("case", B2S)
def test_batch_to_space_nd(tmp_path, dtype, case):
    shape, block, crops, out = case
    run(tmp_path, dtype, "BATCH_TO_SPACE_ND", shape, out, extra=(block, crops))


S2B = [  # input shape, block, paddings, output shape
    ((1, 4, 6, 2), [2, 2], [[0, 0], [0, 0]], (4, 2, 3, 2)),
    ((1, 3, 5, 2), [2, 2], [[1, 0], [0, 1]], (4, 2, 3, 2)),
    ((2, 4, 4, 3), [3, 2], [[1, 1], [2, 0]], (12, 2, 3, 3)),
    ((2, 5, 3), [2], [[0, 1]], (4, 3, 3)),
]


@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("case", S2B)
def test_space_to_batch_nd(tmp_path, dtype, case):
    shape, block, pads, out = case
    data = model(dtype, "SPACE_TO_BATCH_ND", shape, out, extra=(block, pads))
    xs = random_inputs(shape, dtype, 2)
    got = eerie_run(data, [xs], tmp_path)[0][0]
    ref = tflm_run(data, [xs])[0]
    # numpy reference: pad with real 0, then move each block of the padded space to a batch
    zp = Q["zero_point"] if dtype == "int8" else 0
    x4 = xs if len(shape) == 4 else xs[..., None]
    bl = list(block) + [1] * (2 - len(block))
    pd = list(pads) + [[0, 0]] * (2 - len(pads))
    p = np.pad(x4, [(0, 0), (0, 0), tuple(pd[0]), tuple(pd[1]), (0, 0)], constant_values=zp)
    n, b, hp, wp, c = p.shape
    want = p.reshape(n, b, hp // bl[0], bl[0], wp // bl[1], bl[1], c).transpose(0, 3, 5, 1, 2, 4, 6)
    want = want.reshape(n, *out)
    np.testing.assert_array_equal(got, want)
    inside = np.pad(np.ones(x4.shape[1:], bool), [(0, 0), tuple(pd[0]), tuple(pd[1]), (0, 0)])
    inside = inside.reshape(b, hp // bl[0], bl[0], wp // bl[1], bl[1], c).transpose(2, 4, 0, 1, 3, 5)
    inside = inside.reshape(out)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    np.testing.assert_array_equal(got[:, inside], ref[:, inside])
