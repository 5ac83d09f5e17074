"""Mutated .pt2 files: a real program saved by torch.export.save (a zip of a JSON graph, JSON
weight configs and raw weight files), with its sizes, strides, dtypes, names and JSON values
edited, its weight files truncated, bit-flipped or grown, or an entry dropped. Every mutant
must compile or be refused with EerieError: one line, nothing on stderr (torch's own warnings
and logged tracebacks included), nothing written.

Most examples go through the API in-process (starting the CLI costs seconds per example,
torch's import); a handful through `python -m eerie_c.cli`: exit 0 or 2, exactly one stderr
line on 2, no Traceback, no output directory.
"""
from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import zipfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eerie_c.api import compile_model
from eerie_c.errors import EerieError

torch = pytest.importorskip("torch")

SPECIAL = [0, 1, 2, 3, 4, 6, 7, 8, 9, 16, -1, -8, 2 ** 16, 2 ** 28, 10 ** 9, 2 ** 31, 2 ** 33, 2 ** 63 - 1]


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)
        self.conv = torch.nn.Conv2d(1, 2, 3)

    def forward(self, x, y):
        return torch.relu(self.fc(x)), self.conv(y)


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> dict[str, bytes]:
    """The saved program's zip entries."""
    d = tmp_path_factory.mktemp("pt2")
    torch.manual_seed(0)
    ep = torch.export.export(Net().eval(), (torch.randn(1, 8), torch.randn(1, 1, 6, 6)))
    torch.export.save(ep, str(d / "net.pt2"))
    with zipfile.ZipFile(d / "net.pt2") as z:
        return {n: z.read(n) for n in z.namelist()}


def entry(files, suffix: str) -> str | None:
    return next((n for n in files if n.endswith(suffix)), None)


def to_zip(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for k, v in files.items():
            z.writestr(k, v)
    return buf.getvalue()


# ---------------------------------------------------------------------------------------------
# Mutations: each a function (files, draw) -> files, drawing what it needs.

def _edit_json(files, suffix, fn):
    key = entry(files, suffix)
    try:
        doc = json.loads(files[key])
        fn(doc)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        return files   # dropped, or no longer this shape after an earlier mutation
    return {**files, key: json.dumps(doc).encode()}


def _ints(draw, lo=0, hi=9):
    return [{"as_int": draw(st.one_of(st.sampled_from(SPECIAL), st.integers(-4, 64)))}
            for _ in range(draw(st.integers(lo, hi)))]


def mutate_sizes(files, draw):
    def fn(m):
        tv = m["graph_module"]["graph"]["tensor_values"]
        t = tv[draw(st.sampled_from(sorted(tv)))]
        t["sizes"] = _ints(draw)
        if draw(st.booleans()):   # strides to match the rank, or left as they were
            t["strides"] = _ints(draw, len(t["sizes"]), len(t["sizes"]))
    return _edit_json(files, "models/model.json", fn)


def mutate_strides(files, draw):
    def fn(m):
        tv = m["graph_module"]["graph"]["tensor_values"]
        t = tv[draw(st.sampled_from(sorted(tv)))]
        t["strides"] = _ints(draw, 0, 5)
        if draw(st.booleans()):
            t["storage_offset"] = {"as_int": draw(st.sampled_from(SPECIAL))}
    return _edit_json(files, "models/model.json", fn)


def mutate_dtype(files, draw):
    def fn(m):
        tv = m["graph_module"]["graph"]["tensor_values"]
        tv[draw(st.sampled_from(sorted(tv)))]["dtype"] = draw(st.integers(-2, 50))
    return _edit_json(files, "models/model.json", fn)


def mutate_name(files, draw):
    """A tensor name used by a node, an output or the signature, replaced by another
    tensor's name (a cycle, a use before definition) or by arbitrary text."""
    def fn(m):
        refs = []

        def walk(v):
            if isinstance(v, dict):
                if isinstance(v.get("name"), str) and set(v) == {"name"}:
                    refs.append(v)
                for x in v.values():
                    walk(x)
            elif isinstance(v, list):
                for x in v:
                    walk(x)
        walk(m["graph_module"])
        names = sorted({r["name"] for r in refs})
        ref = draw(st.sampled_from(refs))
        ref["name"] = draw(st.one_of(st.sampled_from(names), st.text(max_size=12)))
    return _edit_json(files, "models/model.json", fn)


def mutate_leaf(files, draw):
    """Any JSON value of the graph or the weights config replaced by another of any type."""
    suffix = draw(st.sampled_from(["models/model.json", "weights/model_weights_config.json"]))

    def fn(doc):
        leaves = []

        def walk(v):
            items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ()
            for k, x in items:
                if isinstance(x, (dict, list)) and x:
                    walk(x)
                else:
                    leaves.append((v, k))
            if isinstance(v, list) and not v:
                leaves.append((v, None))
        walk(doc)
        parent, k = draw(st.sampled_from(leaves))
        new = draw(st.one_of(st.none(), st.booleans(), st.sampled_from(SPECIAL), st.text(max_size=8),
                             st.lists(st.integers(-2, 9), max_size=3), st.just({})))
        if k is None:
            parent.append(new)
        else:
            parent[k] = new
    return _edit_json(files, suffix, fn)


def mutate_weight_config(files, draw):
    def fn(w):
        cfg = w["config"][draw(st.sampled_from(sorted(w["config"])))]
        cfg["tensor_meta"]["sizes"] = _ints(draw, 0, 4)
        if draw(st.booleans()):
            cfg["tensor_meta"]["strides"] = _ints(draw, 0, 4)
    return _edit_json(files, "weights/model_weights_config.json", fn)


def mutate_bytes(files, draw):
    """A weight (or any other) file truncated, bit-flipped, grown or emptied."""
    weights = sorted(n for n in files if "/weights/weight_" in n)
    key = draw(st.sampled_from(weights) if draw(st.integers(0, 3)) else st.sampled_from(sorted(files)))
    data = bytearray(files[key])
    kind = draw(st.sampled_from(["truncate", "flip", "grow", "empty"]))
    if kind == "truncate" and data:
        data = data[:draw(st.integers(0, len(data) - 1))]
    elif kind == "flip" and data:
        for _ in range(draw(st.integers(1, 4))):
            data[draw(st.integers(0, len(data) - 1))] ^= 1 << draw(st.integers(0, 7))
    elif kind == "grow":
        data += draw(st.binary(min_size=1, max_size=64))
    else:
        data = bytearray()
    return {**files, key: bytes(data)}


def mutate_drop(files, draw):
    key = draw(st.sampled_from(sorted(files)))
    return {k: v for k, v in files.items() if k != key}


MUTATIONS = [mutate_sizes, mutate_strides, mutate_dtype, mutate_name, mutate_leaf,
             mutate_weight_config, mutate_bytes, mutate_drop]


def mutants(base: dict[str, bytes]):
    """1 or 2 mutations of the saved program, zipped (a closure, so that hypothesis reports
    a failure without printing the whole archive)."""
    @st.composite
    def mutant(draw):
        files = base
        for _ in range(draw(st.integers(1, 2))):
            files = draw(st.sampled_from(MUTATIONS))(files, draw)
        return to_zip(files)
    return mutant()


# ---------------------------------------------------------------------------------------------

def test_original_compiles(base, tmp_path):
    p = tmp_path / "net.pt2"
    p.write_bytes(to_zip(base))
    assert compile_model(p, None, name="m").report["macs"] > 0


def resize(t: dict, dims: list[int]):
    """A tensor_values entry given new sizes and the matching contiguous strides."""
    strides, step = [], 1
    for d in reversed(dims):
        strides.insert(0, step)
        step *= max(d, 1)
    t.update(sizes=[{"as_int": d} for d in dims], strides=[{"as_int": s} for s in strides])


@pytest.mark.parametrize("tensor, dims, needle", [
    ("x", [1, 2 ** 33], "8589934592 elements"),
    ("x", [1, 10 ** 9], "needs 4000000000 bytes"),
    ("y", [1] * 8, "rank 8 (at most 6)"),
    ("x", [0, 8], "zero-size dimension"),
])
def test_sizes_beyond_the_ir_limits(base, tmp_path, capfd, tensor, dims, needle):
    """The limits TFLite files are held to (frontend/tensor_checks.py) hold for .pt2 inputs."""
    p = tmp_path / "net.pt2"
    p.write_bytes(to_zip(_edit_json(base, "models/model.json",
                                    lambda m: resize(m["graph_module"]["graph"]["tensor_values"][tensor], dims))))
    with pytest.raises(EerieError, match=re.escape(needle)) as e:
        compile_model(p, tmp_path / "out", name="m")
    assert "\n" not in str(e.value) and not (tmp_path / "out").exists()
    assert capfd.readouterr().err == ""   # torch's fake-tensor traceback is not printed


def test_mutants_in_process(base, tmp_path_factory, capfd):
    d = tmp_path_factory.mktemp("mutants")
    p, out = d / "net.pt2", d / "out"
    seen = {"ok": 0, "error": 0}

    @settings(max_examples=70, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(mutants(base))
    def prop(data):
        p.write_bytes(data)
        try:
            compile_model(p, out, name="m")
            seen["ok"] += 1
            assert (out / "m.c").is_file()
        except EerieError as e:
            seen["error"] += 1
            assert str(e) and "\n" not in str(e), repr(str(e))
            assert not out.exists()
        finally:
            import shutil
            shutil.rmtree(out, ignore_errors=True)
        err = capfd.readouterr().err
        assert err == "", err[:2000]

    prop()
    assert seen["error"] > 10   # the mutations do reach the checks


def eerie(*args):
    return subprocess.run([sys.executable, "-m", "eerie_c.cli", "-q", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def test_mutants_through_the_cli(base, tmp_path):
    """A few mutants whose in-process errors came from torch (logged tracebacks, warnings)."""
    cases = {
        "huge": _edit_json(base, "models/model.json", lambda m: resize(
            m["graph_module"]["graph"]["tensor_values"]["x"], [1, 10 ** 9])),
        "mismatch": _edit_json(base, "models/model.json", lambda m: resize(
            m["graph_module"]["graph"]["tensor_values"]["x"], [1, 9])),
        "cycle": _edit_json(base, "models/model.json", lambda m: m["graph_module"]["graph"]["nodes"][0]
                            ["inputs"][0]["arg"]["as_tensor"].update(name="relu")),
        "truncated": {**base, entry(base, "weights/weight_0"): base[entry(base, "weights/weight_0")][:64]},
    }
    for tag, files in cases.items():
        src, out = tmp_path / f"{tag}.pt2", tmp_path / f"out_{tag}"
        src.write_bytes(to_zip(files))
        p = eerie(src, "-o", out)
        assert p.returncode == 2, (tag, p.returncode, p.stderr)
        assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, (tag, p.stderr)
        assert "warnings above" not in p.stderr   # torch's words, about warnings it was not let print
        assert not out.exists()
    ok = tmp_path / "ok.pt2"
    ok.write_bytes(to_zip(base))
    p = eerie(ok, "-o", tmp_path / "out_ok")
    assert p.returncode == 0 and p.stderr == "", p.stderr   # not even torch's FutureWarning
