"""Comparisons, logical ops, SELECT_V2, MAXIMUM / MINIMUM vs TFLM, with broadcasting (ranks 1
to 6), constant operands, int8 requantized comparisons across different scales and zero points."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, eerie_run, random_inputs
from eerie_c.errors import EerieError
from tflite_builder import HIGH_RANK_PAIRS, HIGH_RANK_TRIPLES, ModelBuilder, op_fan

CMP = ["EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL"]
Q = {"int8": [(0.05, -3), (0.07, 10)], "int16": [(0.001, 0), (0.0013, 0)]}


def binary_model(kind, shapes, dtype, out_dtype=None, const=None, quants=None):
    """Two-input op; `const` = (index, array) makes that input a constant."""
    mb = ModelBuilder()
    quants = quants or Q.get(dtype, [None, None])
    ids = []
    for k, shape in enumerate(shapes):
        qk = dict(scale=quants[k][0], zero_point=quants[k][1]) if quants[k] else {}
        if const and const[0] == k:
            ids.append(mb.const(const[1], dtype, **qk))
        else:
            ids.append(mb.input(shape, dtype, **qk))
    out_shape = list(np.broadcast_shapes(*[tuple(s) for s in shapes]))
    out_dtype = out_dtype or dtype
    qo = dict(scale=quants[0][0], zero_point=quants[0][1]) if quants[0] and out_dtype == dtype else {}
    y = mb.tensor(out_shape, out_dtype, **qo)
    mb.op(kind, ids, [y])
    mb.output(y)
    return mb.build()


def values(shape, dtype, n=4, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, (n, *shape)).astype(np.bool_)
    if dtype in ("int32", "int64"):
        return rng.integers(-5, 6, (n, *shape)).astype(dtype)   # small range: many ties
    if dtype == "float32":
        return np.round(random_inputs(shape, dtype, n, seed) * 2) / 2   # ties too
    return random_inputs(shape, dtype, n, seed)


SHAPES = [([2, 3, 4], [2, 3, 4]), ([2, 3, 4], [4]), ([2, 1, 4], [3, 1]), ([1, 5], [1])]


@pytest.mark.parametrize("dtype", ["float32", "int8", "int32", "int64"])
@pytest.mark.parametrize("kind", CMP)
def test_compare(tmp_path, kind, dtype):
    for sa, sb in SHAPES:
        model = binary_model(kind, [sa, sb], dtype, "bool")
        assert_matches_tflm(model, [values(sa, dtype, seed=1), values(sb, dtype, seed=2)], tmp_path)


@pytest.mark.parametrize("kind", CMP)
def test_compare_int8_all_pairs(tmp_path, kind):
    """Every pair of int8 values, with scales whose rescaled values collide for some pairs."""
    a = np.repeat(np.arange(-128, 128, dtype=np.int8), 256).reshape(1, 256, 256)
    b = np.tile(np.arange(-128, 128, dtype=np.int8), 256).reshape(1, 256, 256)
    for quants in ([(0.05, -3), (0.07, 10)], [(0.002, 0), (0.9, 0)]):
        model = binary_model(kind, [[256, 256], [256, 256]], "int8", "bool", quants=quants)
        assert_matches_tflm(model, [a, b], tmp_path)


def test_compare_int8_constant(tmp_path):
    c = np.arange(-6, 6, dtype=np.int8).reshape(3, 4)
    model = binary_model("LESS", [[2, 3, 4], [3, 4]], "int8", "bool", const=(1, c))
    assert_matches_tflm(model, [values([2, 3, 4], "int8", seed=3)], tmp_path)


def test_greater_int16_not_supported(tmp_path):
    model = binary_model("GREATER", [[3, 50], [50]], "int16", "bool")
    with pytest.raises(EerieError, match="GREATER with int16"):
        eerie_run(model, [values([3, 50], "int16", seed=4), values([50], "int16", seed=5)], tmp_path)


@pytest.mark.parametrize("kind", ["EQUAL", "NOT_EQUAL"])
def test_equal_bool(tmp_path, kind):
    model = binary_model(kind, [[4, 6], [6]], "bool")
    assert_matches_tflm(model, [values([4, 6], "bool", seed=1), values([6], "bool", seed=2)], tmp_path)


def test_compare_int8_scale_not_below_one_rejected(tmp_path):
    model = binary_model("LESS", [[4], [4]], "int8", "bool", quants=[(1.5, 0), (0.1, 0)])
    with pytest.raises(EerieError, match="below 1"):
        eerie_run(model, [values([4], "int8"), values([4], "int8")], tmp_path)


@pytest.mark.parametrize("kind", ["LOGICAL_AND", "LOGICAL_OR"])
def test_logical_binary(tmp_path, kind):
    for sa, sb in SHAPES:
        model = binary_model(kind, [sa, sb], "bool")
        assert_matches_tflm(model, [values(sa, "bool", seed=1), values(sb, "bool", seed=2)], tmp_path)


def test_logical_not(tmp_path):
    mb = ModelBuilder()
    x = mb.input([3, 7], "bool")
    y = mb.tensor([3, 7], "bool")
    mb.op("LOGICAL_NOT", [x], [y])
    mb.output(y)
    assert_matches_tflm(mb.build(), [values([3, 7], "bool")], tmp_path)


@pytest.mark.parametrize("dtype", ["float32", "int8", "int16", "int32", "int64"])
@pytest.mark.parametrize("kind", ["MAXIMUM", "MINIMUM"])
def test_max_min(tmp_path, kind, dtype):
    quants = [(0.05, -3), (0.05, -3)] if dtype in ("int8", "int16") else None
    for sa, sb in SHAPES:
        model = binary_model(kind, [sa, sb], dtype, quants=quants)
        assert_matches_tflm(model, [values(sa, dtype, seed=1), values(sb, dtype, seed=2)], tmp_path)


def test_max_constant(tmp_path):
    c = np.linspace(-1, 1, 5).astype(np.float32)
    model = binary_model("MAXIMUM", [[3, 5], [5]], "float32", const=(1, c))
    assert_matches_tflm(model, [values([3, 5], "float32")], tmp_path)


def select_model(shapes, dtype, quant=None):
    mb = ModelBuilder()
    q = dict(scale=quant[0], zero_point=quant[1]) if quant else {}
    c = mb.input(shapes[0], "bool")
    a = mb.input(shapes[1], dtype, **q)
    b = mb.input(shapes[2], dtype, **q)
    out = list(np.broadcast_shapes(*[tuple(s) for s in shapes]))
    y = mb.tensor(out, dtype, **q)
    mb.op("SELECT_V2", [c, a, b], [y])
    mb.output(y)
    return mb.build()


@pytest.mark.parametrize("dtype", ["float32", "int8", "int16"])
def test_select_v2(tmp_path, dtype):
    quant = (0.1, 2) if dtype != "float32" else None
    for shapes in ([[2, 3], [2, 3], [2, 3]], [[2, 1, 4], [3, 1], [4]], [[1], [2, 3], [2, 3]]):
        ins = [values(shapes[0], "bool", seed=1), values(shapes[1], dtype, seed=2),
               values(shapes[2], dtype, seed=3)]
        assert_matches_tflm(select_model(shapes, dtype, quant), ins, tmp_path)


# dtype -> the ops of this file it has (SELECT_V2: the dtype of its two value operands)
HIGH_RANK_KINDS = {"float32": CMP + ["MAXIMUM", "MINIMUM", "SELECT_V2"],
                   "int8": CMP + ["MAXIMUM", "MINIMUM", "SELECT_V2"],
                   "int16": ["MAXIMUM", "MINIMUM", "SELECT_V2"],
                   "int32": CMP + ["MAXIMUM", "MINIMUM"], "int64": CMP + ["MAXIMUM", "MINIMUM"],
                   "bool": ["EQUAL", "NOT_EQUAL", "LOGICAL_AND", "LOGICAL_OR"]}


@pytest.mark.parametrize("dtype", list(HIGH_RANK_KINDS))
def test_high_rank_broadcast(tmp_path, dtype):
    """4-D, 5-D and 6-D broadcasting (TFLM's limit is 6-D), every op of the dtype in one model.
    Values from a small range, so that comparisons see many ties."""
    q = Q[dtype][0] if dtype in Q else None       # MAXIMUM / MINIMUM need equal scales
    specs = [(k, [dtype, dtype], "bool" if k in CMP else dtype, [q, q, None if k in CMP else q],
              None, None) for k in HIGH_RANK_KINDS[dtype] if k != "SELECT_V2"]
    sel = [("SELECT_V2", ["bool", dtype, dtype], dtype, [None, q, q, q], None, None)] \
        if "SELECT_V2" in HIGH_RANK_KINDS[dtype] else []
    model, inputs, labels = op_fan([(specs, HIGH_RANK_PAIRS), (sel, HIGH_RANK_TRIPLES)])
    xs = [values(shape, dt, n=2, seed=k) if dt in ("bool", "float32") else
          np.random.default_rng(k).integers(-6, 7, (2, *shape)).astype(dt)
          for k, (shape, dt, _, _) in enumerate(inputs)]
    got, _ = assert_matches_tflm(model, xs, tmp_path, labels=labels)
    assert max(g.ndim for g in got) == 7                              # batch + 6-D
