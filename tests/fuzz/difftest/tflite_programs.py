"""Random valid TFLite programs (frontend "tflite"; flavours int8, int16x8, float), checked
against the tflite-micro runtime: int outputs bit-exact, float outputs per
conftest.assert_float_close.

A program is a small spec (plain JSON): the input shape, and a list of layers, each an op with
its parameters and the nodes it reads (node 0 is the model input, layer i makes node i + 1).
Every node no layer reads is a model output, so branches either re-merge (ADD, MUL,
CONCATENATION) or end as extra outputs. The .tflite is rebuilt from the spec with
tests/tflite_builder.py (tflite_layers.emit), so shrinking edits the spec: drop a layer (its
readers read its first source instead), halve a dimension, simplify a layer's parameters.
"""
from __future__ import annotations

import copy
import json
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

TESTS = Path(__file__).resolve().parents[2]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from tflite_builder import ModelBuilder  # noqa: E402

from . import core  # noqa: E402
from .tflite_layers import FLAVOURS, Inconsistent, Node, broadcasts_into, draw, emit  # noqa: E402

# Ops by the rank of their (first) source, with their weights in the draw.
OPS = {
    4: {"CONV_2D": 6, "DEPTHWISE_CONV_2D": 4, "MAX_POOL_2D": 2, "AVERAGE_POOL_2D": 2, "PAD": 1,
        "RESHAPE": 2, "TRANSPOSE": 1, "MEAN": 1, "LOGISTIC": 1, "TANH": 1, "SOFTMAX": 1,
        "ADD": 3, "MUL": 1, "CONCATENATION": 2, "IF": 1, "WHILE": 1, "RELU": 1, "RELU6": 1,
        "LEAKY_RELU": 1, "HARD_SWISH": 1, "STRIDED_SLICE": 1, "RESIZE_NEAREST_NEIGHBOR": 1,
        "RESIZE_BILINEAR": 1},
    3: {"UNIDIRECTIONAL_SEQUENCE_LSTM": 4, "RESHAPE": 2, "TRANSPOSE": 1, "LOGISTIC": 1,
        "TANH": 1, "SOFTMAX": 1, "ADD": 2, "MUL": 1, "CONCATENATION": 1, "IF": 1, "WHILE": 1,
        "MEAN": 1, "STRIDED_SLICE": 1, "RELU": 1},
    2: {"FULLY_CONNECTED": 6, "SOFTMAX": 1, "LOGISTIC": 1, "TANH": 1, "ADD": 2, "MUL": 1,
        "CONCATENATION": 1, "IF": 1, "WHILE": 1, "RELU6": 1, "LEAKY_RELU": 1, "HARD_SWISH": 1},
}
# Ops TFLM has no kernel for in a flavour.
NOT_IN = {"int16x8": {"HARD_SWISH", "RESIZE_BILINEAR"}}
BINARY = ("ADD", "MUL", "CONCATENATION")
N_INFERENCES = 2     # two invocations: LSTM state carried over, IF taking both branches
# Layer fields a shrink may lower, with their simplest value.
SIMPLER = {"kh": 1, "kw": 1, "stride": 1, "dil": 1, "fh": 1, "fw": 1, "per_channel": False,
           "act": "NONE", "trips": 1, "clip": 0.0, "mult": 1, "keep": True}
HALVE = ("cout", "units")
# Whole-program settings a shrink may reset: the float interface, the compile options.
DEFAULTS = {"io_float": False, "optimize": "balanced", "patch": "off"}


def build(spec: dict) -> tuple[bytes, list[tuple[list[int], str]]]:
    """The spec as a .tflite, and its inputs' (shape, dtype). Raises Inconsistent. With
    io_float (a quantized flavour), the model takes and returns float32 through QUANTIZE and
    DEQUANTIZE, the way converted models with float interfaces do."""
    fl = FLAVOURS[spec["flavour"]]
    mb = ModelBuilder()
    shape, q = list(spec["input"]), (tuple(spec["input_q"]) if spec.get("input_q") else None)
    io_float = bool(spec.get("io_float")) and fl.quantized
    if io_float:
        xf = mb.input(shape, "float32")
        x = Node(mb.tensor(shape, fl.act, **fl.qkw(q)), shape, q)
        mb.op("QUANTIZE", [xf], [x.tid])
    else:
        x = Node(mb.input(shape, fl.act, **fl.qkw(q)), shape, q)
    inputs = [(shape, "float32" if io_float else fl.act)]
    pred = None
    if any(layer["op"] == "IF" for layer in spec["layers"]):
        pred = mb.input([1], "bool")
        inputs.append(([1], "bool"))
    nodes = [x]
    for layer in spec["layers"]:
        if any(i >= len(nodes) for i in layer["src"]):
            raise Inconsistent("a layer reads a later node")
        nodes.append(emit(mb, fl, layer, [nodes[i] for i in layer["src"]], pred))
    outs = outputs_of(spec)
    if not outs:
        raise Inconsistent("no layers")
    for i in outs:
        if io_float:
            y = mb.tensor(nodes[i].shape, "float32")
            mb.op("DEQUANTIZE", [nodes[i].tid], [y])
            mb.output(y)
        else:
            mb.output(nodes[i].tid)
    return mb.build(), inputs


def outputs_of(spec: dict) -> list[int]:
    read = {i for layer in spec["layers"] for i in layer["src"]}
    return [i for i in range(1, len(spec["layers"]) + 1) if i not in read]


def make_inputs(spec: dict, inputs) -> list[np.ndarray]:
    rng = np.random.default_rng(spec["inputs_seed"])
    out = []
    for shape, dt in inputs:
        n = (N_INFERENCES, *shape)
        if dt == "bool":
            out.append(np.array([[True], [False]] * (N_INFERENCES // 2) + [[True]] * (N_INFERENCES % 2)))
        elif dt == "int8":
            out.append(rng.integers(-128, 128, size=n, dtype=np.int8))
        elif dt == "int16":
            out.append(rng.integers(-32768, 32768, size=n, dtype=np.int16))
        else:   # float: around the quantized input's range when the model quantizes it
            q = spec.get("input_q")
            spread = q[0] * FLAVOURS[spec["flavour"]].qmax / 3 if q else 1.0
            out.append((rng.standard_normal(size=n) * spread).astype(np.float32))
    return out


# ---------------------------------------------------------------------------------------------
# generation

def generate_spec(rng: np.random.Generator, flavour: str) -> dict:
    fl = FLAVOURS[flavour]
    r = float(rng.random())
    if r < 0.7:
        shape = [1, int(rng.integers(2, 11)), int(rng.integers(2, 11)), int(rng.integers(1, 9))]
    elif r < 0.85:
        shape = [1, int(rng.integers(1, 7)), int(rng.integers(1, 9))]
    else:
        shape = [1, int(rng.integers(1, 33))]
    input_q = None
    if fl.quantized:
        input_q = [float(0.02 * 2 ** rng.uniform(-2, 2)),
                   int(rng.integers(-100, 101)) if fl.act == "int8" else 0]
    spec = {"flavour": flavour, "input": shape, "input_q": input_q,
            "inputs_seed": int(rng.integers(2**31)), "layers": [],
            "io_float": bool(fl.quantized and rng.random() < 0.25),
            "optimize": str(rng.choice(["balanced", "balanced", "speed", "size"])),
            "patch": "auto" if rng.random() < 0.2 else "off"}
    scratch = ModelBuilder()
    nodes = [Node(scratch.input(shape, fl.act, **fl.qkw(input_q)), shape, tuple(input_q) if input_q else None)]
    pred = scratch.input([1], "bool")
    for _ in range(int(rng.integers(1, 9))):
        for _attempt in range(20):
            layers = _draw_layer(rng, fl, nodes)
            if layers is None:
                continue
            try:
                made = []
                for layer in layers:
                    made.append(emit(scratch, fl, layer, [(nodes + made)[i] for i in layer["src"]], pred))
            except Inconsistent:
                continue
            spec["layers"] += layers
            nodes += made
            break
    if not spec["layers"]:   # nothing fitted (a tiny input): one layer that always does
        spec["layers"].append({"op": "TANH", "seed": 0, "src": [0]})
    return spec


def _draw_layer(rng, fl, nodes: list[Node]) -> list[dict] | None:
    """One layer (or a shape-keeping branch layer plus the ADD / MUL / CONCATENATION that
    merges it back)."""
    last = len(nodes) - 1
    src = last if rng.random() < 0.6 else int(rng.integers(0, len(nodes)))
    x = nodes[src]
    ops = OPS[len(x.shape)]
    names = [k for k in ops if k not in NOT_IN.get(fl.name, ())]
    p = np.array([ops[k] for k in names], float)
    op = names[int(rng.choice(len(names), p=p / p.sum()))]
    if op not in BINARY:
        d = draw(op, rng, fl, [x])
        d["src"] = [src]
        return [d]
    d = draw(op, rng, fl, [x, x])
    if op != "CONCATENATION" and rng.random() < 0.25:   # with a constant (per channel or one)
        d.update(const="channel" if rng.random() < 0.7 else "scalar", first=bool(rng.random() < 0.3),
                 src=[src])
        return [d]
    if op == "CONCATENATION":
        ax = d["axis"]
        partners = [i for i, n in enumerate(nodes) if i != src and len(n.shape) == len(x.shape)
                    and all(a == b for k, (a, b) in enumerate(zip(n.shape, x.shape)) if k != ax)]
    else:
        partners = [i for i, n in enumerate(nodes) if i != src and broadcasts_into(n.shape, x.shape)]
    if partners and rng.random() < 0.5:
        d["src"] = [src, int(partners[int(rng.integers(len(partners)))])]
        return [d]
    if op == "MUL" and len(x.shape) == 4 and rng.random() < 0.5:   # a squeeze-excite gate
        gate = draw("MEAN", rng, fl, [x])
        gate.update(axes=[1, 2], keep=True, src=[src])
        d["src"] = [src, len(nodes)]
        return [gate, d]
    branch = _branch(rng, fl, x)   # x -> f(x) of x's shape, then op(x, f(x)): a residual
    branch["src"] = [src]
    d["src"] = [src, len(nodes)] if rng.random() < 0.5 or op == "CONCATENATION" else [len(nodes), src]
    return [branch, d]


def _branch(rng, fl, x: Node) -> dict:
    rank = len(x.shape)
    if rank == 4:
        d = draw("CONV_2D" if rng.random() < 0.5 else "DEPTHWISE_CONV_2D", rng, fl, [x])
        d.update(stride=1, padding="SAME", mult=1, cout=x.shape[3])
        return d
    if rank == 2:
        d = draw("FULLY_CONNECTED", rng, fl, [x])
        d["units"] = x.shape[1]
        return d
    if x.shape[2] <= 8:
        d = draw("UNIDIRECTIONAL_SEQUENCE_LSTM", rng, fl, [x])
        d["units"] = x.shape[2]
        return d
    return draw("TANH", rng, fl, [x])


def generate(rng: random.Random, flavour: str) -> "TFLiteProgram":
    return TFLiteProgram(generate_spec(np.random.default_rng(rng.getrandbits(63)), flavour))


# ---------------------------------------------------------------------------------------------
# the program

@dataclass
class TFLiteProgram:
    spec: dict
    frontend: str = "tflite"
    _ref: list | None = field(default=None, repr=False)
    _built: tuple | None = field(default=None, repr=False)

    @property
    def flavour(self) -> str:
        return self.spec["flavour"]

    def built(self):
        if self._built is None:
            model, ins = build(self.spec)
            self._built = (model, make_inputs(self.spec, ins))
        return self._built

    def describe(self) -> str:
        parts = []
        for i, layer in enumerate(self.spec["layers"], 1):
            src = ",".join(map(str, layer["src"]))
            parts.append(f"{i}={layer['op']}({src}{',const' if layer.get('const') else ''})")
        opts = [f"{k}={self.spec[k]}" for k, v in DEFAULTS.items() if self.spec.get(k, v) != v]
        return f"tflite {self.flavour} input {self.spec['input']}{' ' if opts else ''}{' '.join(opts)}: " + " ".join(parts)

    def size(self) -> int:
        n = 1000 * len(self.spec["layers"]) + sum(self.spec["input"])
        for layer in self.spec["layers"]:
            for k, simple in SIMPLER.items():
                if k in layer and layer[k] != simple:
                    n += layer[k] if isinstance(layer[k], int) and not isinstance(layer[k], bool) else 1
            n += sum(layer.get(k, 0) for k in HALVE) + sum(layer.get("pads", []))
        if self.spec.get("input_q") and self.spec["input_q"][1] != 0:
            n += 1
        return n + sum(self.spec.get(k, v) != v for k, v in DEFAULTS.items())

    def check(self, target: str, workdir: Path) -> core.Outcome:
        from .tflite_check import check_tflite
        return check_tflite(self, target, workdir)

    def shrink_candidates(self):
        spec = self.spec
        n = len(spec["layers"])
        for j in reversed(range(n)):          # drop a layer: its readers read its first source
            if n > 1:
                yield self._try(_drop_layer(spec, j))
        for d in range(1, len(spec["input"])):
            if spec["input"][d] > 1:
                s = copy.deepcopy(spec)
                s["input"][d] = max(1, s["input"][d] // 2)
                yield self._try(s)
        for j, layer in enumerate(spec["layers"]):
            for k in HALVE:
                if layer.get(k, 1) > 1:
                    s = copy.deepcopy(spec)
                    s["layers"][j][k] //= 2
                    yield self._try(s)
            for k, simple in SIMPLER.items():
                if k in layer and layer[k] != simple:
                    s = copy.deepcopy(spec)
                    s["layers"][j][k] = simple
                    yield self._try(s)
            if any(layer.get("pads", [])):
                s = copy.deepcopy(spec)
                s["layers"][j]["pads"] = [0, 0, 0, 0]
                yield self._try(s)
        if spec.get("input_q") and spec["input_q"][1] != 0:
            s = copy.deepcopy(spec)
            s["input_q"][1] = 0
            yield self._try(s)
        for k, v in DEFAULTS.items():
            if spec.get(k, v) != v:
                yield self._try({**copy.deepcopy(spec), k: v})

    def _try(self, spec: dict):
        """The candidate if its spec still builds, else an empty program that never wins."""
        try:
            p = type(self)(spec)
            p.built()
            return p
        except Inconsistent:
            return _Unbuildable()

    def write_reproducer(self, folder: Path) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        model, inputs = self.built()
        (folder / "model.tflite").write_bytes(model)
        np.savez(folder / "inputs.npz", *inputs)
        (folder / "spec.json").write_text(json.dumps(self.spec, indent=1) + "\n")
        (folder / "README.md").write_text(
            f"# {self.describe()}\n\n"
            "Rerun (from the repository root; --target host or a board such as mps2-an386):\n\n"
            f"    python -m tests.fuzz.campaign --reproduce {folder} --target host\n\n"
            "model.tflite and inputs.npz (arr_0, arr_1, ... in the model's input order) are what\n"
            "was compiled and run; spec.json is the generator's spec they were built from. To make\n"
            "it a regression test, load both in a test and call conftest.assert_matches_tflm.\n")


def _drop_layer(spec: dict, j: int) -> dict:
    s = copy.deepcopy(spec)
    gone = s["layers"].pop(j)
    node, to = j + 1, gone["src"][0]
    for layer in s["layers"][j:]:
        layer["src"] = [to if i == node else (i - 1 if i > node else i) for i in layer["src"]]
    return s


class _Unbuildable:
    """A shrink candidate whose spec no longer builds: the shrinker skips it (size is max)."""
    def size(self) -> int:
        return 1 << 60


def load_reproducer(folder: Path) -> TFLiteProgram:
    return TFLiteProgram(json.loads((Path(folder) / "spec.json").read_text()))


core.register("tflite", tuple(FLAVOURS), generate, load_reproducer)
