"""TFLite IF and WHILE (subgraphs inlined as regions, emitted as C if / bounded for) vs TFLM:
IF taking both branches (float32 and int8, a branch handing back its input), WHILE loops
with data-dependent trip counts (bounded by max_iterations, or proved from a counter compared
with a constant), loop values swapped through reshapes, an IF nested in a WHILE body, a loop over its --max-iterations making
NAME_invoke fail, the compile error for a loop without any bound, and one model on
mps2-an386 in QEMU."""
from __future__ import annotations


import numpy as np
import pytest

from conftest import assert_matches_tflm, eerie_run, tflm_run
from eerie_c.api import compile_model
from eerie_c.cli import main as cli_main
from eerie_c.errors import EerieError
from tflite_builder import ModelBuilder

Q_X = dict(scale=0.05, zero_point=-3)
Q_Y = dict(scale=0.08, zero_point=5)


def if_model(dtype: str) -> bytes:
    """y = x * 2 + 0.5 (then) or y = x (else: the branch hands back its input); z = relu(x)
    computed before the IF and also returned by both branches."""
    q_x = Q_X if dtype == "int8" else {}
    q_y = Q_Y if dtype == "int8" else {}
    mb = ModelBuilder()
    p = mb.input([1], "bool")
    x = mb.input([1, 6], dtype, **q_x)
    r = mb.tensor([1, 6], dtype, **q_x)
    mb.op("RELU", [x], [r])
    y = mb.tensor([1, 6], dtype, **q_y)
    z = mb.tensor([1, 6], dtype, **q_x)

    th = mb.subgraph("then")
    a, b = th.input([1, 6], dtype, **q_x), th.input([1, 6], dtype, **q_x)
    two = th.const(np.full((1, 6), 40 if dtype == "int8" else 2.0), dtype,
                   **(dict(scale=0.05, zero_point=0) if dtype == "int8" else {}))
    m = th.tensor([1, 6], dtype, **q_y)
    th.op("MUL", [a, two], [m], "MulOptions")
    half = th.const(np.full((1, 6), 10 if dtype == "int8" else 0.5), dtype,
                    **(dict(scale=0.05, zero_point=0) if dtype == "int8" else {}))
    s = th.tensor([1, 6], dtype, **q_y)
    th.op("ADD", [m, half], [s], "AddOptions")
    th.output(s)
    th.output(b)

    el = mb.subgraph("else")
    a, b = el.input([1, 6], dtype, **q_x), el.input([1, 6], dtype, **q_x)
    if dtype == "int8":
        # Requantize into y's parameters, like the then branch's output.
        c = el.tensor([1, 6], dtype, **q_y)
        el.op("QUANTIZE", [a], [c])
        el.output(c)
    else:
        el.output(a)
    el.output(b)

    mb.op("IF", [p, x, r], [y, z], "IfOptions", thenSubgraphIndex=th.index, elseSubgraphIndex=el.index)
    mb.output(y)
    mb.output(z)
    return mb.build()


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_if_both_branches(dtype, tmp_path):
    rng = np.random.default_rng(1)
    ps = np.array([[True], [False], [True], [False]])
    if dtype == "int8":
        xs = rng.integers(-128, 128, (4, 1, 6), dtype=np.int8)
    else:
        xs = rng.standard_normal((4, 1, 6)).astype(np.float32)
    got, ref = assert_matches_tflm(if_model(dtype), [ps, xs], tmp_path)
    if dtype == "float32":   # rows 0, 2 took the then branch, rows 1, 3 the else branch
        np.testing.assert_allclose(got[0][0::2], xs[0::2] * 2 + 0.5, atol=1e-6)
        np.testing.assert_array_equal(got[0][1::2], xs[1::2])
        np.testing.assert_array_equal(got[1], np.maximum(xs, 0))


def counted_loop(proved: bool, dtype: str = "float32") -> bytes:
    """i = 0; while i < n [and x > 1]: x = x * 0.5 + 0.25 (vector; int8: x + 0.5, saturating),
    i += 1; returns x and i. n is an input (data-dependent, needs max_iterations) or the
    constant 20 with the extra data-dependent exit x[0] > 1 (the trip count is proved <= 20)."""
    q = dict(scale=0.05, zero_point=-3) if dtype == "int8" else {}
    mb = ModelBuilder()
    x = mb.input([4], dtype, **q)
    n = None if proved else mb.input([], "int32")
    i0 = mb.const(np.array(0, np.int32), "int32")
    oi, ox = mb.tensor([], "int32"), mb.tensor([4], dtype, **q)
    on = None if proved else mb.tensor([], "int32")

    cg = mb.subgraph("cond")
    ci = cg.input([], "int32")
    cx = cg.input([4], dtype, **q)
    cb = cg.tensor([1] if proved else [], "bool")
    if proved:
        lim = cg.const(np.array(20, np.int32), "int32")
        c1 = cg.tensor([], "bool")
        cg.op("LESS", [ci, lim], [c1])
        first = cg.tensor([1], "float32")
        cg.op("SLICE", [cx, cg.const([0], "int32"), cg.const([1], "int32")], [first])
        c2 = cg.tensor([1], "bool")
        cg.op("GREATER", [first, cg.const([1.0], "float32")], [c2])
        cg.op("LOGICAL_AND", [c1, c2], [cb])
    else:
        cn = cg.input([], "int32")
        cg.op("LESS", [ci, cn], [cb])
    cg.output(cb)

    bg = mb.subgraph("body")
    bi, bx = bg.input([], "int32"), bg.input([4], dtype, **q)
    bn = None if proved else bg.input([], "int32")
    bi2, bx2 = bg.tensor([], "int32"), bg.tensor([4], dtype, **q)
    bg.op("ADD", [bi, bg.const(np.array(1, np.int32), "int32")], [bi2], "AddOptions")
    if dtype == "int8":
        half = bg.const(np.full(4, 10), "int8", scale=0.05, zero_point=0)
        bg.op("ADD", [bx, half], [bx2], "AddOptions")
    else:
        bm = bg.tensor([4], "float32")
        bg.op("MUL", [bx, bg.const(np.full(4, 0.5), "float32")], [bm], "MulOptions")
        bg.op("ADD", [bm, bg.const(np.full(4, 0.25), "float32")], [bx2], "AddOptions")
    bg.output(bi2)
    bg.output(bx2)
    if not proved:
        bg.output(bn)          # the limit passes through unchanged

    ins, outs = [i0, x], [oi, ox]
    if not proved:
        ins.append(n)
        outs.append(on)
    mb.op("WHILE", ins, outs, "WhileOptions", condSubgraphIndex=cg.index, bodySubgraphIndex=bg.index)
    mb.output(ox)
    mb.output(oi)
    return mb.build()


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_while_data_dependent_trips(dtype, tmp_path):
    rng = np.random.default_rng(2)
    if dtype == "int8":   # int8 rows also run into saturation after enough trips
        xs = rng.integers(-128, 128, (5, 4), dtype=np.int8)
        ns = np.array([0, 1, 3, 7, 60], np.int32)
    else:
        xs = rng.standard_normal((5, 4)).astype(np.float32)
        ns = np.array([0, 1, 3, 7, 12], np.int32)
    data = counted_loop(proved=False, dtype=dtype)
    ref = tflm_run(data, [xs, ns])
    got, _ = eerie_run(data, [xs, ns], tmp_path, max_iterations=60)
    np.testing.assert_array_equal(got[1], ref[1])
    np.testing.assert_array_equal(got[1], ns)
    if dtype == "int8":
        np.testing.assert_array_equal(got[0], ref[0])
        assert (got[0][4] == 127).all()
    else:
        np.testing.assert_allclose(got[0], ref[0], rtol=0, atol=1e-5 * np.abs(ref[0]).max())


def test_while_over_max_iterations_returns_an_error(tmp_path):
    data = counted_loop(proved=False)
    xs = np.ones((1, 4), np.float32)
    with pytest.raises(EerieError, match="failed to run"):
        eerie_run(data, [xs, np.array([11], np.int32)], tmp_path, max_iterations=10)
    # The same model and bound run fine when the input needs exactly the bound.
    got, _ = eerie_run(data, [xs, np.array([10], np.int32)], tmp_path, max_iterations=10)
    assert got[1].tolist() == [10]


def test_public_api_passes_max_iterations_to_a_tflite_file(tmp_path):
    """eerie_c.compile / eerie_c.run take a .tflite path too; their max_iterations reaches the
    TFLite loader (without it the unbounded loop is a compile error)."""
    import eerie_c
    path = tmp_path / "loop.tflite"
    path.write_bytes(counted_loop(proved=False))
    with pytest.raises(EerieError, match="max_iterations"):
        eerie_c.compile(str(path))
    eerie_c.compile(str(path), max_iterations=7)
    xs = np.ones((1, 4), np.float32)
    got, _ = eerie_c.run(str(path), [xs, np.array([7], np.int32)], max_iterations=7)
    assert got[1].tolist() == [7]
    with pytest.raises(EerieError, match="failed to run"):
        eerie_c.run(str(path), [xs, np.array([8], np.int32)], max_iterations=7)


def test_exponential_subgraph_nesting_is_a_clean_error(tmp_path, capsys):
    """Every subgraph runs the next one through two IFs: 2**24 inlined copies. The loader stops
    at its cap with a one-line error instead of hanging or running out of memory."""
    import time
    depth = 24
    mb = ModelBuilder()
    p = mb.input([1], "bool")
    x = mb.input([1, 2], "float32")
    subs = [mb.subgraph(f"level{k}") for k in range(depth)]
    for k, sg in enumerate(subs):
        sp, sx = sg.input([1], "bool"), sg.input([1, 2], "float32")
        if k + 1 == depth:
            sg.output(sx)
            continue
        nxt = subs[k + 1].index
        y1 = sg.tensor([1, 2], "float32")
        sg.op("IF", [sp, sp, sx], [y1], "IfOptions", thenSubgraphIndex=nxt, elseSubgraphIndex=nxt)
        y2 = sg.tensor([1, 2], "float32")
        sg.op("IF", [sp, sp, y1], [y2], "IfOptions", thenSubgraphIndex=nxt, elseSubgraphIndex=nxt)
        sg.output(y2)
    y = mb.tensor([1, 2], "float32")
    mb.op("IF", [p, p, x], [y], "IfOptions", thenSubgraphIndex=subs[0].index,
          elseSubgraphIndex=subs[0].index)
    mb.output(y)
    path = tmp_path / "nest.tflite"
    path.write_bytes(mb.build())
    t0 = time.monotonic()
    rc = cli_main([str(path), "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2 and "control flow inlines more than" in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert time.monotonic() - t0 < 60 and not (tmp_path / "out").exists()


def test_while_without_bound_is_a_compile_error(tmp_path, capsys):
    p = tmp_path / "loop.tflite"
    p.write_bytes(counted_loop(proved=False))
    with pytest.raises(EerieError, match="--max-iterations"):
        compile_model(p)
    assert cli_main([str(p), "-o", str(tmp_path / "out")]) == 2
    assert "--max-iterations" in capsys.readouterr().err
    # The CLI option bounds it; the generated C returns 1 past the bound.
    assert cli_main(["-q", str(p), "-o", str(tmp_path / "out"), "--max-iterations", "6"]) == 0
    c = (tmp_path / "out" / "loop.c").read_text()
    assert "trip0 < 7" in c and "return 1;" in c


def test_cli_run_with_max_iterations(tmp_path, capsys):
    p = tmp_path / "loop.tflite"
    p.write_bytes(counted_loop(proved=False))
    np.save(tmp_path / "x.npy", np.ones(4, np.float32))
    np.save(tmp_path / "n.npy", np.array(3, np.int32))
    assert cli_main(["run", "-q", str(p), "--input", str(tmp_path / "x.npy"), "--input",
                     str(tmp_path / "n.npy"), "--output", str(tmp_path / "y.npy"), "--output",
                     str(tmp_path / "i.npy"), "--max-iterations", "5"]) == 0
    assert int(np.load(tmp_path / "i.npy")) == 3
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), np.full(4, 0.5625, np.float32))   # 1 -> .75 -> .625 -> .5625


def test_while_proved_bound_with_data_dependent_exit(tmp_path):
    # No max_iterations: the counter (0, +1) against the constant 20 proves 20 trips at most;
    # x[0] > 1 ends most loops earlier, a huge x runs into the counter's limit.
    data = counted_loop(proved=True)
    xs = np.array([[0.5, 1, 2, 3], [3, 0, 0, 0], [1e5, 1, 1, 1], [1e9, -1, 2, 0]], np.float32)
    got, ref = assert_matches_tflm(data, [xs], tmp_path)
    assert got[1].tolist() == [0, 3, 18, 20]
    p = tmp_path / "proved.tflite"
    p.write_bytes(data)
    res = compile_model(p)
    assert "trip0 < 21" in res.files["proved.c"]


def test_while_swaps_loop_values_through_reshapes(tmp_path):
    # (a, b) = (reshape(b), reshape(a)) three times: reshapes alias their input, so the body's
    # results must not be copied back into the loop values over one another.
    mb = ModelBuilder()
    xa, xb = mb.input([4], "float32"), mb.input([2, 2], "float32")
    oi, oa, ob = mb.tensor([1], "int32"), mb.tensor([4], "float32"), mb.tensor([2, 2], "float32")
    cg = mb.subgraph("cond")
    ci, _, _ = cg.input([1], "int32"), cg.input([4], "float32"), cg.input([2, 2], "float32")
    cb = cg.tensor([1], "bool")
    cg.op("LESS", [ci, cg.const([3], "int32")], [cb])
    cg.output(cb)
    bg = mb.subgraph("body")
    bi, ba, bb = bg.input([1], "int32"), bg.input([4], "float32"), bg.input([2, 2], "float32")
    bi2, ra, rb = bg.tensor([1], "int32"), bg.tensor([2, 2], "float32"), bg.tensor([4], "float32")
    bg.op("ADD", [bi, bg.const([1], "int32")], [bi2], "AddOptions")
    bg.op("RESHAPE", [bb, bg.const([4], "int32")], [rb], "ReshapeOptions", newShape=[4])
    bg.op("RESHAPE", [ba, bg.const([2, 2], "int32")], [ra], "ReshapeOptions", newShape=[2, 2])
    for t in (bi2, rb, ra):
        bg.output(t)
    mb.op("WHILE", [mb.const([0], "int32"), xa, xb], [oi, oa, ob], "WhileOptions",
          condSubgraphIndex=cg.index, bodySubgraphIndex=bg.index)
    mb.output(oa)
    mb.output(ob)
    xs = np.arange(8, dtype=np.float32).reshape(2, 4)
    ys = -xs.reshape(2, 2, 2) - 1
    got, _ = assert_matches_tflm(mb.build(), [xs, ys], tmp_path)
    np.testing.assert_array_equal(got[0], ys.reshape(2, 4))   # an odd number of swaps


def nested_if_in_while() -> bytes:
    """for i in 0..5: s, v = (s - 3, v * 2) if s > 0 else (s + 2, v + 1)."""
    mb = ModelBuilder()
    s = mb.input([1], "float32")
    v = mb.input([3], "float32")
    i0 = mb.const(np.array([0], np.int32), "int32")
    oi, os_, ov = mb.tensor([1], "int32"), mb.tensor([1], "float32"), mb.tensor([3], "float32")

    then = mb.subgraph("then")
    ts, tv = then.input([1], "float32"), then.input([3], "float32")
    ts2, tv2 = then.tensor([1], "float32"), then.tensor([3], "float32")
    then.op("SUB", [ts, then.const([3.0], "float32")], [ts2], "SubOptions")
    then.op("MUL", [tv, then.const(np.full(3, 2.0), "float32")], [tv2], "MulOptions")
    then.output(ts2)
    then.output(tv2)
    els = mb.subgraph("else")
    es, ev = els.input([1], "float32"), els.input([3], "float32")
    es2, ev2 = els.tensor([1], "float32"), els.tensor([3], "float32")
    els.op("ADD", [es, els.const([2.0], "float32")], [es2], "AddOptions")
    els.op("ADD", [ev, els.const(np.ones(3), "float32")], [ev2], "AddOptions")
    els.output(es2)
    els.output(ev2)

    cg = mb.subgraph("cond")
    ci, _, _ = cg.input([1], "int32"), cg.input([1], "float32"), cg.input([3], "float32")
    cb = cg.tensor([1], "bool")
    cg.op("LESS", [ci, cg.const([5], "int32")], [cb])
    cg.output(cb)

    bg = mb.subgraph("body")
    bi, bs, bv = bg.input([1], "int32"), bg.input([1], "float32"), bg.input([3], "float32")
    bi2, p = bg.tensor([1], "int32"), bg.tensor([1], "bool")
    bs2, bv2 = bg.tensor([1], "float32"), bg.tensor([3], "float32")
    bg.op("ADD", [bi, bg.const([1], "int32")], [bi2], "AddOptions")
    bg.op("GREATER", [bs, bg.const([0.0], "float32")], [p])
    bg.op("IF", [p, bs, bv], [bs2, bv2], "IfOptions", thenSubgraphIndex=then.index,
          elseSubgraphIndex=els.index)
    bg.output(bi2)
    bg.output(bs2)
    bg.output(bv2)

    mb.op("WHILE", [i0, s, v], [oi, os_, ov], "WhileOptions", condSubgraphIndex=cg.index,
          bodySubgraphIndex=bg.index)
    mb.output(os_)
    mb.output(ov)
    return mb.build()


NESTED_S = np.array([[-4.0], [0.5], [7.0], [-0.5]], np.float32)
NESTED_V = np.random.default_rng(3).standard_normal((4, 3)).astype(np.float32)


def test_if_nested_in_while(tmp_path):
    got, ref = assert_matches_tflm(nested_if_in_while(), [NESTED_S, NESTED_V], tmp_path)
    # Each sample takes both branches over its five trips.
    # e.g. -4 -> -2 -> 0 -> 2 -> -1 -> 1
    assert got[0].reshape(-1).tolist() == [1.0, 0.5, 2.0, -0.5]


def test_recursive_subgraph_is_rejected(tmp_path):
    mb = ModelBuilder()
    p, x = mb.input([1], "bool"), mb.input([2], "float32")
    y = mb.tensor([2], "float32")
    sub = mb.subgraph()
    sp, sx = sub.input([1], "bool"), sub.input([2], "float32")
    sy = sub.tensor([2], "float32")
    sub.op("IF", [sp, sx], [sy], "IfOptions", thenSubgraphIndex=1, elseSubgraphIndex=1)
    sub.output(sy)
    mb.op("IF", [p, p, x], [y], "IfOptions", thenSubgraphIndex=1, elseSubgraphIndex=1)
    mb.output(y)
    f = tmp_path / "rec.tflite"
    f.write_bytes(mb.build())
    with pytest.raises(EerieError, match="runs itself"):
        compile_model(f)


BOARD = "mps2-an386"


def test_nested_control_flow_on_board(tmp_path, board_tools):
    """Like tests/boards: fails (never skips) without the cross toolchain and QEMU."""
    data = nested_if_in_while()
    ref = tflm_run(data, [NESTED_S, NESTED_V])
    got, report = eerie_run(data, [NESTED_S, NESTED_V], tmp_path, board=BOARD)
    assert report["board"] == BOARD and report["instructions"] > 0
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=0, atol=1e-5 * max(1.0, float(np.abs(r).max())))
