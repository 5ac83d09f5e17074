"""`eerie-c validate` (eerie_c/validation.py): the compiled model against its reference on the
user's inputs. Exit 0 within the contract, 1 outside it (a corrupted output must be caught), 2
on bad input with one line and nothing written; the numbers in the table are the ones
computed here from the reference's outputs; a board runs every input in one QEMU boot."""
from __future__ import annotations

import json

import numpy as np
import pytest

import eerie_c
from conftest import require_board_tools, tflm_run
from eerie_c.cli import main
from eerie_c.validation_metrics import Contract, compare_output
from tflite_builder import ModelBuilder


def _int8_model(path):
    """Two named int8 inputs x, y -> ADD -> FULLY_CONNECTED -> 10 int8 scores."""
    rng = np.random.default_rng(3)
    mb = ModelBuilder()
    x = mb.input([1, 16], "int8", scale=0.05, zero_point=-3, name="x")
    y = mb.input([1, 16], "int8", scale=0.04, zero_point=2, name="y")
    s = mb.tensor([1, 16], "int8", scale=0.08, zero_point=1)
    mb.op("ADD", [x, y], [s], "AddOptions")
    w = mb.const(rng.integers(-127, 128, (10, 16)), "int8", scale=[0.02], zero_point=[0])
    b = mb.const(rng.integers(-500, 500, (10,)), "int32", scale=[0.08 * 0.02], zero_point=[0])
    o = mb.tensor([1, 10], "int8", scale=0.25, zero_point=-10, name="scores")
    mb.op("FULLY_CONNECTED", [s, w, b], [o], "FullyConnectedOptions")
    mb.output(o)
    path.write_bytes(mb.build())
    return path


def _float_model(path):
    rng = np.random.default_rng(4)
    mb = ModelBuilder()
    x = mb.input([1, 8], "float32", name="x")
    w = mb.const(rng.standard_normal((5, 8)).astype(np.float32), "float32")
    b = mb.const(rng.standard_normal(5).astype(np.float32), "float32")
    o = mb.tensor([1, 5], "float32")
    mb.op("FULLY_CONNECTED", [x, w, b], [o], "FullyConnectedOptions")
    mb.output(o)
    path.write_bytes(mb.build())
    return path


def _int8_inputs(n, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(-128, 128, (n, 1, 16), dtype=np.int8) for _ in range(2)]


def test_metrics_are_the_ones_computed_by_hand():
    """Two inferences of a 4-score output: one bit-exact, one off by (1, -2) in two scores."""
    ref = np.array([[[0, 4, 1, -3]], [[2, 1, 0, 5]]], np.int8)
    got = np.array([[[0, 4, 1, -3]], [[3, 1, 0, 3]]], np.int8)
    spec = {"name": "s", "shape": [1, 4], "zero_point": 0}
    st = compare_output(0, spec, got, ref, Contract("exact"), labels=np.array([1, 0]))
    assert (st.compared, st.bit_exact, st.within) == (2, 1, 1) and not st.ok
    assert st.bit_exact_elements == 6 / 8
    assert st.max_abs_error == 2 and st.mean_abs_error == pytest.approx(3 / 8)
    assert st.rmse == pytest.approx(np.sqrt(5 / 8))
    g, r = got.ravel().astype(float), ref.ravel().astype(float)
    assert st.cosine == pytest.approx(g @ r / np.linalg.norm(g) / np.linalg.norm(r))
    # second inference: got's argmax is 0 (3 at 0 ties 3 at 3; the first wins), ref's is 3
    assert st.top1_agreement == 0.5
    assert (st.accuracy, st.reference_accuracy) == (1.0, 0.5)   # labels 1, 0
    # the tolerances: one step, float relative, absolute
    assert Contract("steps", 0.5).within(np.array([[1.0], [1.6]]), np.array([[0.5], [0.5]])).tolist() == [True, False]
    near = Contract("float").within   # 1e-5 x 1.0 + 1e-7 x max|ref| (100) = 2e-5 on the 1.0
    assert near(np.array([[1.0 + 1.5e-5, 100.0]]), np.array([[1.0, 100.0]])).tolist() == [True]
    assert near(np.array([[1.0 + 3e-5, 100.0]]), np.array([[1.0, 100.0]])).tolist() == [False]
    assert Contract("absolute").within(np.array([[np.nan, 2.0]]), np.array([[np.nan, 2.0 + 5e-6]])).tolist() == [True]


def test_int8_host_bit_exact_with_labels(tmp_path, capsys):
    """Inputs from a .npz keyed by input name (in the file in the other order), labels: exit 0,
    bit-exact, and the accuracies are the ones computed here from TFLM's outputs."""
    model = _int8_model(tmp_path / "m.tflite")
    xs = _int8_inputs(25)
    np.savez(tmp_path / "in.npz", y=xs[1], x=xs[0])
    labels = np.random.default_rng(1).integers(0, 10, 25)
    np.save(tmp_path / "labels.npy", labels)
    out = tmp_path / "val"
    rc = main(["validate", str(model), "--inputs", str(tmp_path / "in.npz"), "--labels",
               str(tmp_path / "labels.npy"), "-o", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    ref = tflm_run(model, xs)[0]
    ref_acc = float(np.mean(ref.reshape(25, -1).argmax(1) == labels))
    assert "within contract    25 / 25  (bit-exact)" in text
    assert f"compiled {100 * ref_acc:.1f}%, reference {100 * ref_acc:.1f}%" in text
    v = json.loads((out / "report.json").read_text())["validation"]
    (o,) = v["outputs"]
    assert v["ok"] and v["count"] == 25 and o["bit_exact"] == 25 and o["max_abs_error"] == 0
    assert o["accuracy"] == o["reference_accuracy"] == ref_acc and o["top1_agreement"] == 1.0
    assert "## Validation" in (out / "report.md").read_text()


def test_a_wrong_compiled_output_exits_1(tmp_path, capsys, monkeypatch):
    """The comparison can fail: one score of one inference off by one gives exit 1, and the
    table counts that one inference outside the contract."""
    import eerie_c.runner as runner
    real = runner.run_compiled

    def off_by_one(*a, **kw):
        outs = real(*a, **kw)
        outs[0] = outs[0].copy()
        outs[0][7, 0, 3] = outs[0][7, 0, 3] + (1 if outs[0][7, 0, 3] < 127 else -1)
        return outs
    monkeypatch.setattr(runner, "run_compiled", off_by_one)
    model = _int8_model(tmp_path / "m.tflite")
    rc = main(["validate", str(model), "--count", "12"])
    text = capsys.readouterr().out
    assert rc == 1, text
    assert "within contract    11 / 12  (bit-exact)" in text and "max abs error      1\n" in text
    assert "FAIL: output 0: 1 of 12 inputs outside bit-exact" in text


def test_progress_bar_on_a_terminal(tmp_path):
    """On a terminal the reference's inferences show a bar counting up to N (redrawn in place);
    -q shows nothing; the table still goes to stdout."""
    from test_cli import eerie_tty
    model = _int8_model(tmp_path / "m.tflite")
    code, term = eerie_tty("validate", model, "--count", "7")
    assert code == 0 and "\reerie-c: reference: TFLM" in term and "] 7/7" in term, term
    code, quiet = eerie_tty("-q", "validate", model, "--count", "7")
    assert code == 0 and quiet == ""


def test_float_model_random_inputs(tmp_path):
    res = eerie_c.validate(_float_model(tmp_path / "f.tflite"), count=10)
    (st,) = res.outputs
    assert res.ok and res.exit_code == 0 and st.compared == 10
    assert st.contract.startswith("|err| <= 1e-05 |ref|") and st.cosine > 0.999999


def test_directory_of_npy_files(tmp_path, capsys):
    """A directory: single inferences and a batch, in file-name order, 5 inferences in all;
    the compiled outputs (eerie_c.run on the same 5, in that order) are the validated ones."""
    model = _float_model(tmp_path / "f.tflite")
    xs = np.random.default_rng(2).standard_normal((5, 1, 8)).astype(np.float32)
    d = tmp_path / "inputs"
    d.mkdir()
    np.save(d / "a.npy", xs[0])
    np.save(d / "b.npy", xs[1:4])
    np.save(d / "c.npy", xs[4])
    res = eerie_c.validate(model, inputs=d)
    assert res.ok and res.count == 5 and res.outputs[0].compared == 5
    assert eerie_c.validate(model, inputs=d, count=2).outputs[0].compared == 2   # the first 2
    ref = tflm_run(model, [xs])[0]
    (got,), _ = eerie_c.run(model, [xs])
    err = np.abs(got.astype(np.float64) - ref)
    assert res.outputs[0].max_abs_error == err.max() and res.outputs[0].bit_exact == \
        sum(np.array_equal(g, r) for g, r in zip(got, ref))
    np.save(d / "d.npy", np.zeros((2, 8), np.float32))
    assert main(["validate", str(model), "--inputs", str(d)]) == 2
    assert "d.npy: shape [2, 8], but the model's input 0 'x' is [1, 8]" in capsys.readouterr().err


@pytest.mark.parametrize("case,message", [
    ("shape", "in.npz['y']: shape [4, 1, 8], but the model's input 1 'y' is [1, 16]"),
    ("dtype", "in.npz['x']: dtype float32, but the model's input 0 'x' is int8 [1, 16]"),
    ("one array", "in.npy: 1 array(s), but the model has 2 input(s) ['x', 'y']"),
    ("missing", "nope.npz: no such file"),
    ("key", "in.npz: arrays ['x', 'z'] do not match the model's input(s) ['x', 'y']"),
    ("count", "in.npz: the arrays hold different numbers of inferences [3, 4]"),
    ("labels", "labels.npy: 3 labels for 4 inputs"),
    ("count and inputs", "--count 5: "),
])
def test_bad_inputs_exit_2_with_one_line_and_nothing_written(tmp_path, capsys, case, message):
    model = _int8_model(tmp_path / "m.tflite")
    xs = _int8_inputs(4)
    inputs = tmp_path / "in.npz"
    extra = []
    if case == "shape":
        np.savez(inputs, x=xs[0], y=np.zeros((4, 1, 8), np.int8))
    elif case == "dtype":
        np.savez(inputs, x=xs[0].astype(np.float32), y=xs[1])
    elif case == "one array":
        inputs = tmp_path / "in.npy"
        np.save(inputs, xs[0])
    elif case == "missing":
        inputs = tmp_path / "nope.npz"
    elif case == "key":
        np.savez(inputs, x=xs[0], z=xs[1])
    elif case == "count":
        np.savez(inputs, x=xs[0][:3], y=xs[1])
    elif case == "labels":
        np.savez(inputs, x=xs[0], y=xs[1])
        np.save(tmp_path / "labels.npy", np.arange(3))
        extra = ["--labels", str(tmp_path / "labels.npy")]
    else:
        np.savez(inputs, x=xs[0], y=xs[1])
        extra = ["--count", "5"]
    out = tmp_path / "val"
    rc = main(["validate", str(model), "--inputs", str(inputs), "-o", str(out), *extra])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.count("\n") == 1 and err.startswith("eerie-c: error: ") and message in err, err
    assert not out.exists()


def test_missing_reference_runtime_names_the_pip_command(tmp_path, capsys, monkeypatch):
    import sys
    for m in ("tflite_micro", "tflite_micro.python", "tflite_micro.python.tflite_micro"):
        monkeypatch.setitem(sys.modules, m, None)   # importing it fails
    rc = main(["validate", str(_int8_model(tmp_path / "m.tflite"))])
    err = capsys.readouterr().err
    assert rc == 2 and "pip install 'eerie-c[validate]'" in err and err.count("\n") == 1, err


def test_board_runs_every_input_in_one_boot(tmp_path, monkeypatch):
    require_board_tools("mps2-an386")
    import eerie_c.toolchain.firmware as firmware
    boots = []
    real = firmware.run_qemu

    def counted(*a, **kw):
        boots.append(1)
        return real(*a, **kw)
    monkeypatch.setattr(firmware, "run_qemu", counted)
    res = eerie_c.validate(_int8_model(tmp_path / "m.tflite"), board="mps2-an386", count=60)
    assert len(boots) == 1
    (st,) = res.outputs
    assert res.ok and st.compared == st.bit_exact == 60 and res.where == "mps2-an386"
    assert res.report["board"] == "mps2-an386" and res.report["instructions"] > 0


def test_riscv_board_bit_exact_in_one_boot(tmp_path):
    """The same contract on a RISC-V board: every input through one riscv-virt boot."""
    require_board_tools("riscv-virt")
    xs = _int8_inputs(40, seed=7)
    res = eerie_c.validate(_int8_model(tmp_path / "m.tflite"), board="riscv-virt", inputs=xs)
    (st,) = res.outputs
    assert res.ok and st.compared == st.bit_exact == 40 and res.where == "riscv-virt"
    assert res.report["board"] == "riscv-virt" and res.report["instructions"] > 0
    # the reference, run here: the table counted real agreement, not its own outputs
    ref = tflm_run(tmp_path / "m.tflite", xs)[0]
    assert st.top1_agreement == 1.0 and ref.shape == (40, 1, 10)


def test_dynamic_sizes_are_refused_with_one_line(tmp_path, capsys):
    """A .pt2 exported with a dynamic batch: validate needs one shape per input, so it refuses
    with exit 2, one line naming the reason, and nothing written."""
    import torch
    net = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.ReLU()).eval()
    ep = torch.export.export(net, (torch.randn(3, 6),),
                             dynamic_shapes=({0: torch.export.Dim("batch", max=8)},))
    path = tmp_path / "dyn.pt2"
    torch.export.save(ep, str(path))
    out = tmp_path / "val"
    rc = main(["validate", str(path), "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    assert "validate does not support programs with dynamic sizes" in err and "dyn.pt2" in err, err
    assert not out.exists()


def _torch_net():
    import torch
    from torch import nn
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(8, 6)).eval(), torch.randn(1, 3, 8, 8)


def test_pt2_float_host(tmp_path):
    import torch
    net, x = _torch_net()
    path = tmp_path / "net.pt2"
    torch.export.save(torch.export.export(net, (x,)), str(path))
    res = eerie_c.validate(path, count=8)
    (st,) = res.outputs
    assert res.ok and st.compared == 8 and st.contract == "|err| <= 1e-05 max(1, max|ref|)"
    assert res.reference == "PyTorch eager" and st.top1_agreement == 1.0
    # the module itself, exported here: the same program, the same contract
    res = eerie_c.validate(net, example_args=(x,), count=3)
    assert res.ok and res.model == "Sequential (torch.export)" and res.outputs[0].compared == 3


def test_pt2e_int8_host_within_one_step(tmp_path):
    import torch
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from torchao.testing.pt2e._xnnpack_quantizer import (XNNPACKQuantizer,
                                                          get_symmetric_quantization_config)
    net, x = _torch_net()
    q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    prepared = prepare_pt2e(torch.export.export(net, (x,)).module(check_guards=False), q)
    for _ in range(8):
        prepared(torch.randn(x.shape))
    converted = convert_pt2e(prepared)
    path = tmp_path / "net_int8.pt2"
    torch.export.save(torch.export.export(converted, (x,)), str(path))
    xs = np.random.default_rng(5).uniform(-2, 2, (30, 1, 3, 8, 8)).astype(np.float32)
    res = eerie_c.validate(path, inputs=[xs])
    (st,) = res.outputs
    step = res.report["quantization"]["output_steps"][0]
    assert step > 0 and st.contract == f"|err| <= 1 output step ({step:.6g})"
    assert res.ok and st.within == 30
    # the table's numbers, recomputed from the converted program's eager outputs and a run
    with torch.no_grad():
        ref = np.stack([converted(torch.from_numpy(x)).numpy() for x in xs])
    (got,), _ = eerie_c.run(path, [xs])
    err = np.abs(got.astype(np.float64) - ref)
    assert err.max() > 0, "no difference at all: the numbers below would test nothing"
    assert st.max_abs_error == pytest.approx(err.max()) and st.mean_abs_error == pytest.approx(err.mean())
    assert st.rmse == pytest.approx(np.sqrt(np.mean(err ** 2)))
    assert st.bit_exact == sum(np.array_equal(g, r) for g, r in zip(got, ref))
    assert st.top1_agreement == np.mean(got.reshape(30, -1).argmax(1) == ref.reshape(30, -1).argmax(1))
