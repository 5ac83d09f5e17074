"""Validation rules that follow what TFLM accepts (eerie_c/frontend/validate.py): for each, a
file TFLM's runtime accepts compiles and matches it bit-exact (with a line in the report saying
what was normalised), and the nearest file TFLM refuses is refused here too. Whether TFLM
accepts or refuses is asked of the tflite-micro runtime itself, not assumed."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conftest import eerie_run, tflm_run  # noqa: E402
from tflite_builder import ModelBuilder  # noqa: E402

from eerie_c.errors import EerieError  # noqa: E402
from eerie_c.frontend.tflite import load_tflite  # noqa: E402


def conv_model(I=3, O=8, w_n=None, w_axis=0, w_zp_n=None, bias_n=None, bias_axis=0, const_w=True,
               x_zp=(-3,), w_scales=None, bias_scale=0.0005, kind="CONV_2D"):
    """int8 CONV_2D 3x3 VALID on a 1x5x5xI input; per-channel filter (w_n scales along
    w_axis, w_zp_n zero points) and a bias with bias_n scales along bias_axis."""
    rng = np.random.default_rng(0)
    w_n = O if w_n is None else w_n
    bias_n = O if bias_n is None else bias_n
    mb = ModelBuilder()
    x = mb.input([1, 5, 5, I], "int8", scale=0.05, zero_point=list(x_zp))
    scales = rng.uniform(0.002, 0.01, w_n) if w_scales is None else w_scales
    wq = dict(scale=scales, zero_point=[0] * (w_zp_n or w_n), axis=w_axis)
    wd = rng.integers(-127, 128, (O, 3, 3, I))
    w = mb.const(wd, "int8", name="w", **wq) if const_w else mb.input([O, 3, 3, I], "int8", name="w", **wq)
    mb.tensors[w].quantization.zeroPoint = [0] * (w_zp_n or w_n)   # (the builder repeats one)
    b = mb.const(rng.integers(-500, 500, (O,)), "int32", name="conv/bias", scale=[bias_scale] * bias_n,
                 zero_point=[0] * bias_n, axis=bias_axis)
    y = mb.tensor([1, 3, 3, O], "int8", scale=0.1, zero_point=2)
    mb.op("CONV_2D", [x, w, b], [y], "Conv2DOptions", padding=1, strideW=1, strideH=1)
    mb.output(y)
    return mb.build()


def xs(I=3, n=2):
    return [np.random.default_rng(1).integers(-128, 128, (n, 1, 5, 5, I)).astype(np.int8)]


def tflm_accepts(model, inputs) -> list[np.ndarray]:
    return tflm_run(model, inputs)


def tflm_refuses(model, inputs) -> None:
    with pytest.raises(Exception):
        tflm_run(model, inputs)


def matches_tflm_with_note(model, inputs, tmp_path, *needles):
    ref = tflm_accepts(model, inputs)
    got, report = eerie_run(model, inputs, tmp_path)
    np.testing.assert_array_equal(got[0], ref[0])
    notes = report.get("notes", [])
    for needle in needles:
        assert any(needle in n for n in notes), (needle, notes)
    return report


def refused(model, *needles) -> str:
    with pytest.raises(EerieError) as e:
        load_tflite(model, "m")
    msg = str(e.value)
    for needle in needles:
        assert needle in msg, msg
    return msg


# --- per-channel bias whose quantized dimension is its filter's (TFLM's person detection) ------

def test_bias_quantized_along_filter_dimension_is_read_along_0(tmp_path):
    """The converter writes a per-channel bias [8] with quantized_dimension 3 (the MobileNet v1
    person-detection model): TFLM accepts it, eerie-c normalises the dimension to 0."""
    m = conv_model(bias_axis=3)
    report = matches_tflm_with_note(m, xs(), tmp_path, "along dimension 3 of a 1-D tensor",
                                    "'conv/bias'")
    assert len(report["notes"]) == 1, report["notes"]
    from eerie_c.report import render_markdown, summary_text
    assert "## Normalised on load" in render_markdown(report) and "'conv/bias'" in render_markdown(report)
    assert "normalised on load: tensor" in summary_text(report)
    g = load_tflite(m, "m")
    bias = next(t for t in g.tensors.values() if t.label == "conv/bias")
    assert bias.quant.axis == 0


def test_bias_scales_fitting_no_dimension_are_unused(tmp_path):
    """A bias with 4 scales for 8 values: TFLM ignores a bias's quantization (the kernels use
    input scale x filter scale), so it accepts the file; so does eerie-c, saying so."""
    matches_tflm_with_note(conv_model(bias_n=4), xs(), tmp_path,
                           "4 per-channel scales for dimension 0 of size 8", "only its first scale")


def test_filter_scale_count_must_match_output_channels():
    """The nearest file TFLM refuses: a filter with 3 scales for 8 output channels."""
    m = conv_model(w_n=3)
    tflm_refuses(m, xs())
    refused(m, "malformed TFLite file", "3 per-channel weight scales for 8 output channels")


# --- filter quantized along another dimension of the output channels' size ---------------------

def test_filter_quantized_along_same_size_dimension(tmp_path):
    """Filter [8, 3, 3, 8] quantized along dimension 3 (also of size 8): TFLM checks only that
    dimension's size and reads the scales per output channel; so does eerie-c."""
    matches_tflm_with_note(conv_model(I=8, w_axis=3), xs(I=8), tmp_path,
                           "quantized along dimension 3 (also of size 8) read per output channel")


def test_filter_quantized_along_other_size_dimension_is_refused():
    m = conv_model(I=3, w_axis=3)   # dimension 3 has 3 entries, not 8
    tflm_refuses(m, xs())
    refused(m, "malformed TFLite file", "quantized along dimension 3 of shape [8, 3, 3, 3]")


# --- zero points: one for all channels ---------------------------------------------------------

def test_one_zero_point_for_per_channel_filter(tmp_path):
    """TFLM's allocator reads zero_point[0] for every channel when the counts differ (its
    space-saving form for symmetric weights)."""
    matches_tflm_with_note(conv_model(w_zp_n=1), xs(), tmp_path,
                           "8 quantization scale(s) with 1 zero point(s); zero point 0")


def test_extra_zero_points_of_an_activation(tmp_path):
    """One scale, two zero points on the input: TFLM uses the first."""
    matches_tflm_with_note(conv_model(x_zp=(-3, 7)), xs(), tmp_path,
                           "1 quantization scale(s) with 2 zero point(s); zero point -3")


# --- weights computed by the graph: TFLM runs them; eerie-c says unsupported, not malformed ----

def test_computed_weights_are_unsupported_not_malformed():
    m = conv_model(const_w=False)
    inputs = xs() + [np.random.default_rng(2).integers(-127, 128, (2, 8, 3, 3, 3)).astype(np.int8)]
    tflm_accepts(m, inputs)
    msg = refused(m, "unsupported: weights", "computed by the graph")
    assert "malformed" not in msg


# --- zero scales: where TFLM never reads them or reads them as multiplier 0 --------------------

def test_zero_bias_scale_is_unused(tmp_path):
    matches_tflm_with_note(conv_model(bias_scale=0.0), xs(), tmp_path,
                           "bias quantization scale 0.0 unused")


def test_zero_and_subnormal_filter_channel_scales(tmp_path):
    """Channels with a zero or subnormal weight scale (a pruned channel): TFLM's multiplier is
    0 there, so the channel is the output zero point; the other channels are unchanged."""
    w_scales = np.array([0.004, 0.0, 0.006, 1e-42, 0.003, 0.005, 0.0, 0.002])
    matches_tflm_with_note(conv_model(w_scales=w_scales), xs(), tmp_path,
                           "3 of 8 weight scale(s) zero or subnormal")


def test_zero_activation_scale_is_refused():
    """The nearest file TFLM does not meaningfully run: a zero output scale (TFLM divides by it
    and writes the zero point everywhere); refused as before."""
    mb = ModelBuilder()
    x = mb.input([1, 4], "int8", scale=0.05, zero_point=0)
    y = mb.tensor([1, 4], "int8", scale=0.0, zero_point=0)
    mb.op("RELU", [x], [y])
    mb.output(y)
    refused(mb.build(), "quantization scale 0.0 is not a positive finite number")


# --- custom ops of other runtimes: TFLM has no registration; unsupported, not malformed ---------

def test_accelerator_custom_ops_are_unsupported_not_malformed(tmp_path):
    """The shapes of XMOS xformer's output (as in lib_tflite_micro's test models): an
    XC_ld_weights op with no inputs and options in XMOS's own format (not a flexbuffer), and an
    op reading a scratch tensor nothing produces (as Vela's ethos-u op does; TFLM's own
    person_detect_vela.tflite is in tests/corpus). TFLM refuses them for want of a registration;
    eerie-c names the op as unsupported, with a hint, instead of calling the file malformed."""
    mb = ModelBuilder()
    x = mb.input([1, 8], "int8", scale=0.1, zero_point=0)
    w = mb.tensor([8], "int8", scale=0.1, zero_point=0)
    mb.custom_op("XC_ld_weights", [], [w])
    mb.ops[-1].customOptions = [0xFC, 0xFF, 0x00, 0x17]   # XMOS's binary options
    y = mb.tensor([1, 8], "int8", scale=0.1, zero_point=0)
    mb.custom_op("XC_add", [x, w], [y])
    mb.output(y)
    m = mb.build()
    xs = [np.zeros((1, 1, 8), np.int8)]
    tflm_refuses(m, xs)
    msg = refused(m, "unsupported operator: op 0 (CUSTOM:XC_ld_weights", "has no first input",
                  "an XMOS xcore op written by xformer")
    assert "malformed" not in msg

    mb = ModelBuilder()
    x = mb.input([1, 8], "int8", scale=0.1, zero_point=0)
    scratch = mb.tensor([64], "uint8", name="_split_1_scratch")
    y = mb.tensor([1, 8], "int8", scale=0.1, zero_point=0)
    mb.custom_op("ethos-u", [x, scratch], [y])
    mb.output(y)
    m = mb.build()
    tflm_refuses(m, xs)
    msg = refused(m, "unsupported operator: op 0 (CUSTOM:ethos-u", "'_split_1_scratch'), which no op produces",
                  "an Arm Ethos-U NPU command stream written by Vela")
    assert "malformed" not in msg
