"""Which calls may pass the arena's constant addresses (emit/c.py keeps_constant_addresses).

Layer calls go through the opaque arena base (docs/verification.md: gcc 12's IPA-ICF +
IPA-CP deleted calls to merged twins on an EfficientNet). A patch stage keeps the constant
addresses, worth 10-25% of its instructions, unless the file holds a twin gcc could fold
into it: the same code (comments, layout and its own name aside) over tables of the same
contents.
"""
from __future__ import annotations

import numpy as np
from pathlib import Path

from conftest import random_inputs, tflm_run
from eerie_c.api import compile_model, run_model
from eerie_c.emit.c import icf_signature, keeps_constant_addresses
from eerie_c.ir.graph import Op
from eerie_c.kernels import Const, Lowered

STAGE_BODY = """    /* layer 0: {tensor}, CONV_2D over the band's rows */
    for (t = 0; t < 49; ++t) {{ out0[t] = in0[t] + {fn}_weights[t]; }}
"""


def _stage(fn: str, tensor: str, weights: np.ndarray, kind: str = "PATCH_STAGE"):
    low = Lowered(body=STAGE_BODY.format(fn=fn, tensor=tensor), inputs=["a"], outputs=["b"],
                  fn_name=fn, op=Op(kind, ["a"], ["b"]))
    return low, Const(f"{fn}_weights", "int8_t", weights)


def test_a_stage_without_twin_keeps_constant_addresses():
    a, ca = _stage("l0_patch_stage_0_3", "tensor_1", np.arange(49, dtype=np.int8))
    b, cb = _stage("l4_patch_stage_4_7", "tensor_9", np.arange(49, dtype=np.int8)[::-1].copy())
    assert keeps_constant_addresses([a, b], [ca, cb]) == {a.fn_name, b.fn_name}


def test_twin_stages_go_through_the_base():
    """Same code, other names and comments, equal table contents: gcc may fold them."""
    w = np.arange(49, dtype=np.int8)
    a, ca = _stage("l0_patch_stage_0_3", "tensor_1", w)
    b, cb = _stage("l4_patch_stage_4_7", "tensor_9", w.copy())
    assert icf_signature(a.fn_name, a.body, {ca.cname: ca}) == icf_signature(b.fn_name, b.body, {cb.cname: cb})
    assert keeps_constant_addresses([a, b], [ca, cb]) == set()


def test_a_stage_twin_of_a_layer_function_goes_through_the_base():
    w = np.arange(49, dtype=np.int8)
    a, ca = _stage("l0_patch_stage_0_3", "tensor_1", w)
    b, cb = _stage("l5_conv", "tensor_9", w.copy(), kind="CONV_2D")
    assert keeps_constant_addresses([a, b], [ca, cb]) == set()


def test_only_stages_keep_them(tmp_path):
    """Layer calls always go through the base; the stage's call passes constant addresses,
    and the firmware stays bit-exact."""
    from test_patch_stage_ops import chain_model, conv, dw, unary
    layers = [conv(16, s=(2, 2), act="NONE"), unary("RELU6"), dw(act="NONE"), unary("HARD_SWISH"),
              conv(24, (1, 1)), dw(s=(2, 2))]
    model = chain_model((1, 48, 48, 3), layers, seed=2, tail="pool")
    src = Path(tmp_path) / "m.tflite"
    src.write_bytes(model)
    res = compile_model(src, target="cortex-m4", name="m", patch="auto")
    assert res.report["patches"]["chosen"] is not None
    calls = [ln.strip() for ln in res.files["m.c"].split("int m_invoke(")[1].splitlines()
             if ln.strip().startswith("l") and "(" in ln]
    stage = [c for c in calls if "patch_stage" in c]
    others = [c for c in calls if "patch_stage" not in c]
    assert stage and all("m_arena + " in c for c in stage), calls
    assert all("m_arena + " not in c for c in others), calls
    x = random_inputs([1, 48, 48, 3], "int8", 2, seed=3)
    got, _ = run_model(src, [x], patch="auto")
    np.testing.assert_array_equal(got[0], tflm_run(model, [x])[0])
