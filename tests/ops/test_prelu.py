"""PRELU vs TFLM: int8 (all 256 input values against every alpha value, constant per-channel
alpha, activation alpha), float32 with broadcasting; 4-D broadcasting of an activation alpha
(input and alpha both broadcast too); 5-D and 6-D (beyond TFLM) against TFLM's arithmetic on
operands numpy broadcasts."""
import numpy as np
import pytest

from conftest import assert_float_close, assert_matches_tflm, eerie_run, random_inputs, tflm_run
from tflite_builder import ModelBuilder, op_fan


def prelu_model(x_shape, a_shape, dtype, alpha=None, q=((0.05, -3), (0.01, 4), (0.04, 7))):
    mb = ModelBuilder()
    qs = [dict(scale=s, zero_point=z) for s, z in q] if dtype == "int8" else [{}, {}, {}]
    x = mb.input(x_shape, dtype, **qs[0])
    a = mb.const(alpha, dtype, **qs[1]) if alpha is not None else mb.input(a_shape, dtype, **qs[1])
    y = mb.tensor(x_shape, dtype, **qs[2])
    mb.op("PRELU", [x, a], [y])
    mb.output(y)
    return mb.build()


@pytest.mark.parametrize("q", [((0.05, -3), (0.01, 4), (0.04, 7)), ((0.1, 0), (0.003, -128), (0.2, -20)),
                               ((0.02, 100), (0.05, 0), (0.01, -100))])
def test_prelu_int8_all_pairs(tmp_path, q):
    x = np.repeat(np.arange(-128, 128, dtype=np.int8), 256).reshape(1, 256, 256)
    a = np.tile(np.arange(-128, 128, dtype=np.int8), 256).reshape(1, 256, 256)
    assert_matches_tflm(prelu_model([256, 256], [256, 256], "int8", q=q), [x, a], tmp_path)


def test_prelu_int8_const_channel_alpha(tmp_path):
    alpha = np.random.default_rng(0).integers(-128, 128, (1, 1, 6))
    model = prelu_model([2, 4, 5, 6], None, "int8", alpha=alpha)
    assert_matches_tflm(model, [random_inputs([2, 4, 5, 6], "int8", 3, seed=1)], tmp_path)


def test_prelu_float(tmp_path):
    alpha = np.random.default_rng(0).uniform(-0.5, 0.5, (1, 1, 6)).astype(np.float32)
    model = prelu_model([2, 4, 5, 6], None, "float32", alpha=alpha)
    assert_matches_tflm(model, [random_inputs([2, 4, 5, 6], "float32", 3, seed=1)], tmp_path)
    model = prelu_model([3, 7], [7], "float32")
    assert_matches_tflm(model, [random_inputs([3, 7], "float32", 3, seed=2),
                                random_inputs([7], "float32", 3, seed=3)], tmp_path)


PRELU_Q = [(0.05, -3), (0.01, 4), (0.04, 7)]
DTYPE_Q = {"float32": None, "int8": PRELU_Q}


def fan(dtypes, shape_pairs):
    return op_fan([([("PRELU", [dt, dt], dt, DTYPE_Q[dt], None, None) for dt in dtypes], shape_pairs)])


def operands(inputs, n=3):
    return [random_inputs(shape, dt, n, seed=k, scale=2.0) for k, (shape, dt, _, _) in enumerate(inputs)]


def test_prelu_4d_activation_alpha(tmp_path):
    """alpha a model input, broadcast per channel, from a lower rank, and both operands
    broadcast; float32 and int8 in one model."""
    model, inputs, labels = fan(["float32", "int8"], [([2, 3, 4, 5], [1, 3, 1, 5]), ([2, 3, 4, 5], [4, 1]),
                                                       ([2, 1, 3, 1], [1, 2, 1, 4])])
    assert_matches_tflm(model, operands(inputs), tmp_path, labels=labels)


def test_prelu_5d_6d_broadcast(tmp_path):
    """TFLM's PRELU stops at 4-D (a 5-D model aborts its process, so it is not run here); eerie-c
    broadcasts up to 6-D. PRELU is element-wise: the reference is TFLM's PRELU on 1-D operands
    that numpy broadcast to the output shape (TFLM's arithmetic, numpy's broadcasting)."""
    pairs = [([2, 1, 3, 1, 2], [1, 2, 1, 4, 2]), ([2, 1, 3, 1, 2, 3], [2, 1, 4, 1, 1])]
    model, inputs, labels = fan(["float32", "int8"], pairs)
    xs = operands(inputs)
    got, _ = eerie_run(model, xs, tmp_path)
    flat_shapes, flat = [], []
    for x, alpha in zip(xs[0::2], xs[1::2]):
        rank = max(x.ndim, alpha.ndim)           # batch dim first: pad each operand's rank
        xb, ab = np.broadcast_arrays(*(a.reshape(len(a), *[1] * (rank - a.ndim), *a.shape[1:])
                                       for a in (x, alpha)))
        flat_shapes.append(([xb[0].size], [xb[0].size]))
        flat += [xb.reshape(len(xb), -1).copy(), ab.reshape(len(ab), -1).copy()]
    ref_model = op_fan([([("PRELU", [dt, dt], dt, DTYPE_Q[dt], None, None)], [s])
                        for dt, s in zip(["float32"] * 2 + ["int8"] * 2, flat_shapes)])[0]
    ref = tflm_run(ref_model, flat)
    assert len(got) == len(ref) == 4
    for g, r, label in zip(got, ref, labels):
        r = r.reshape(g.shape)
        if g.dtype == np.float32:
            assert_float_close(g, r, what=label)
        else:
            np.testing.assert_array_equal(g, r, err_msg=label)


@pytest.mark.parametrize("const_alpha", [True, False])
def test_prelu_int16(tmp_path, const_alpha):
    """int16 input and output with an int8 alpha (TFLM's rule), per-channel broadcast."""
    mb = ModelBuilder()
    x = mb.input([2, 3, 4, 5], "int16", scale=0.0005, zero_point=0)
    alpha = np.random.default_rng(2).integers(-128, 128, (5,)).astype(np.int8)
    q = dict(scale=0.01, zero_point=3)
    a = mb.const(alpha, "int8", **q) if const_alpha else mb.input([5], "int8", **q)
    y = mb.tensor([2, 3, 4, 5], "int16", scale=0.0004, zero_point=0)
    mb.op("PRELU", [x, a], [y])
    mb.output(y)
    feeds = [random_inputs([2, 3, 4, 5], "int16", 3, seed=5)]
    if not const_alpha:
        feeds.append(np.stack([alpha] * 3))
    assert_matches_tflm(mb.build(), feeds, tmp_path)
