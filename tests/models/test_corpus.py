"""The corpus of public TFLite models (tests/corpus/SOURCES.md: TFLM's examples, models and
integration tests, MLPerf Tiny; none written by this project), against the tflite-micro
runtime (TFLM's reference kernels):

- TFLM runs the model: eerie-c compiles it and matches TFLM on the host and on mps2-an386 in
  QEMU, integer outputs bit-exact, float outputs per element within 1e-5 of TFLM's value
  (conftest.assert_float_close); three invocations in a row, so state kept across invocations
  (SVDF, the audio preprocessor's noise estimate) is compared too.
- TFLM refuses the model: eerie-c refuses it too, with a one-line error saying why (REFUSED),
  or, for hybrid models, compiles it correctly (HYBRID; tests/robustness/test_hybrid_models.py).
- A model that needs an op eerie-c does not have yet: a strict xfail naming the op (XFAIL),
  so the test fails (and the entry must go) the day the op lands.

Each model's inputs and TFLM outputs are computed once and shared by the host and board tests.
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
import tflite

from conftest import ROOT, assert_float_close, random_inputs, tflm_run
from eerie_c.api import compile_model, run_model
from eerie_c.errors import EerieError

CORPUS = ROOT / "tests" / "corpus"
# TFLM's micro_speech models, committed once for the example (same commit as the corpus)
MICRO_SPEECH = ROOT / "examples" / "micro_speech" / "models"

# TFLM refuses these; eerie-c must too, with one line containing the text given.
REFUSED = {
    # Vela's Ethos-U command stream: TFLM has no registration for the custom op without the
    # NPU driver ("Failed to get registration from op code CUSTOM").
    "tflite-micro/person_detect_vela": "CUSTOM:ethos-u",
    # A legacy uint8-quantized MobileNet (TFLite's hosted mobilenet_v1_0.25_224_quant): TFLM
    # refuses uint8 convolutions (its message says "Hybrid models are not supported").
    "tflite-support/mobilenet_v1_0.25_224_quant": "CONV_2D with uint8 tensors",
    # Exported with unknown sizes (shape signature [-1, -1, -1, 3]): TFLM allocates it with the
    # placeholder shapes and then fails ("Type 'INT32' is not supported by FLOOR_MOD").
    "tflite-support/dilated_conv": "unsupported: dynamic shapes",
    # A text classifier with STRING input and a FLOAT64 tensor; TFLM: no registration for its
    # custom op.
    "tflite-support/test_model_nl_classifier": "unsupported tensor dtype: FLOAT64",
    # A custom op with a COMPLEX64 tensor (tflite_micro_compiler's custom-op example).
    "tflite_micro_compiler/custom": "unsupported tensor dtype: COMPLEX64",
    # tflite2onnx's test models: float16 weights behind DEQUANTIZE (TFLM's DEQUANTIZE takes
    # int8 / int16 / uint8 only), a uint8 CONV_2D, POW (no TFLM kernel), MIRROR_PAD on int32
    # (TFLM fails at invoke)
    "tflite2onnx/conv-quant-fp16.float32": "unsupported tensor dtype: FLOAT16",
    "tflite2onnx/conv-relu.uint8": "CONV_2D with uint8 tensors",
    "tflite2onnx/relu6-power.float32": "unsupported operator: POW with float32",
    "tflite2onnx/mirror-pad.int32": "unsupported operator: MIRROR_PAD with int32",
}
# TFLM refuses these ("Hybrid models are not supported on TFLite Micro"); eerie-c compiles them
# (hybrid weights dequantized at compile time), correctly: tests/robustness/test_hybrid_models.py
# compares them with their float model on TFLM and with ai-edge-litert's hybrid kernels.
HYBRID = {
    # MLPerf Tiny's "float32" KWS model: float activations, int8 CONV_2D weights
    "mlcommons-tiny/kws_ref_model_float32",
}
# Model -> the op it needs that eerie-c does not have yet (strict xfail: flips when it lands).
XFAIL: dict[str, str] = {}

N = 3   # invocations per run


def _models() -> dict[str, Path]:
    found = {str(p.relative_to(CORPUS).with_suffix("")): p for p in sorted(CORPUS.rglob("*.tflite"))}
    found.update({f"micro_speech/{p.stem}": p for p in sorted(MICRO_SPEECH.glob("*.tflite"))})
    return found


MODELS = _models()
RUNS = [m for m in MODELS if m not in REFUSED and m not in HYBRID]


def _param(m):
    if m in XFAIL:
        return pytest.param(m, marks=pytest.mark.xfail(strict=True, reason=f"needs {XFAIL[m]}"))
    return m


_DTYPES = {tflite.TensorType.FLOAT32: "float32", tflite.TensorType.INT8: "int8",
           tflite.TensorType.INT16: "int16", tflite.TensorType.INT32: "int32"}


def _inputs(path: Path) -> list[np.ndarray]:
    """N random inferences for every graph input, read from the file itself (not from eerie-c,
    which must not be the judge of its own inputs). int32 inputs span the whole range."""
    sg = tflite.Model.GetRootAs(path.read_bytes(), 0).Subgraphs(0)
    xs = []
    for k in range(sg.InputsLength()):
        t = sg.Tensors(sg.Inputs(k))
        shape, dtype = [int(d) for d in t.ShapeAsNumpy()] if t.ShapeLength() else [], _DTYPES[t.Type()]
        if dtype == "int32":
            xs.append(np.random.default_rng(k).integers(-2 ** 31, 2 ** 31, (N, *shape)).astype(np.int32))
        else:
            xs.append(random_inputs(shape, dtype, N, seed=k))
    return xs


@functools.lru_cache(maxsize=None)
def _reference(model: str):
    """(inputs, TFLM's outputs), once per model for the host and the board test."""
    xs = _inputs(MODELS[model])
    return xs, tflm_run(MODELS[model], xs)


def _assert_matches(got, ref, model):
    assert len(got) == len(ref), model
    for k, (g, r) in enumerate(zip(got, ref)):
        what = f"{model} output {k}"
        assert g.shape == r.shape and g.dtype == r.dtype, (what, g.shape, r.shape, g.dtype, r.dtype)
        if np.issubdtype(r.dtype, np.floating):
            assert_float_close(g, r, what=what)
        else:
            np.testing.assert_array_equal(g, r, err_msg=what)


@pytest.mark.parametrize("model", [_param(m) for m in RUNS])
def test_host_matches_tflm(model):
    xs, ref = _reference(model)
    got, _ = run_model(MODELS[model], xs)
    _assert_matches(got, ref, model)


@pytest.mark.parametrize("model", [_param(m) for m in RUNS])
def test_mps2_an386_matches_tflm(model, board_tools):
    xs, ref = _reference(model)
    got, report = run_model(MODELS[model], xs, board="mps2-an386")
    _assert_matches(got, ref, model)
    assert report["instructions"] > 0


def _tflm_refuses(path: Path) -> None:
    """TFLM fails to allocate or to invoke the model (on whatever its input buffers hold: a
    STRING input cannot be filled, and what is refused does not depend on the values). The
    arena is large enough for every model here, so a refusal is never for want of memory."""
    from tflite_micro.python.tflite_micro import runtime
    with pytest.raises(Exception):
        runtime.Interpreter.from_bytes(path.read_bytes(), arena_size=32_000_000).invoke()


@pytest.mark.parametrize("model", sorted(REFUSED))
def test_refused_like_tflm(model, tmp_path):
    path = MODELS[model]
    _tflm_refuses(path)
    with pytest.raises(EerieError) as e:
        compile_model(path, tmp_path)
    msg = str(e.value)
    assert REFUSED[model] in msg and "\n" not in msg, msg
    # valid files that TFLM (and eerie-c) cannot run: unsupported, never "malformed"
    assert not msg.startswith("malformed"), msg


@pytest.mark.parametrize("model", sorted(HYBRID))
def test_hybrid_refused_by_tflm_compiled_by_eerie_c(model, tmp_path):
    path = MODELS[model]
    _tflm_refuses(path)
    notes = compile_model(path, tmp_path).report["notes"]
    assert any("dequantized at compile time" in n for n in notes), notes


def test_corpus_is_listed_in_sources():
    """Every committed file is accounted for in SOURCES.md (what it is, licence) and in
    collect.py (repository, commit, path: the script that copied it and checks it against
    upstream), and the tables here name only files that exist."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("collect", CORPUS / "collect.py")
    collect = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(collect)
    assert sorted(here for here, _, _ in collect.FILES) == \
        sorted(str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*.tflite"))
    sources = (CORPUS / "SOURCES.md").read_text()
    for p in CORPUS.rglob("*.tflite"):
        base = p.name.removesuffix(".tflite")
        names = (p.name, base, base.removesuffix(".float32"), f"{p.parent.name}/*.tflite")
        assert any(f"`{n}`" in sources for n in names), p
        assert p.read_bytes()[4:8] == b"TFL3", f"{p} is not a flatbuffer (a Git LFS pointer?)"
    named = set(REFUSED) | set(XFAIL) | HYBRID
    assert named <= set(MODELS), named - set(MODELS)
    assert len(RUNS) >= 30, len(RUNS)
