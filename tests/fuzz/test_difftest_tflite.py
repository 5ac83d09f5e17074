"""The differential tester's CI slice (docs/testing.md): a fixed-seed slice of random valid
TFLite programs (int8, int16x8, float), each compiled by eerie-c and compared with the
tflite-micro runtime (int bit-exact, float per assert_float_close), a few also on mps2-an386
and riscv-virt in QEMU; plus tests of the tester itself: the shrinker reaches a planted
failure's known minimum, a reproducer folder round-trips, and the campaign command runs,
summarises and records a failure."""
from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from conftest import require_board_tools, tflm_run  # noqa: E402
from difftest import core  # noqa: E402
from difftest import tflite_programs as tp  # noqa: E402
from difftest.tflite_layers import Inconsistent  # noqa: E402

SEED = 20261129
CASES = 150
FLAVOURS = ("int8", "int16x8", "float")
BOARD_CASES = {0: "mps2-an386", 1: "riscv-virt", 2: "mps2-an386", 3: "riscv-virt", 4: "mps2-an386",
               5: "riscv-virt"}
# Cases of the slice that end in a known refusal or bug: {case: reason} (none today).
KNOWN: dict[int, str] = {}


def slice_program(i: int):
    return tp.generate(random.Random(core.case_seed(SEED, i)), FLAVOURS[i % len(FLAVOURS)])


def _check(i: int, target: str, tmp_path: Path):
    if i in KNOWN:
        pytest.xfail(KNOWN[i])
    program = slice_program(i)
    got = core.safe_check(program, target, tmp_path / "work")
    if got.status != core.MATCH:
        program.write_reproducer(tmp_path / "repro")
        pytest.fail(f"case {i} on {target}: {got.status}: {got.detail}\n  program: {program.describe()}\n"
                    f"  rerun: python -m tests.fuzz.campaign --seed {SEED} --case {i} --frontend tflite "
                    f"--flavour {program.flavour}\n  reproducer: {tmp_path / 'repro'}", pytrace=False)


@pytest.mark.parametrize("i", range(CASES), ids=lambda i: f"{FLAVOURS[i % 3]}-case{i}")
def test_slice_host(i, tmp_path):
    _check(i, "host", tmp_path)


@pytest.mark.parametrize("i", sorted(BOARD_CASES), ids=lambda i: f"{BOARD_CASES[i]}-{FLAVOURS[i % 3]}-case{i}")
def test_slice_board(i, tmp_path):
    require_board_tools(BOARD_CASES[i])
    _check(i, BOARD_CASES[i], tmp_path)


CORE_OPS = {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "MUL", "CONCATENATION", "MAX_POOL_2D",
            "AVERAGE_POOL_2D", "PAD", "RESHAPE", "TRANSPOSE", "MEAN", "SOFTMAX", "LOGISTIC", "TANH",
            "UNIDIRECTIONAL_SEQUENCE_LSTM", "IF", "WHILE"}


def test_slice_covers_the_op_mix():
    """The slice draws the core op mix in every flavour, and every op of the generator in
    some flavour."""
    seen: dict[str, set] = {fl: set() for fl in FLAVOURS}
    for i in range(CASES):
        p = slice_program(i)
        seen[p.flavour] |= {layer["op"] for layer in p.spec["layers"]}
    for fl, ops in seen.items():
        assert CORE_OPS <= ops, f"{fl}: the slice never draws {sorted(CORE_OPS - ops)}"
    every = set().union(*tp.OPS.values())
    assert every <= set().union(*seen.values()), sorted(every - set().union(*seen.values()))


# ---------------------------------------------------------------------------------------------
# the tester itself

class PlantedBug(tp.TFLiteProgram):
    """Fails (a fake mismatch, no compile) whenever a CONV_2D with a 3-row kernel reads a node
    at least 2 channels deep: the shrinker must reach exactly that one layer."""
    def check(self, target, workdir):
        try:
            self.built()
        except Inconsistent as e:
            return core.Outcome(core.INVALID, str(e))
        shapes = node_shapes(self.spec)
        for layer in self.spec["layers"]:
            if layer["op"] == "CONV_2D" and layer["kh"] == 3 and shapes[layer["src"][0]][-1] >= 2:
                return core.Outcome(core.MISMATCH, "planted")
        return core.Outcome(core.MATCH)


def node_shapes(spec) -> list[list[int]]:
    from difftest.tflite_layers import FLAVOURS as FL, Node, emit
    from tflite_builder import ModelBuilder
    fl, mb = FL[spec["flavour"]], ModelBuilder()
    nodes = [Node(mb.input(spec["input"], fl.act), spec["input"], tuple(spec["input_q"]) if spec["input_q"] else None)]
    pred = mb.input([1], "bool")
    for layer in spec["layers"]:
        nodes.append(emit(mb, fl, layer, [nodes[i] for i in layer["src"]], pred))
    return [n.shape for n in nodes]


def test_shrinker_reaches_the_planted_minimum(tmp_path):
    spec = {"flavour": "int8", "input": [1, 8, 6, 4], "input_q": [0.05, 3], "inputs_seed": 1, "layers": [
        {"op": "DEPTHWISE_CONV_2D", "src": [0], "seed": 1, "kh": 3, "kw": 2, "stride": 1, "dil": 1,
         "padding": "SAME", "act": "RELU", "per_channel": True, "mult": 2},
        {"op": "MAX_POOL_2D", "src": [1], "seed": 2, "fh": 2, "fw": 2, "stride": 2, "padding": "SAME", "act": "NONE"},
        {"op": "CONV_2D", "src": [2], "seed": 3, "kh": 3, "kw": 3, "stride": 2, "dil": 1, "padding": "SAME",
         "act": "RELU6", "per_channel": True, "cout": 6},
        {"op": "MEAN", "src": [3], "seed": 4, "axes": [1, 2], "keep": False},
        {"op": "FULLY_CONNECTED", "src": [4], "seed": 5, "units": 5, "act": "NONE", "per_channel": False},
    ]}
    p = PlantedBug(spec)
    first = p.check("host", tmp_path)
    assert first.status == core.MISMATCH
    res = core.shrink(p, first, "host", tmp_path)
    layers = res.program.spec["layers"]
    assert [layer["op"] for layer in layers] == ["CONV_2D"], res.program.describe()
    conv = layers[0]
    assert conv["src"] == [0] and conv["kh"] == 3
    assert (conv["kw"], conv["stride"], conv["act"], conv["per_channel"], conv["cout"]) == (1, 1, "NONE", False, 1)
    assert res.program.spec["input"] == [1, 1, 1, 2]      # channels >= 2 keep it failing
    assert res.program.spec["input_q"][1] == 0
    assert res.outcome.status == core.MISMATCH and res.steps > 5


def test_shrinker_does_not_wander_to_another_failure():
    crash = core.Outcome(core.CRASH, "CompilerBug: stack bound")
    assert crash.same_kind(core.Outcome(core.CRASH, "CompilerBug: other words"))
    assert not crash.same_kind(core.Outcome(core.CRASH, "CalledProcessError: gcc"))
    assert not crash.same_kind(core.Outcome(core.MISMATCH, "x"))


def test_dropping_a_layer_rewires_its_readers():
    spec = {"flavour": "float", "input": [1, 4, 4, 2], "input_q": None, "inputs_seed": 0, "layers": [
        {"op": "TANH", "src": [0], "seed": 0},
        {"op": "LOGISTIC", "src": [1], "seed": 0},
        {"op": "ADD", "src": [2, 1], "seed": 0, "act": "NONE"}]}
    s = tp._drop_layer(spec, 1)
    assert [layer["src"] for layer in s["layers"]] == [[0], [1, 1]]
    assert tp.outputs_of(s) == [2]


def test_reproducer_round_trip(tmp_path):
    p = slice_program(7)
    p.write_reproducer(tmp_path)
    files = {f.name for f in tmp_path.iterdir()}
    assert {"model.tflite", "inputs.npz", "spec.json", "README.md"} <= files
    back = tp.load_reproducer(tmp_path)
    assert back.spec == p.spec and back.describe() == p.describe()
    model, inputs = back.built()
    assert model == (tmp_path / "model.tflite").read_bytes()
    saved = np.load(tmp_path / "inputs.npz")
    assert len(saved.files) == len(inputs)
    for k, x in enumerate(inputs):
        np.testing.assert_array_equal(saved[f"arr_{k}"], x)
    # what the README tells a reader to run
    assert "python -m tests.fuzz.campaign --reproduce" in (tmp_path / "README.md").read_text()
    ref = tflm_run(model, inputs)
    assert ref and all(r.shape[0] == tp.N_INFERENCES for r in ref)


def test_campaign_runs_and_summarises(tmp_path, capsys):
    import campaign
    code = campaign.main(["--count", "3", "--seed", str(SEED), "--frontend", "tflite", "--jobs", "1",
                          "--board-share", "0", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "| tflite | int8 | 1 | 1 | 0 | 0 | 0 | 0 |" in out, out
    assert "| **all** | | 3 | 3 | 0 | 0 | 0 | 0 |" in out, out
    results = json.loads((tmp_path / "results.json").read_text())
    assert [r["index"] for r in results] == [0, 1, 2]
    assert (tmp_path / "summary.md").read_text().startswith("Campaign seed")


def test_campaign_shrinks_and_records_a_failure(tmp_path, capsys):
    """A registered frontend whose programs carry the planted bug: exit 1, the failure folder
    holds the shrunk program, and --reproduce on it fails again."""
    import campaign

    def gen(rng, flavour):
        spec = tp.generate_spec(np.random.default_rng(rng.getrandbits(63)), flavour)
        spec["layers"].append({"op": "CONV_2D", "src": [0], "seed": 9, "kh": 3, "kw": 3, "stride": 1,
                               "dil": 1, "padding": "SAME", "act": "NONE", "per_channel": False, "cout": 3})
        spec["input"] = [1, 5, 5, 4]
        spec["layers"] = spec["layers"][-1:]
        return PlantedBug(spec)

    core.register("planted", ["int8"], gen, lambda folder: PlantedBug(json.loads((folder / "spec.json").read_text())))
    try:
        code = campaign.main(["--count", "1", "--seed", "5", "--frontend", "planted", "--jobs", "1",
                              "--board-share", "0", "--out", str(tmp_path)])
        out = capsys.readouterr().out
        assert code == 1, out
        assert "| planted | int8 | 1 | 0 | 1 | 0 | 0 | 0 |" in out, out
        folder = tmp_path / "failures" / "planted-int8-5-0"
        case = json.loads((folder / "case.json").read_text())
        assert case["status"] == core.MISMATCH and case["shrunk"].endswith("1=CONV_2D(0)")
        assert json.loads((folder / "spec.json").read_text())["input"] == [1, 1, 1, 2]
        assert campaign.main(["--reproduce", str(folder)]) == 1
    finally:
        core.GENERATORS.pop("planted", None)
