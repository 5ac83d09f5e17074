"""RELU / RELU6 (vs TFLM; int8, int16, float32) and RELU_N1_TO_1 (no TFLM kernel: vs TFLite's reference kernels),
int8 over every input value with equal and different in/out quantization, and float32."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, eerie_run, random_inputs
from eerie_c.errors import EerieError
from tflite_builder import ModelBuilder

ALL_INT8 = np.arange(-128, 128, dtype=np.int8).reshape(1, 2, 128)
# (input scale, zp), (output scale, zp)
SAME = [(0.05, -10), (0.05, -10)]
DIFFERENT = [(0.05, -10), (0.03, 5)]
NARROW = [(0.1, 20), (0.02, -100)]         # output saturates early


def act_model(kind, dtype, shape, quant=None):
    mb = ModelBuilder()
    if dtype in ("int8", "int16"):
        (si, zi), (so, zo) = quant
        x = mb.input(shape, dtype, scale=si, zero_point=zi)
        y = mb.tensor(shape, dtype, scale=so, zero_point=zo)
    else:
        x = mb.input(shape, "float32")
        y = mb.tensor(shape, "float32")
    mb.op(kind, [x], [y])
    mb.output(y)
    return mb.build()


@pytest.mark.parametrize("quant", [SAME, DIFFERENT, NARROW], ids=["same", "different", "narrow"])
@pytest.mark.parametrize("kind", ["RELU", "RELU6"])
def test_int8_all_values(tmp_path, kind, quant):
    model = act_model(kind, "int8", [2, 128], quant)
    assert_matches_tflm(model, [ALL_INT8], tmp_path)


def test_int8_relu6_ignores_output_quantization(tmp_path):
    # TFLM's RELU6 clamps in the input's quantization and copies: pin that behaviour
    got, _ = assert_matches_tflm(act_model("RELU6", "int8", [2, 128], DIFFERENT), [ALL_INT8], tmp_path)
    six = -10 + round(6.0 / 0.05)
    expect = np.clip(ALL_INT8.astype(int), -10, six)
    np.testing.assert_array_equal(got[0], expect)


@pytest.mark.parametrize("kind", ["RELU", "RELU6"])
def test_float(tmp_path, kind):
    model = act_model(kind, "float32", [3, 5, 7])
    assert_matches_tflm(model, [random_inputs([3, 5, 7], "float32", 4, scale=5.0)], tmp_path)


def tflite_ref_run(model: bytes, x: np.ndarray) -> np.ndarray:
    """TFLite's reference kernels (not XNNPACK), for ops TFLM lacks."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    it = Interpreter(model_content=model,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    outs = []
    for xi in x:
        it.set_tensor(it.get_input_details()[0]["index"], xi)
        it.invoke()
        outs.append(it.get_tensor(it.get_output_details()[0]["index"]).copy())
    return np.stack(outs)


@pytest.mark.parametrize("quant", [SAME, DIFFERENT, NARROW], ids=["same", "different", "narrow"])
def test_relu_n1_to_1_int8(tmp_path, quant):
    model = act_model("RELU_N1_TO_1", "int8", [2, 128], quant)
    got, _ = eerie_run(model, [ALL_INT8], tmp_path)
    np.testing.assert_array_equal(got[0], tflite_ref_run(model, ALL_INT8))


def test_relu_n1_to_1_float(tmp_path):
    model = act_model("RELU_N1_TO_1", "float32", [4, 9])
    x = random_inputs([4, 9], "float32", 3, scale=2.0)
    got, _ = eerie_run(model, [x], tmp_path)
    np.testing.assert_array_equal(got[0], tflite_ref_run(model, x))


@pytest.mark.parametrize("kind,quant", [("RELU", [(0.001, 0), (0.001, 0)]), ("RELU", [(0.001, 0), (0.0007, 0)]),
                                        ("RELU", [(0.0004, 0), (0.002, 0)]),
                                        ("RELU6", [(0.0003, 0), (0.001, 0)]), ("RELU6", [(0.0002, 7), (0.0002, 7)])])
def test_int16(tmp_path, kind, quant):
    """int16 RELU (zero points 0, rescaled) and RELU6 (a clamp in the input's quantization)."""
    x = np.concatenate([np.arange(-32768, 32768, 97), [-32768, 32767, 0, 1, -1]]).astype(np.int16)
    x = np.stack([x, x[::-1]]).reshape(2, 1, -1)
    assert_matches_tflm(act_model(kind, "int16", list(x.shape[1:]), quant), [x], tmp_path)


@pytest.mark.parametrize("kind,dtype", [("RELU6", "int16"), ("RELU6", "int8"), ("RELU_N1_TO_1", "int8")])
def test_bound_past_int32_is_refused(tmp_path, kind, dtype):
    """Found by the differential tester (seed 31415, int16x8 case 1): a MUL by a tiny constant
    gave RELU6 an output scale of 1.4e-9, so 6 / scale overflows TFLite's int32 cast of the
    bound; TFLM then clamps every output to -32768. There is no reference answer: refuse with
    one line naming the activation and the scale (before the fix eerie-c clamped at 32767)."""
    model = act_model(kind, dtype, [2, 5], [(1e-10, 0), (1e-10, 0)])
    with pytest.raises(EerieError, match=rf"{kind} on a tensor of scale 1e-10: its bound .* "
                                         "past TFLite's int32 arithmetic"):
        eerie_run(model, [random_inputs([2, 5], dtype, 1)], tmp_path)
