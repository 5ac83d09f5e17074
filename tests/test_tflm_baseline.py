"""The pure-Python parts of bench/tflm_baseline (no TFLM sources, no QEMU): the pinned-commit
file, the resolver calls and C sources the harness generates for a model, the linker script
it derives from the board's, and measure()'s one-line error when nothing is built."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tflite_builder import ModelBuilder

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import tflm_baseline  # noqa: E402
from tflm_baseline import harness, pins  # noqa: E402


def test_pins_file_names_every_dependency_at_one_commit():
    p = pins.load_pins()
    assert p[0].name == "tflite-micro" and p[0].dest == ""
    assert {x.dest for x in p[1:]} == {"cmsis_nn", "cmsis", "cmsis/Cortex_DFP", "flatbuffers",
                                       "gemmlowp", "ruy", "kissfft"}
    assert all(len(x.commit) == 40 for x in p)
    assert pins.pins_key(p).startswith("tflm-" + p[0].commit[:10])


@pytest.mark.parametrize("text, message", [
    ('[tflite-micro]\nrepo = "a/b"\ncommit = "abc"\ndest = ""\n', "40 lowercase hex"),
    ('[tflite-micro]\nrepo = "a/b"\ndest = ""\n', "needs a string 'commit'"),
    ('[x]\nrepo = "a/b"\ncommit = "' + "0" * 40 + '"\ndest = "x"\n', "exactly one entry"),
    ('[tflite-micro]\nrepo = "a/b"\ncommit = "' + "0" * 40 + '"\ndest = ""\nurl = "u"\n', "unknown field"),
    ("[tflite-micro\n", "pins.toml"),
])
def test_a_bad_pins_file_is_refused_in_one_line(tmp_path, text, message):
    f = tmp_path / "pins.toml"
    f.write_text(text)
    with pytest.raises(pins.PinError, match=message) as e:
        pins.load_pins(f)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("op, method", [
    ("CONV_2D", "AddConv2D"), ("DEPTHWISE_CONV_2D", "AddDepthwiseConv2D"),
    ("FULLY_CONNECTED", "AddFullyConnected"), ("PADV2", "AddPadV2"), ("ADD_N", "AddAddN"),
    ("BATCH_MATMUL", "AddBatchMatMul"), ("SPACE_TO_BATCH_ND", "AddSpaceToBatchNd"),
    ("UNIDIRECTIONAL_SEQUENCE_LSTM", "AddUnidirectionalSequenceLSTM"), ("RELU6", "AddRelu6"),
])
def test_resolver_method_names(op, method):
    assert harness.resolver_method(op) == method


def _small_model() -> bytes:
    mb = ModelBuilder()
    x = mb.input([1, 4, 4, 2], "int8", scale=0.1, zero_point=1)
    y = mb.tensor([1, 2, 2, 2], "int8", scale=0.1, zero_point=1)
    z = mb.tensor([1, 2, 2, 2], "int8", scale=0.1, zero_point=1)
    mb.op("MAX_POOL_2D", [x], [y], "Pool2DOptions", padding=1, strideW=2, strideH=2,
          filterWidth=2, filterHeight=2)
    mb.op("ADD", [y, y], [z], "AddOptions")
    mb.output(z)
    return mb.build()


def test_harness_registers_exactly_the_models_operators():
    model = _small_model()
    assert harness.model_ops(model) == ["MAX_POOL_2D", "ADD"]
    files = harness.harness_sources(model, "tiny", "mps2-an386", {"AddMaxPool2D", "AddAdd"})
    main = files["main.cc"]
    assert "MicroMutableOpResolver<2> resolver;" in main
    assert "resolver.AddMaxPool2D()" in main and "resolver.AddAdd()" in main
    assert "@" not in main   # every placeholder filled
    data = files["model_data.cc"]
    assert f"/* {len(model)} bytes" in data and data.count("0x") == len(model)
    first = ", ".join(f"0x{b:02x}" for b in model[:16])
    assert first in data


def test_harness_refuses_an_operator_tflm_lacks():
    with pytest.raises(harness.HarnessError, match="operator ADD: .* no AddAdd"):
        harness.harness_sources(_small_model(), "tiny", "mps2-an386", {"AddMaxPool2D"})


def test_linker_script_gains_the_constructor_table():
    board_ld = (REPO / "boards" / "mps2-an386.ld").read_text()
    ld = harness.linker_script(board_ld)
    assert "__init_array_start = .;" in ld and ld.index(".init_array") < ld.index(".ARM.extab")
    assert ld.replace(harness._INIT_ARRAY, "") == board_ld


def test_measure_without_a_build_says_how_to_build(tmp_path, monkeypatch):
    monkeypatch.setenv(pins.CACHE_ENV, str(tmp_path))
    assert not tflm_baseline.is_built("mps2-an386")
    with pytest.raises(tflm_baseline.BaselineNotBuilt, match="TFLM baseline not built .*build.py") as e:
        tflm_baseline.measure(REPO / "models" / "mlperf_tiny" / "ad01_int8.tflite", "mps2-an386")
    assert "\n" not in str(e.value)


def test_compare_tflm_table_says_where_the_tflm_columns_come_from():
    from test_bench_host import load_bench
    bench = load_bench()
    row = {"model": "ad01_int8", "board": "mps2-an386", "instructions": 300, "macs": 100,
           "flash": 1000, "model_flash": 800, "ram": 50, "arena": 20, "stack": 10,
           "compile_s": 1.0, "exact": True}
    measured = bench.tables([dict(row, tflm=bench.Tflm(600, 2000, 200, "measured"))])
    assert measured.startswith("TFLM + CMSIS-NN columns: measured on the same model")
    assert "| 300 | 600 | 0.50x | 3.00 (6.00) |" in measured
    ref = bench.tables([dict(row, tflm=bench.tflm_reference("ad01_int8", "mps2-an386"))])
    assert ref.startswith("TFLM + CMSIS-NN columns: the reference figures typed in from issue 6")
    assert f"| {bench.REFERENCE['ad01_int8'].instructions:,} |" in ref
    wrong = bench.tables([dict(row, tflm=bench.Tflm(600, 2000, 200, "measured", exact=False))])
    assert "yes (TFLM firmware: NO)" in wrong
