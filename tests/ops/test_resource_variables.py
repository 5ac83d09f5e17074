"""TFLite resource variables (VAR_HANDLE / READ_VARIABLE / ASSIGN_VARIABLE, one state tensor
per container/shared_name) and CALL_ONCE (init subgraph on the first invocation) vs TFLM,
over consecutive invocations of one interpreter / one host process: float and int8
accumulators, bool / int16 / int64 / uint8 variables, a counter, an update made in an IF
branch that receives the handle, a handle carried through a WHILE loop, a read before any
assignment in the invocation, and the compile error for a variable that is never assigned."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import assert_matches_tflm
from eerie_c.api import compile_model
from eerie_c.errors import EerieError
from tflite_builder import ModelBuilder


def handle(b: ModelBuilder, name: str) -> int:
    h = b.tensor([], "resource")
    b.op("VAR_HANDLE", [], [h], "VarHandleOptions", container="", sharedName=name)
    return h


def call_once(mb: ModelBuilder, inits: dict[str, tuple]):
    """CALL_ONCE of a new subgraph assigning each variable name its (data, dtype, quant)."""
    init = mb.subgraph("init")
    for name, (data, dtype, q) in inits.items():
        init.op("ASSIGN_VARIABLE", [handle(init, name), init.const(data, dtype, **q)], [])
    mb.op("CALL_ONCE", [], [], "CallOnceOptions", initSubgraphIndex=init.index)


def accumulator(dtype: str) -> bytes:
    """acc = init (first call); acc = acc + x; y = acc."""
    q_x = dict(scale=0.05, zero_point=-4) if dtype == "int8" else {}
    q_a = dict(scale=0.1, zero_point=3) if dtype == "int8" else {}
    mb = ModelBuilder()
    x = mb.input([2, 3], dtype, **q_x)
    start = np.arange(6).reshape(2, 3) * (4 if dtype == "int8" else 0.5)
    call_once(mb, {"acc": (start, dtype, q_a)})
    h = handle(mb, "acc")
    a, s, y = mb.tensor([2, 3], dtype, **q_a), mb.tensor([2, 3], dtype, **q_a), mb.tensor([2, 3], dtype, **q_a)
    mb.op("READ_VARIABLE", [h], [a])
    mb.op("ADD", [a, x], [s], "AddOptions")
    mb.op("ASSIGN_VARIABLE", [h, s], [])
    mb.op("READ_VARIABLE", [h], [y])
    mb.output(y)
    return mb.build()


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_call_once_accumulator(dtype, tmp_path):
    rng = np.random.default_rng(0)
    if dtype == "int8":
        xs = rng.integers(-40, 40, (5, 2, 3), dtype=np.int8)
    else:
        xs = rng.standard_normal((5, 2, 3)).astype(np.float32)
    got, _ = assert_matches_tflm(accumulator(dtype), [xs], tmp_path)
    if dtype == "float32":   # the state really carries over: a running sum
        np.testing.assert_allclose(got[0], np.arange(6).reshape(2, 3) * 0.5 + np.cumsum(xs, 0), atol=1e-5)


def counter_and_branch() -> bytes:
    """count += 1 every call; `last` = x only on calls whose x[0] > 0 (an IF branch gets the
    handle and assigns); outputs count and last."""
    mb = ModelBuilder()
    x = mb.input([3], "float32")
    call_once(mb, {"count": (np.zeros(1), "int32", {}), "last": (np.full(3, -1.0), "float32", {})})
    hc, hl = handle(mb, "count"), handle(mb, "last")
    c, c2 = mb.tensor([1], "int32"), mb.tensor([1], "int32")
    mb.op("READ_VARIABLE", [hc], [c])
    mb.op("ADD", [c, mb.const([1], "int32")], [c2], "AddOptions")
    mb.op("ASSIGN_VARIABLE", [hc, c2], [])
    first, p = mb.tensor([1], "float32"), mb.tensor([1], "bool")
    mb.op("SLICE", [x, mb.const([0], "int32"), mb.const([1], "int32")], [first])
    mb.op("GREATER", [first, mb.const([0.0], "float32")], [p])

    th = mb.subgraph("then")
    th_h, th_x = th.input([], "resource"), th.input([3], "float32")
    th.op("ASSIGN_VARIABLE", [th_h, th_x], [])
    th.output(th_h)
    el = mb.subgraph("else")
    el_h, _ = el.input([], "resource"), el.input([3], "float32")
    el.output(el_h)
    h_out = mb.tensor([], "resource")
    mb.op("IF", [p, hl, x], [h_out], "IfOptions", thenSubgraphIndex=th.index, elseSubgraphIndex=el.index)

    n, last = mb.tensor([1], "int32"), mb.tensor([3], "float32")
    mb.op("READ_VARIABLE", [hc], [n])
    mb.op("READ_VARIABLE", [h_out], [last])   # through the handle the IF hands back
    mb.output(n)
    mb.output(last)
    return mb.build()


def test_counter_and_update_in_if_branch(tmp_path):
    xs = np.array([[1, 2, 3], [-1, 5, 5], [2, 0, 0], [-3, 1, 1], [-2, 2, 2]], np.float32)
    got, _ = assert_matches_tflm(counter_and_branch(), [xs], tmp_path)
    assert got[0].reshape(-1).tolist() == [1, 2, 3, 4, 5]
    assert got[1][4].tolist() == [2, 0, 0]


def loop_with_handle() -> bytes:
    """Each call: for i in 0..3: acc += x (the loop carries the handle); y = acc."""
    mb = ModelBuilder()
    x = mb.input([4], "float32")
    call_once(mb, {"acc": (np.zeros(4), "float32", {})})
    h = handle(mb, "acc")
    i0 = mb.const([0], "int32")
    oi, oh, ox = mb.tensor([1], "int32"), mb.tensor([], "resource"), mb.tensor([4], "float32")

    cg = mb.subgraph("cond")
    ci, _, _ = cg.input([1], "int32"), cg.input([], "resource"), cg.input([4], "float32")
    cb = cg.tensor([1], "bool")
    cg.op("LESS", [ci, cg.const([3], "int32")], [cb])
    cg.output(cb)
    bg = mb.subgraph("body")
    bi, bh, bx = bg.input([1], "int32"), bg.input([], "resource"), bg.input([4], "float32")
    bi2, a, s = bg.tensor([1], "int32"), bg.tensor([4], "float32"), bg.tensor([4], "float32")
    bg.op("ADD", [bi, bg.const([1], "int32")], [bi2], "AddOptions")
    bg.op("READ_VARIABLE", [bh], [a])
    bg.op("ADD", [a, bx], [s], "AddOptions")
    bg.op("ASSIGN_VARIABLE", [bh, s], [])
    bg.output(bi2)
    bg.output(bh)
    bg.output(bx)
    mb.op("WHILE", [i0, h, x], [oi, oh, ox], "WhileOptions", condSubgraphIndex=cg.index,
          bodySubgraphIndex=bg.index)
    y = mb.tensor([4], "float32")
    mb.op("READ_VARIABLE", [oh], [y])
    mb.output(y)
    return mb.build()


def test_handle_carried_through_while(tmp_path):
    xs = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    got, _ = assert_matches_tflm(loop_with_handle(), [xs], tmp_path)
    np.testing.assert_allclose(got[0], 3 * np.cumsum(xs, 0), atol=1e-5)


def previous_input() -> bytes:
    """y = the x of the previous call (no CALL_ONCE: the first call reads the initial state)."""
    mb = ModelBuilder()
    x = mb.input([4], "int32")
    h = handle(mb, "prev")
    y = mb.tensor([4], "int32")
    mb.op("READ_VARIABLE", [h], [y])
    mb.op("ASSIGN_VARIABLE", [h, x], [])
    mb.output(y)
    return mb.build()


def test_read_before_assign(tmp_path):
    xs = np.arange(12, dtype=np.int32).reshape(3, 4) + 1
    got, _ = assert_matches_tflm(previous_input(), [xs], tmp_path)
    assert got[0][1:].tolist() == xs[:-1].tolist()


OTHER_DTYPES = ["bool", "int16", "int64", "uint8"]


def test_variables_of_other_dtypes(tmp_path):
    """A bool, an int16, an int64 and a uint8 variable in one model, each set by CALL_ONCE:
    y_k = the variable (its initial value on the first call), then the variable = x_k."""
    mb = ModelBuilder()
    q = {"int16": dict(scale=0.001, zero_point=0)}
    xs, inits = [], {}
    rng = np.random.default_rng(2)
    for dt in OTHER_DTYPES:
        xs.append(mb.input([2, 3], dt, **q.get(dt, {})))
        inits[dt] = (np.arange(6).reshape(2, 3) % 2 if dt == "bool" else np.arange(6).reshape(2, 3) + 7,
                     dt, q.get(dt, {}))
    call_once(mb, inits)
    for dt, x in zip(OTHER_DTYPES, xs):
        h = handle(mb, dt)
        y = mb.tensor([2, 3], dt, **q.get(dt, {}))
        mb.op("READ_VARIABLE", [h], [y])
        mb.op("ASSIGN_VARIABLE", [h, x], [])
        mb.output(y)
    vals = [rng.integers(0, 2, (4, 2, 3)).astype(np.bool_) if dt == "bool" else
            rng.integers(np.iinfo(dt).min, np.iinfo(dt).max, (4, 2, 3), endpoint=True).astype(dt)
            for dt in OTHER_DTYPES]
    got, _ = assert_matches_tflm(mb.build(), vals, tmp_path)
    for g, v, dt in zip(got, vals, OTHER_DTYPES):
        assert g.dtype == v.dtype
        np.testing.assert_array_equal(g[1:], v[:-1])
        np.testing.assert_array_equal(g[0], np.asarray(inits[dt][0]).astype(v.dtype))


def test_never_assigned_is_a_compile_error(tmp_path):
    mb = ModelBuilder()
    x = mb.input([2], "float32")
    h = handle(mb, "ghost")
    a, y = mb.tensor([2], "float32"), mb.tensor([2], "float32")
    mb.op("READ_VARIABLE", [h], [a])
    mb.op("ADD", [a, x], [y], "AddOptions")
    mb.output(y)
    p = tmp_path / "ghost.tflite"
    p.write_bytes(mb.build())
    with pytest.raises(EerieError, match="never assigned"):
        compile_model(p)


def test_accumulator_on_board(tmp_path, board_tools):
    """State across the consecutive inferences of one firmware boot on mps2-an386 in QEMU.
    Like tests/boards: fails (never skips) without the cross toolchain and QEMU."""
    from conftest import eerie_run, tflm_run
    data = accumulator("int8")
    xs = np.random.default_rng(4).integers(-40, 40, (4, 2, 3), dtype=np.int8)
    got, report = eerie_run(data, [xs], tmp_path, board="mps2-an386")
    assert report["board"] == "mps2-an386"
    np.testing.assert_array_equal(got[0], tflm_run(data, [xs])[0])
