"""ADD / SUB / MUL vs TFLM: equal shapes, broadcasting (up to 6-D), constant operands, the same tensor
on both sides, every fused activation, int8 with differing input scales, float32."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, random_inputs
from tflite_builder import ACT, HIGH_RANK_PAIRS, ModelBuilder, op_fan

OPTIONS = {"ADD": "AddOptions", "SUB": "SubOptions", "MUL": "MulOptions"}
# int8 (scale, zero point) of lhs, rhs, output: different input scales on purpose
QUANT = {"ADD": [(0.05, -3), (0.02, 10), (0.08, 4)],
         "SUB": [(0.03, 7), (0.06, -20), (0.07, -2)],
         "MUL": [(0.05, -3), (0.04, 12), (0.1, 5)]}


def binary_model(kind, dtype, shape_a, shape_b, shape_out, act="NONE", const_b=None,
                 same=False, quant=None):
    """lhs is always an input; rhs is an input, a constant (const_b data) or lhs itself."""
    mb = ModelBuilder()
    qa, qb, qo = quant or QUANT[kind]
    kw = (lambda q: dict(scale=q[0], zero_point=q[1])) if dtype == "int8" else (lambda q: {})
    a = mb.input(shape_a, dtype, **kw(qa))
    if same:
        b = a
    elif const_b is not None:
        b = mb.const(np.asarray(const_b).reshape(shape_b), dtype, **kw(qb))
    else:
        b = mb.input(shape_b, dtype, **kw(qb))
    y = mb.tensor(shape_out, dtype, **kw(qo))
    mb.op(kind, [a, b], [y], OPTIONS[kind], fusedActivationFunction=ACT[act])
    mb.output(y)
    return mb.build()


def run(tmp_path, kind, dtype, shape_a, shape_b, shape_out, n=4, seed=0, **kw):
    model = binary_model(kind, dtype, shape_a, shape_b, shape_out, **kw)
    ins = [random_inputs(shape_a, dtype, n, seed=seed, scale=3.0)]
    if not kw.get("same") and kw.get("const_b") is None:
        ins.append(random_inputs(shape_b, dtype, n, seed=seed + 1, scale=3.0))
    return assert_matches_tflm(model, ins, tmp_path)


KINDS = ["ADD", "SUB", "MUL"]
DTYPES = ["int8", "float32"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
def test_same_shape(tmp_path, kind, dtype):
    run(tmp_path, kind, dtype, [1, 5, 7, 3], [1, 5, 7, 3], [1, 5, 7, 3])


@pytest.mark.parametrize("act", ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
def test_activations(tmp_path, kind, dtype, act):
    # a small output scale so that RELU6 / RELU_N1_TO_1 actually clip inside the int8 range
    quant = [(0.05, -3), (0.02, 10), (0.02, -6)] if dtype == "int8" else None
    got, _ = run(tmp_path, kind, dtype, [2, 3, 8], [2, 3, 8], [2, 3, 8], act=act, quant=quant)
    if act != "NONE":
        lo = {"RELU": 0, "RELU6": 0, "RELU_N1_TO_1": -1}[act]
        if dtype == "float32":
            assert got[0].min() >= lo
        else:
            assert got[0].min() >= -6 + round(lo / 0.02)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shapes", [
    ([1, 4, 4, 3], [1, 1, 1, 3], [1, 4, 4, 3]),     # per-channel vector
    ([2, 3], [3], [2, 3]),                          # lower rank
    ([1, 1, 1, 3], [1, 4, 4, 3], [1, 4, 4, 3]),     # broadcast on the left operand
    ([2, 1, 5], [1, 4, 1], [2, 4, 5]),              # both operands broadcast
    ([3, 1], [1, 4], [3, 4]),                       # outer product
    ([2, 3, 4, 5], [1], [2, 3, 4, 5]),              # scalar-like
    ([2, 1, 3, 1, 2], [1, 2, 1, 4, 2], [2, 2, 3, 4, 2]),   # 5-D
])
def test_broadcast(tmp_path, kind, dtype, shapes):
    run(tmp_path, kind, dtype, *shapes)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
def test_constant_operand(tmp_path, kind, dtype):
    rng = np.random.default_rng(3)
    data = (rng.integers(-128, 128, (1, 1, 6)) if dtype == "int8"
            else rng.standard_normal((1, 1, 6)).astype(np.float32))
    run(tmp_path, kind, dtype, [1, 5, 6], [1, 1, 6], [1, 5, 6], const_b=data, act="RELU")


@pytest.mark.parametrize("shape_b", [[1], []], ids=["one", "rank0"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
def test_scalar_constant(tmp_path, kind, dtype, shape_b):
    value = -37 if dtype == "int8" else 0.75
    run(tmp_path, kind, dtype, [4, 9], shape_b, [4, 9], const_b=np.full(shape_b, value))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
def test_same_tensor_both_sides(tmp_path, kind, dtype):
    quant = [(0.05, -3), (0.05, -3), (0.1, 2)]
    run(tmp_path, kind, dtype, [3, 10], [3, 10], [3, 10], same=True, quant=quant)


@pytest.mark.parametrize("kind", KINDS)
def test_int8_extreme_scales(tmp_path, kind):
    # very different input scales and a tiny output scale: saturation on both ends
    quant = [(0.5, 0), (0.001, -128), (0.01, 127)]
    run(tmp_path, kind, "int8", [4, 16], [4, 16], [4, 16], quant=quant)


def test_int8_all_value_pairs(tmp_path):
    # every (a, b) int8 pair once, through ADD, SUB and MUL in one model
    a = np.repeat(np.arange(-128, 128, dtype=np.int8), 256).reshape(1, 256, 256)
    b = np.tile(np.arange(-128, 128, dtype=np.int8), 256).reshape(1, 256, 256)
    for kind in KINDS:
        model = binary_model(kind, "int8", [256, 256], [256, 256], [256, 256])
        assert_matches_tflm(model, [a, b], tmp_path)


@pytest.mark.parametrize("act", ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"])
@pytest.mark.parametrize("kind", KINDS)
def test_int32(tmp_path, kind, act):
    # TFLM wraps on overflow and ignores the fused activation of int32 ADD (SUB/MUL clamp)
    rng = np.random.default_rng(3)
    edge = np.array([2 ** 31 - 1, -2 ** 31, 2 ** 30, -2 ** 20, 65536, 65537, -1, 0, 1, 7], np.int32)
    a = np.stack([edge, rng.integers(-2 ** 31, 2 ** 31, 10), rng.integers(-9, 9, 10)]).astype(np.int32)
    b = np.stack([edge[::-1], rng.integers(-2 ** 31, 2 ** 31, 10), rng.integers(-9, 9, 10)]).astype(np.int32)
    got, _ = assert_matches_tflm(binary_model(kind, "int32", [2, 5], [2, 5], [2, 5], act=act),
                                 [a.reshape(3, 2, 5), b.reshape(3, 2, 5)], tmp_path)
    # broadcasting, and a constant operand
    assert_matches_tflm(binary_model(kind, "int32", [2, 3, 4], [4], [2, 3, 4], act=act),
                        [rng.integers(-50, 50, (2, 2, 3, 4)).astype(np.int32),
                         rng.integers(-50, 50, (2, 4)).astype(np.int32)], tmp_path)
    assert_matches_tflm(binary_model(kind, "int32", [3, 4], [3, 1], [3, 4], act=act,
                                     const_b=np.array([1, -2, 3], np.int32)),
                        [rng.integers(-50, 50, (2, 3, 4)).astype(np.int32)], tmp_path)


Q16 = {"ADD": [(0.001, 0), (0.0007, 0), (0.002, 0)], "SUB": [(0.001, 0), (0.0007, 0), (0.002, 0)],
       "MUL": [(0.01, 0), (0.02, 0), (0.01, 0)]}     # int16: TFLM's 16x8 scheme, zero point 0


@pytest.mark.parametrize("dtype", ["int16", "int32", "int8", "float32"])
def test_high_rank_broadcast(tmp_path, dtype):
    """4-D, 5-D and 6-D broadcasting (TFLM's limit is 6-D) of ADD, SUB and MUL in one model."""
    quant = {"int8": QUANT, "int16": Q16}.get(dtype)
    specs = [(k, [dtype, dtype], dtype, quant[k] if quant else None, OPTIONS[k], None) for k in KINDS]
    model, inputs, labels = op_fan([(specs, HIGH_RANK_PAIRS)])
    rng = np.random.default_rng(7)
    xs = [rng.integers(-1000, 1000, (3, *shape)).astype(np.int32) if dt == "int32" else
          random_inputs(shape, dt, 3, seed=k, scale=3.0) for k, (shape, dt, _, _) in enumerate(inputs)]
    assert_matches_tflm(model, xs, tmp_path, labels=labels)


@pytest.mark.parametrize("quant", [None, [(0.5, 0), (0.001, -128), (0.01, 127)],
                                   [(0.0039, -128), (0.0039, -128), (0.0078, -128)]],
                         ids=["default", "extreme", "equal"])
@pytest.mark.parametrize("shapes", [([1, 16, 16, 8], [1, 16, 16, 8]), ([1, 16, 16, 8], [1, 1, 1, 8]),
                                    ([1, 1, 1, 8], [1, 16, 16, 8])], ids=["same", "bcast-b", "bcast-a"])
@pytest.mark.parametrize("kind", ["ADD", "SUB"])
def test_int8_input_tables(tmp_path, kind, shapes, quant):
    """ADD / SUB over >= TABLE_MIN_ELEMENTS outputs read each input's first step from a table
    of 256 int32 (elementwise.py input_tables), also for a broadcast operand prepared once per
    inner loop; bit-exact with TFLM. Below the threshold the arithmetic stays in the loop."""
    from eerie_c.api import compile_model
    sa, sb = shapes
    so = list(np.broadcast_shapes(tuple(sa), tuple(sb)))
    got, _ = run(tmp_path, kind, "int8", sa, sb, so, n=3, seed=7, quant=quant)
    src = tmp_path / "t.tflite"
    for shape, table in ((so, True), ([2, 3, 8], False)):
        src.write_bytes(binary_model(kind, "int8", shape, shape, shape, quant=quant))
        code = compile_model(src, target="cortex-m4", name="m").files["m.c"]
        assert ("in0_lut" in code) == table, shape


@pytest.mark.parametrize("kind", ["ADD", "SUB"])
def test_int8_input_tables_board(tmp_path, kind):
    from conftest import assert_board_matches_tflm
    shape = [1, 16, 16, 12]
    model = binary_model(kind, "int8", shape, shape, shape, act="RELU")
    xs = [random_inputs(shape, "int8", 2, seed=3), random_inputs(shape, "int8", 2, seed=4)]
    assert_board_matches_tflm(model, xs, tmp_path, "mps2-an386", "cortex-m4")
