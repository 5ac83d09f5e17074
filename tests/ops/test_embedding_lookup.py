"""EMBEDDING_LOOKUP vs TFLM: float32 -> float32, int8 -> int8 and hybrid int8 -> float32,
constant and activation tables of rank 2 and 3, repeated indices and batch > 1; an index out
of range gives a row of real 0 (TFLM fails the invoke instead)."""
import numpy as np
import pytest

from conftest import assert_matches_tflm, eerie_run
from tflite_builder import ModelBuilder


def lookup_model(table_dtype, out_dtype, table_shape, n_ids, const_table=True, tq=None, oq=None):
    mb = ModelBuilder()
    kw = (lambda q: dict(scale=q[0], zero_point=q[1]) if q else {})
    ids = mb.input([n_ids], "int32")
    rng = np.random.default_rng(4)
    if table_dtype == "float32":
        data = rng.standard_normal(table_shape).astype(np.float32)
    else:
        data = rng.integers(-128, 128, table_shape).astype(np.int8)
    table = mb.const(data, table_dtype, **kw(tq)) if const_table else mb.input(table_shape, table_dtype, **kw(tq))
    y = mb.tensor([n_ids, *table_shape[1:]], out_dtype, **kw(oq))
    mb.op("EMBEDDING_LOOKUP", [ids, table], [y])
    mb.output(y)
    return mb.build(), data


CASES = [  # table dtype, output dtype, table shape, quantization (table, output)
    ("float32", "float32", [7, 5], None, None),
    ("float32", "float32", [6, 3, 2], None, None),
    ("int8", "int8", [9, 4], (0.05, -3), (0.05, -3)),
    ("int8", "int8", [5, 2, 3], (0.1, 7), (0.1, 7)),
    ("int8", "float32", [8, 6], (0.037, 0), None),
    ("int8", "float32", [4, 3, 3], (0.5, 0), None),
]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("const_table", [True, False])
def test_embedding_lookup(tmp_path, case, const_table):
    td, od, shape, tq, oq = CASES[case]
    model, data = lookup_model(td, od, shape, 5, const_table, tq, oq)
    ids = np.random.default_rng(case).integers(0, shape[0], (3, 5)).astype(np.int32)
    ids[0, :2] = [shape[0] - 1, shape[0] - 1]           # last row, repeated
    feeds = [ids]
    if not const_table:
        feeds.append(np.stack([data] * 3))
    assert_matches_tflm(model, feeds, tmp_path)


def test_out_of_range_index_gives_zero_rows(tmp_path):
    model, data = lookup_model("int8", "int8", [4, 3], 3, tq=(0.1, -9), oq=(0.1, -9))
    got, _ = eerie_run(model, [np.array([[1, 4, -1]], np.int32)], tmp_path)
    assert got[0][0].tolist() == [data[1].tolist(), [-9] * 3, [-9] * 3]
