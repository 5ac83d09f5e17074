"""SELECT (v1): condition of x's shape, a scalar, or 1-D along x's first dim; float32, int8,
int16, int32, with constant operands. TFLM has no SELECT kernel (checked below), so the oracle
here is TFLite's reference interpreter (ai_edge_litert); SELECT only copies, so results are
compared exactly."""
import numpy as np
import pytest

from conftest import eerie_run, tflm_run
from eerie_c.errors import EerieError
from tflite_builder import ModelBuilder

DTYPES = ["float32", "int8", "int16", "int32"]


def tflite_run(model: bytes, inputs):
    from ai_edge_litert.interpreter import Interpreter
    outs = []
    for i in range(inputs[0].shape[0]):
        it = Interpreter(model_content=model)
        it.allocate_tensors()
        for d, x in zip(it.get_input_details(), inputs):
            it.set_tensor(d["index"], x[i])
        it.invoke()
        outs.append(it.get_tensor(it.get_output_details()[0]["index"]).copy())
    return np.stack(outs)


def select_model(cshape, shape, dtype, const_y=None):
    mb = ModelBuilder()
    q = dict(scale=0.05, zero_point=2) if dtype in ("int8", "int16") else {}
    c = mb.input(cshape, "bool")
    a = mb.input(shape, dtype, **q)
    b = mb.const(const_y, dtype, **q) if const_y is not None else mb.input(shape, dtype, **q)
    y = mb.tensor(shape, dtype, **q)
    mb.op("SELECT", [c, a, b], [y], "SelectOptions")
    mb.output(y)
    return mb.build()


def values(shape, dtype, n, seed):
    rng = np.random.default_rng(seed)
    if dtype == "float32":
        return rng.standard_normal((n, *shape)).astype(np.float32)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, (n, *shape), endpoint=True).astype(dtype)


def check(tmp_path, model, inputs):
    ref = tflite_run(model, inputs)
    got, _ = eerie_run(model, inputs, tmp_path)
    assert got[0].dtype == ref.dtype and got[0].shape == ref.shape
    np.testing.assert_array_equal(got[0], ref)


CASES = [([2, 3, 4], [2, 3, 4]), ([5], [5]), ([3], [3, 4]), ([2], [2, 3, 2]), ([], [2, 3]),
         ([1], [1, 4])]


@pytest.mark.parametrize("dtype", DTYPES)
def test_select(tmp_path, dtype):
    rng = np.random.default_rng(1)
    for k, (cshape, shape) in enumerate(CASES):
        cond = rng.integers(0, 2, (3, *cshape)).astype(np.bool_)
        model = select_model(cshape, shape, dtype)
        check(tmp_path, model, [cond, values(shape, dtype, 3, k), values(shape, dtype, 3, 9 + k)])


def test_select_constant_operand(tmp_path):
    cy = np.arange(12, dtype=np.int8).reshape(3, 4)
    model = select_model([3], [3, 4], "int8", const_y=cy)
    cond = np.array([[True, False, True], [False, False, True]])
    check(tmp_path, model, [cond, values([3, 4], "int8", 2, 0)])


def test_select_rejects_broadcasting(tmp_path):
    """A condition of x's last dim is SELECT_V2 broadcasting, not SELECT."""
    model = select_model([4], [3, 4], "float32")
    with pytest.raises(EerieError, match="1-D of x's first dim"):
        eerie_run(model, [np.ones((1, 4), np.bool_), values([3, 4], "float32", 1, 0),
                          values([3, 4], "float32", 1, 1)], tmp_path)


def test_tflm_has_no_select(tmp_path):
    """Why this file compares with TFLite: TFLM does not register SELECT (if it ever does,
    switch the oracle to tflm_run)."""
    model = select_model([2], [2], "float32")
    with pytest.raises(RuntimeError):
        tflm_run(model, [np.ones((1, 2), np.bool_), values([2], "float32", 1, 0),
                         values([2], "float32", 1, 1)])
