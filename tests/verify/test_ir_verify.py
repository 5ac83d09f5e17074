"""The IR verifier (eerie_c/ir/verify.py), run after every stage: each kind of broken graph it
guards against raises CompilerBug naming the stage, the op and the tensor; a sound graph,
including state tensors rewritten by several ops, passes."""
from __future__ import annotations

import numpy as np
import pytest

from eerie_c.errors import CompilerBug
from eerie_c.ir import Graph, Op, Tensor, verify_graph


def sound() -> Graph:
    """x -> ADD(x, c) -> a -> RELU -> y, with a constant c."""
    t = {
        "x": Tensor("x", (1, 4), "float32"),
        "c": Tensor("c", (1, 4), "float32", data=np.ones((1, 4), np.float32)),
        "a": Tensor("a", (1, 4), "float32"),
        "y": Tensor("y", (1, 4), "float32"),
    }
    ops = [Op("ADD", ["x", "c"], ["a"], name="add", index=0),
           Op("RELU", ["a"], ["y"], name="relu", index=1)]
    return Graph("g", t, ops, ["x"], ["y"])


def broken(match: str, mutate) -> None:
    g = sound()
    mutate(g)
    with pytest.raises(CompilerBug, match=match) as e:
        verify_graph(g, "some_pass")
    assert "IR verifier after some_pass" in str(e.value)


def test_sound_graph_passes():
    g = sound()
    assert verify_graph(g, "frontend") is g


def test_state_tensor_may_be_written_by_several_ops():
    g = sound()
    g.tensors["s"] = Tensor("s", (1, 4), "float32", variable=True)
    g.ops.insert(1, Op("ADD", ["a", "s"], ["s"], name="acc1", index=5))
    g.ops.insert(2, Op("ADD", ["a", "s"], ["s"], name="acc2", index=6))
    verify_graph(g, "frontend")


def test_use_before_def():
    # RELU moved before the ADD that produces its input.
    broken(r"op 1 \(RELU relu\) reads a before it is defined", lambda g: g.ops.reverse())


def test_two_writers():
    broken(r"op 7 \(RELU again\) writes y, which is already defined",
           lambda g: g.ops.append(Op("RELU", ["a"], ["y"], name="again", index=7)))


def test_writing_a_constant():
    broken(r"op 7 \(RELU clobber\) writes c, which is already defined or constant",
           lambda g: g.ops.append(Op("RELU", ["a"], ["c"], name="clobber", index=7)))


def test_writing_a_graph_input():
    broken(r"writes x, which is already defined",
           lambda g: g.ops.append(Op("RELU", ["a"], ["x"], name="over", index=7)))


def test_dangling_input_id():
    broken(r"op 1 \(RELU relu\) reads unknown tensor ghost",
           lambda g: g.ops[1].inputs.__setitem__(0, "ghost"))


def test_dangling_output_id():
    broken(r"op 0 \(ADD add\) writes unknown tensor ghost",
           lambda g: g.ops[0].outputs.__setitem__(0, "ghost"))


def test_dangling_graph_input_and_output():
    broken(r"graph input ghost is not a tensor", lambda g: g.inputs.append("ghost"))
    broken(r"graph output ghost is not a tensor", lambda g: g.outputs.__setitem__(0, "ghost"))


def test_output_never_produced():
    broken(r"graph output y is never produced", lambda g: g.ops.pop())


def test_tensor_key_mismatch():
    broken(r"tensor key a holds tensor b", lambda g: setattr(g.tensors["a"], "id", "b"))


def test_unknown_dtype_and_negative_dimension():
    broken(r"tensor a has unknown dtype float64", lambda g: setattr(g.tensors["a"], "dtype", "float64"))
    broken(r"tensor a has negative dimension", lambda g: setattr(g.tensors["a"], "shape", (1, -4)))


def test_constant_data_dtype_mismatch():
    broken(r"constant c data is int8, declared float32",
           lambda g: setattr(g.tensors["c"], "data", np.ones((1, 4), np.int8)))


def test_constant_data_shape_mismatch():
    broken(r"constant c data shape \(4,\), declared \(1, 4\)",
           lambda g: setattr(g.tensors["c"], "data", np.ones(4, np.float32)))


def test_variable_tensor_misuse():
    def const_state(g):
        g.tensors["s"] = Tensor("s", (1, 4), "float32", variable=True, data=np.zeros((1, 4), np.float32))
    broken(r"variable tensor s also has constant data", const_state)

    def state_output(g):
        g.tensors["y"].variable = True
    broken(r"variable tensor y is a graph input or output", state_output)

    def bad_init(g):
        g.tensors["s"] = Tensor("s", (1, 4), "float32", variable=True, init=np.zeros((2, 2), np.float32))
    broken(r"variable s initial contents are float32 \(2, 2\), declared float32 \(1, 4\)", bad_init)


def test_rewrite_of_an_undefined_tensor():
    # A control-flow copy may rewrite an earlier activation, never a fresh or constant one.
    def rewrite_fresh(g):
        g.tensors["z"] = Tensor("z", (1, 4), "float32")
        g.ops.append(Op("RELU", ["a"], ["z"], name="copy", index=8, attrs={"rewrites": True}))
    broken(r"op 8 \(RELU copy\) rewrites z, which is not an earlier defined activation", rewrite_fresh)
    broken(r"rewrites c, which is not an earlier defined activation",
           lambda g: g.ops.append(Op("RELU", ["a"], ["c"], name="copy", index=8, attrs={"rewrites": True})))
