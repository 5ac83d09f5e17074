"""Hostile model and input files: each is refused with one line naming what is wrong and where,
exit status 2, no traceback, nothing written. Compiler bugs are one line with exit status 3."""
from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tflite

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tflite_builder import ACT, ModelBuilder  # noqa: E402

from eerie_c import cli  # noqa: E402
from eerie_c.errors import EerieError  # noqa: E402
from eerie_c.frontend.tflite import load_tflite  # noqa: E402


def eerie(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "eerie_c.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def assert_clean(p, code=2, *needles):
    assert p.returncode == code, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def fc_builder(units=4, depth=6, name_w="w"):
    rng = np.random.default_rng(0)
    mb = ModelBuilder()
    x = mb.input([1, depth], "int8", scale=0.05, zero_point=-3, name="x")
    w = mb.const(rng.integers(-127, 128, (units, depth)), "int8", scale=0.01, zero_point=0, name=name_w)
    b = mb.const(rng.integers(-100, 100, (units,)), "int32", scale=0.0005, zero_point=0, name="b")
    y = mb.tensor([1, units], "int8", scale=0.1, zero_point=2, name="y")
    mb.op("FULLY_CONNECTED", [x, w, b], [y], "FullyConnectedOptions", fusedActivationFunction=ACT["NONE"])
    mb.output(y)
    return mb, (x, w, b, y)


def load_error(data: bytes) -> str:
    with pytest.raises(EerieError) as e:
        load_tflite(data, "m")
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_baseline_loads():
    mb, _ = fc_builder()
    assert len(load_tflite(mb.build(), "m").ops) == 1


def test_op_tensor_index_out_of_range():
    mb, (x, w, b, y) = fc_builder()
    mb.ops[0].inputs = [x, 99, b]
    msg = load_error(mb.build())
    assert "tensor index 99 is out of range (4 tensors)" in msg and "op 0 (FULLY_CONNECTED)" in msg


def test_buffer_index_out_of_range():
    mb, (x, w, b, y) = fc_builder()
    mb.tensors[w].buffer = 1000
    msg = load_error(mb.build())
    assert "buffer index 1000 is out of range" in msg and "tensor 1 ('w')" in msg


def test_shape_inconsistent_with_buffer():
    mb, (x, w, b, y) = fc_builder()
    mb.tensors[w].shape = [4, 7]
    msg = load_error(mb.build())
    assert "needs 28 bytes but buffer" in msg and "tensor 1 ('w')" in msg


@pytest.mark.parametrize("shape, needle", [
    ([-1, 6], "negative dimension"),
    ([1, 1, 1, 1, 1, 1, 1, 6], "rank 8"),
    ([1 << 20, 1 << 20], "elements (at most"),
])
def test_bad_activation_shapes(shape, needle):
    mb, (x, w, b, y) = fc_builder()
    mb.tensors[x].shape = shape
    msg = load_error(mb.build())
    assert needle in msg and "tensor 0 ('x')" in msg


def test_per_channel_scale_count():
    mb, (x, w, b, y) = fc_builder()
    mb.tensors[w].quantization.scale = [0.01] * 3
    mb.tensors[w].quantization.zeroPoint = [0] * 3
    msg = load_error(mb.build())
    assert "3 per-channel weight scales for 4 output channels" in msg and "op 0 (FULLY_CONNECTED" in msg


def test_scale_vs_zero_point_count_is_normalised():
    """TFLM reads the first zero point when the counts differ (tests/robustness/
    test_tflm_leniency.py compares such files with TFLM)."""
    mb, (x, w, b, y) = fc_builder()
    mb.tensors[w].quantization.zeroPoint = [0, 0]
    g = load_tflite(mb.build(), "m")
    assert list(g.t(f"t{w}").quant.zero_point) == [0]
    assert any("1 quantization scale(s) with 2 zero point(s)" in n for n in g.notes), g.notes


@pytest.mark.parametrize("scale", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_scale(scale):
    mb, (x, w, b, y) = fc_builder()
    mb.tensors[y].quantization.scale = [scale]
    assert "not a positive finite number" in load_error(mb.build())


def test_zero_point_out_of_range():
    mb, (x, w, b, y) = fc_builder()
    mb.tensors[y].quantization.zeroPoint = [300]
    assert "zero point 300 is out of range for int8" in load_error(mb.build())


def test_use_before_produce_is_refused():
    mb, (x, w, b, y) = fc_builder()
    z = mb.tensor([1, 4], "int8", scale=0.1, zero_point=2, name="z")
    mb.op("RESHAPE", [y], [z])
    mb.ops.reverse()          # the RESHAPE now reads y before the FC writes it
    mb.outputs = [z]
    assert "used before the op that produces it" in load_error(mb.build())


def test_cycle_is_refused():
    mb, (x, w, b, y) = fc_builder()
    z = mb.tensor([1, 4], "int8", scale=0.1, zero_point=2, name="z")
    mb.op("RESHAPE", [z], [z])
    msg = load_error(mb.build())
    assert "op 1 (RESHAPE" in msg and "z" in msg


def test_tensor_produced_twice():
    mb, (x, w, b, y) = fc_builder()
    mb.op("RESHAPE", [x], [y])
    assert "already produced by op 0" in load_error(mb.build())


def test_output_never_produced():
    mb, (x, w, b, y) = fc_builder()
    z = mb.tensor([1, 4], "int8", scale=0.1, zero_point=2, name="lonely")
    mb.outputs = [z]
    assert "never produced" in load_error(mb.build())


def test_unknown_fused_activation():
    mb, (x, w, b, y) = fc_builder()
    mb.ops[0].builtinOptions.fusedActivationFunction = 4   # TANH
    assert "unsupported fused activation 'TANH'" in load_error(mb.build())


def test_fc_shape_mismatch():
    mb, (x, w, b, y) = fc_builder()
    mb.tensors[y].shape = [1, 5]
    assert "should hold 1 x 4 values" in load_error(mb.build())


def test_negative_vtable_offset():
    """A vtable pointing before the start of the file: the readers would silently read from
    the end of the buffer; the verifier refuses."""
    data = bytearray(fc_builder()[0].build())
    root = struct.unpack_from("<I", data, 0)[0]
    struct.pack_into("<i", data, root, root + 100)
    msg = load_error(bytes(data))
    assert "vtable" in msg and "the model table" in msg


def test_vector_length_past_end():
    mb, _ = fc_builder()
    data = bytearray(mb.build())
    sg = tflite.Model.GetRootAs(bytes(data), 0).Subgraphs(0)
    tab = sg.Tensors(0)._tab
    struct.pack_into("<I", data, tab.Vector(tab.Offset(4)) - 4, 10 ** 8)
    msg = load_error(bytes(data))
    assert "shape (100000000 entries" in msg and "tensor 0" in msg


@pytest.mark.parametrize("cut", [8, 12, 40, 200, -40, -4, -1])
def test_truncations(cut):
    data = fc_builder()[0].build()
    load_error(data[:cut])


# ---------------------------------------------------------------------------------------------
# Through the command line.

def test_cli_malformed_is_one_line_exit_2_nothing_written(tmp_path):
    mb, (x, w, b, y) = fc_builder()
    mb.ops[0].outputs = [77]
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(mb.build())
    out = tmp_path / "out"
    assert_clean(eerie(bad, "-o", out), 2, "malformed TFLite file", "tensor index 77", "op 0")
    assert not out.exists()
    assert not list(tmp_path.glob(".out.*"))


def test_cli_hostile_name_in_error_is_escaped(tmp_path):
    mb, (x, w, b, y) = fc_builder(name_w="evil\nname\x1b[2J")
    mb.tensors[w].shape = [4, 7]
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(mb.build())
    line = assert_clean(eerie(bad, "-o", tmp_path / "o"), 2, "tensor 1 ('evil\\nname\\x1b[2J')")
    assert "\x1b" not in line


def test_cli_directory_and_unreadable_paths(tmp_path):
    d = tmp_path / "dir.tflite"
    d.mkdir()
    assert_clean(eerie(d, "-o", tmp_path / "o"), 2)
    (tmp_path / "x.onnx").write_bytes(b"not supported")
    assert_clean(eerie(tmp_path / "x.onnx", "-o", tmp_path / "o"), 2, "unknown model format")
    assert not (tmp_path / "o").exists()


def _zip(entries) -> bytes:
    import io
    import zipfile
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for k, v in entries.items():
            z.writestr(k, v)
    return buf.getvalue()


@pytest.mark.parametrize("data", [
    b"", b"PK\x03\x04 not really a zip", bytes(range(256)) * 4,
    _zip({"x/archive_format": "pt2", "x/models/model.json": "{not json"}),
    _zip({"archive_format": "pt2", "version": "999", "models/model.json": "[]"}),
], ids=["empty", "fake-zip", "bytes", "bad-json", "bad-version"])
def test_cli_hostile_pt2(tmp_path, data):
    bad = tmp_path / "bad.pt2"
    bad.write_bytes(data)
    out = tmp_path / "o"
    assert_clean(eerie(bad, "-o", out), 2)
    assert not out.exists()


def test_cli_unwritable_output(tmp_path):
    mb, _ = fc_builder()
    good = tmp_path / "m.tflite"
    good.write_bytes(mb.build())
    blocker = tmp_path / "file"
    blocker.write_text("I am a file")
    assert_clean(eerie(good, "-o", blocker / "sub"), 2)
    assert blocker.read_text() == "I am a file"


@pytest.mark.parametrize("name", ["_Bool", "__x", "_Reserved", "eerie_rt", "a" * 64, "x-y", ""])
def test_cli_rejects_reserved_names(tmp_path, name):
    mb, _ = fc_builder()
    good = tmp_path / "m.tflite"
    good.write_bytes(mb.build())
    out = tmp_path / "o"
    if name == "":
        p = eerie(good, "-o", out, "--name", name)
        assert p.returncode in (0, 2) and "Traceback" not in p.stderr   # empty means default
        return
    assert_clean(eerie(good, "-o", out, "--name", name), 2, "not a valid C identifier")
    assert not out.exists()


def test_internal_error_is_one_line_exit_3(tmp_path, monkeypatch, capsys):
    mb, _ = fc_builder()
    good = tmp_path / "m.tflite"
    good.write_bytes(mb.build())
    import eerie_c.pipeline as pipeline   # where compile_model finds compile_graph

    def boom(*a, **k):
        raise ZeroDivisionError("simulated compiler bug\nwith two lines")
    monkeypatch.setattr(pipeline, "compile_graph", boom)
    monkeypatch.delenv("EERIE_C_DEBUG", raising=False)
    assert cli.main([str(good), "-o", str(tmp_path / "o")]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("eerie-c: internal error: ZeroDivisionError")
    assert "please report" in err[0]
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------------------------------------
# .npy inputs to `eerie-c run`.

@pytest.fixture()
def fc_file(tmp_path):
    p = tmp_path / "fc.tflite"
    p.write_bytes(fc_builder()[0].build())
    return p


@pytest.mark.parametrize("make, needle", [
    (lambda d: np.save(d / "x.npy", np.zeros((1, 6), np.float32)), "dtype float32"),
    (lambda d: np.save(d / "x.npy", np.zeros((1, 7), np.int8)), "input 0: shape [1, 7]"),
    (lambda d: np.save(d / "x.npy", np.zeros((0, 1, 6), np.int8)), "zero inferences"),
    (lambda d: np.save(d / "x.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True),
     "not a valid .npy file"),
    (lambda d: (d / "x.npy").write_bytes(b"\x93NUMPY\x01\x00garbage"), "not a valid .npy file"),
    (lambda d: (d / "x.npy").write_bytes(np.lib.format.magic(1, 0) + b"\x10\x00{'descr': '<i1', "
                                         b"'fortran_order': False, 'shape': (1, 6), }\n"), "x.npy"),
    (lambda d: (d / "x.npy").mkdir(), "x.npy"),
])
def test_run_bad_npy(tmp_path, fc_file, make, needle):
    make(tmp_path)
    out = tmp_path / "keep"
    line = assert_clean(eerie("run", fc_file, "--input", tmp_path / "x.npy", "-o", out), 2, needle)
    assert "Traceback" not in line
    assert not out.exists()


def test_run_wrong_input_count(tmp_path, fc_file):
    np.save(tmp_path / "x.npy", np.zeros((1, 6), np.int8))
    assert_clean(eerie("run", fc_file, "--input", tmp_path / "x.npy", "--input", tmp_path / "x.npy"),
                 2, "1 input(s) but 2 were given")
    assert_clean(eerie("run", fc_file, "--input", tmp_path / "missing.npy"), 2, "no such file")


def test_cli_error_text_from_any_stage_is_one_safe_line(tmp_path, monkeypatch, capsys):
    """Kernels may quote model names in their errors: the CLI still prints one line without
    terminal control characters."""
    mb, _ = fc_builder()
    good = tmp_path / "m.tflite"
    good.write_bytes(mb.build())
    import eerie_c.pipeline as pipeline

    def refuse(*a, **k):
        raise EerieError("op 'evil\nname\x1b[2J\x07' is not supported")
    monkeypatch.setattr(pipeline, "compile_graph", refuse)
    assert cli.main([str(good), "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err and "\x07" not in err
    assert "evil name\\x1b[2J\\x07" in err
