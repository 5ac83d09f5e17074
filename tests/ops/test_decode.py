"""TFLM_DECODE (TFLM's custom op for compressed weights) vs TFLM: look-up-table compressed
constants, decoded at compile time. Per-channel tables along dimension 0 (FULLY_CONNECTED
weights) and along the last dimension, bit widths 1..7, a decoded model output, and the
schemes not supported (Huffman) refused."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, random_inputs
from tflite_builder import ModelBuilder

from eerie_c.api import compile_model
from eerie_c.errors import EerieError


def lut_encode(values: np.ndarray, axis: int | None, width: int, decode_type: int = 0):
    """(encoded bytes, ancillary bytes) of `values` with one value table per channel."""
    v = np.asarray(values)
    if axis is None:
        chans = [v.reshape(-1)]
    else:
        chans = [np.take(v, c, axis=axis).reshape(-1) for c in range(v.shape[axis])]
    tables = [sorted(set(c.tolist())) for c in chans]
    stride = max(len(t) for t in tables)
    assert stride <= 1 << width
    flat = v.reshape(-1)
    n = flat.size
    pos = np.arange(n)
    if axis is None:
        chan = np.zeros(n, int)
    elif axis == 0:
        chan = pos // (n // v.shape[0])
    else:
        chan = pos % v.shape[-1]
    idx = np.array([tables[c].index(x) for c, x in zip(chan, flat.tolist())])
    bits = ((idx[:, None] >> np.arange(width - 1, -1, -1)) & 1).astype(np.uint8).reshape(-1)
    encoded = np.packbits(bits)
    value_bytes = b"".join(np.array(t + [t[0]] * (stride - len(t)), v.dtype).tobytes() for t in tables)
    header = bytes([decode_type, 1, 0, 0, 1, width, stride]) + bytes(9)
    return encoded, np.frombuffer(header + value_bytes, np.uint8)


def fc_model(width, decode_type=0):
    mb = ModelBuilder()
    rng = np.random.default_rng(width)
    units, depth = 6, 10
    levels = rng.integers(-127, 128, (units, 1 << width))
    w = np.take_along_axis(levels, rng.integers(0, 1 << width, (units, depth)), 1).astype(np.int8)
    enc, anc = lut_encode(w, 0, width, decode_type)
    x = mb.input([2, depth], "int8", scale=0.05, zero_point=-3)
    wt = mb.tensor([units, depth], "int8", scale=[0.01 + 0.002 * k for k in range(units)],
                   zero_point=[0] * units, axis=0)
    mb.custom_op("TFLM_DECODE", [mb.const(enc, "uint8"), mb.const(anc, "uint8")], [wt])
    y = mb.tensor([2, units], "int8", scale=0.2, zero_point=4)
    mb.op("FULLY_CONNECTED", [x, wt, -1], [y], "FullyConnectedOptions")
    mb.output(y)
    return mb.build()


@pytest.mark.parametrize("width", [1, 2, 3, 4, 7])
def test_decoded_fully_connected_weights(tmp_path, width):
    model = fc_model(width)
    assert_matches_tflm(model, [random_inputs([2, 10], "int8", 3, seed=width)], tmp_path)
    p = tmp_path / "fc.tflite"
    p.write_bytes(model)
    assert [op.kind for op in compile_model(p).graph.ops] == ["FULLY_CONNECTED"]   # no decode code


@pytest.mark.parametrize("dtype,axis", [("int16", 1), ("float32", None), ("int8", 1)])
def test_decoded_output(tmp_path, dtype, axis):
    """A decoded tensor that is a model output (copied from flash), tables along the last
    dimension or one table; an ADD keeps the model's input in use."""
    rng = np.random.default_rng(3)
    vals = (rng.integers(-5, 5, (4, 3)) * 1000).astype(dtype)
    enc, anc = lut_encode(vals, axis, 4)
    mb = ModelBuilder()
    q = dict(scale=[0.1, 0.2, 0.3], zero_point=[0, 0, 0], axis=1) if axis == 1 else {}
    out = mb.tensor([4, 3], dtype, **q)
    x = mb.input([2], "float32")
    mb.custom_op("TFLM_DECODE", [mb.const(enc, "uint8"), mb.const(anc, "uint8")], [out])
    y = mb.tensor([2], "float32")
    mb.op("ADD", [x, x], [y], "AddOptions")
    mb.output(out)
    mb.output(y)
    got, _ = assert_matches_tflm(mb.build(), [np.ones((1, 2), np.float32)], tmp_path)
    np.testing.assert_array_equal(got[0][0], vals)


def test_huffman_refused(tmp_path):
    p = tmp_path / "h.tflite"
    p.write_bytes(fc_model(3, decode_type=1))
    with pytest.raises(EerieError, match="Huffman decoding is not supported"):
        compile_model(p)
