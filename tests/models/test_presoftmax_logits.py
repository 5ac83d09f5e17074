"""The int8 shared models' logits, not only their softmax: the final SOFTMAX saturates most
outputs (on kws, 92% of them are -128 or 127), so equal softmax outputs prove little about
the layers before it. Each int8 shared model that ends in SOFTMAX is copied with that op
dropped and its input made the graph output (the flatbuffer edited with the schema's object
API); the copy must equal TFLM bit for bit on 20 random inputs."""
from __future__ import annotations

import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as fb

import flatbuffers
from conftest import random_inputs, tflm_run
from eerie_c.api import compile_model, run_model

# The int8 shared models that end in SOFTMAX (ad01_int8 ends in FULLY_CONNECTED: its outputs
# already are the raw values, checked by test_shared_models.py).
MODELS_WITH_SOFTMAX = ["kws_ref_model", "vww_96_int8", "pretrainedResnet_quant"]


def without_final_softmax(data: bytes) -> bytes:
    """The model with the SOFTMAX that produces its only output removed; the SOFTMAX's input
    (the logits) becomes the graph output."""
    m = fb.ModelT.InitFromPackedBuf(bytearray(data), 0)
    sg = m.subgraphs[0]
    assert len(sg.outputs) == 1
    out = int(sg.outputs[0])
    k = next(i for i, op in enumerate(sg.operators) if out in list(op.outputs))
    op = sg.operators[k]
    code = m.operatorCodes[op.opcodeIndex]
    assert max(code.builtinCode, code.deprecatedBuiltinCode) == fb.BuiltinOperator.SOFTMAX
    assert k == len(sg.operators) - 1, "the SOFTMAX is the last op"
    logits = int(op.inputs[0])
    del sg.operators[k]
    sg.outputs = [logits]
    b = flatbuffers.Builder(len(data) + 1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


@pytest.mark.parametrize("model", MODELS_WITH_SOFTMAX)
def test_logits_bit_exact_with_tflm(models_dir, tmp_path, model):
    path = tmp_path / f"{model}_logits.tflite"
    path.write_bytes(without_final_softmax((models_dir / f"{model}.tflite").read_bytes()))
    res = compile_model(path)
    spec = res.report["inputs"][0]
    assert res.report["ops"][-1]["kind"] != "SOFTMAX"
    x = random_inputs(spec["shape"], spec["dtype"], 20, seed=3)
    ref = tflm_run(path, [x])[0]
    got, _ = run_model(path, [x])
    assert ref.dtype == np.int8 and got[0].dtype == np.int8
    # A strong oracle: the logits spread over the int8 range instead of piling up at its ends.
    saturated = float(np.mean((ref == -128) | (ref == 127)))
    assert saturated < 0.5, f"{model}: {saturated:.0%} of the logits saturate"
    assert len(np.unique(ref)) > 10
    np.testing.assert_array_equal(got[0], ref)
