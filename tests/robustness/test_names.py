"""Names from a model file are arbitrary bytes. They must never reach the generated C
unescaped: comment terminators, newlines, quotes, backslashes, trigraphs and non-UTF-8 bytes
in tensor and op names (and in the model's file name) still give a file that builds with
strict flags, contains only printable ASCII, and computes the same as TFLM."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conftest import random_inputs, tflm_run  # noqa: E402
from tflite_builder import ACT, ModelBuilder  # noqa: E402

from eerie_c.api import compile_model, run_model  # noqa: E402

HOSTILE = [
    b"*/ int evil = 1; /*",
    b"line1\nline2\r\n#define int float",
    b"quote\" ' \\\" end",
    b"\xff\xfe\x80 not utf-8 \xc3\x28",
    b"back\\slash\\",
    b"tri??/graph??=??(??)??<??>??!??'??-",
    b"/* nested /* comment",
    b"// line comment \\",
    b"\x00nul\x01\x02\x7f",
    b"layer/$\\frac{$/x",            # matplotlib mathtext: an unparsable formula in a label
    b"%s%n%x {{ jinja }} {% raw %}",
    b"\xe2\x80\xae right-to-left \xe2\x80\xa8 line separator",
    b"x" * 5000,
    b"layer/$x^{$/x",
    "模型/层🙂/Relu".encode(),   # CJK and emoji: glyphs the plot font lacks
]
STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-Wvla", "-pedantic", "-Wtrigraphs", "-Wcomment"]


def hostile_model(names) -> bytes:
    rng = np.random.default_rng(3)
    it = iter(names)
    mb = ModelBuilder()
    x = mb.input([1, 10], "int8", scale=0.05, zero_point=-3, name=next(it))
    w = mb.const(rng.integers(-127, 128, (6, 10)), "int8", scale=0.01, zero_point=0, name=next(it))
    b = mb.const(rng.integers(-300, 300, (6,)), "int32", scale=0.0005, zero_point=0, name=next(it))
    h = mb.tensor([1, 6], "int8", scale=0.1, zero_point=2, name=next(it))
    mb.op("FULLY_CONNECTED", [x, w, b], [h], "FullyConnectedOptions", fusedActivationFunction=ACT["RELU"])
    r = mb.tensor([2, 3], "int8", scale=0.1, zero_point=2, name=next(it))
    mb.op("RESHAPE", [h], [r])
    w2 = mb.const(rng.integers(-127, 128, (4, 3)), "int8", scale=0.02, zero_point=0, name=next(it))
    y = mb.tensor([2, 4], "int8", scale=0.2, zero_point=-1, name=next(it))
    mb.op("FULLY_CONNECTED", [r, w2], [y], "FullyConnectedOptions", fusedActivationFunction=ACT["NONE"])
    mb.output(y)
    xf = mb.input([1, 5], "float32", name=next(it))
    wf = mb.const(rng.standard_normal((3, 5)), "float32", name=next(it))
    yf = mb.tensor([1, 3], "float32", name=next(it))
    mb.op("FULLY_CONNECTED", [xf, wf], [yf], "FullyConnectedOptions", fusedActivationFunction=ACT["RELU6"])
    mb.output(yf)
    return mb.build()


def strip_comments(text: str) -> str:
    return re.sub(r"/\*.*?\*/", " ", text, flags=re.S)


def quoted_lines(text: str) -> set[str]:
    return {ln for ln in strip_comments(text).splitlines() if any(c in ln for c in "\"'\\")}


BENIGN: dict[str, set[str]] = {}


def benign_quoted(tmp_path, fname: str) -> set[str]:
    """Lines with quotes or backslashes that eerie-c itself writes (#include, asm barrier)."""
    if fname not in BENIGN:
        p = tmp_path / "benign.tflite"
        p.write_bytes(hostile_model([b"n%d" % i for i in range(10)]))
        files = compile_model(p, name="hostile").files
        for k, v in files.items():
            BENIGN[k] = quoted_lines(v)
    return BENIGN[fname]


def check_c_text(text: str, allowed: set[str] = frozenset()):
    assert all(ch == "\n" or 32 <= ord(ch) < 127 for ch in text), "non-printable or non-ASCII byte"
    assert "??" not in text, "a trigraph could form"
    code = strip_comments(text)
    assert "/*" not in code and "*/" not in code, "an unbalanced comment"
    extra = quoted_lines(text) - set(allowed)
    assert not extra, extra
    for evil in ("int evil", "#define int", "{{", "{%", "%s%n"):
        assert evil not in code, evil   # (identifier fragments made from names are fine)


@pytest.mark.parametrize("rotate", [0, 5])
def test_hostile_names_compile_safely_and_compute(tmp_path, rotate):
    names = (HOSTILE[rotate:] + HOSTILE[:rotate]) * 2
    data = hostile_model(names)
    model = tmp_path / "hostile??*x\n\\.tflite"
    model.write_bytes(data)
    out = tmp_path / "out"
    res = compile_model(model, out, name="hostile")
    for f in ("hostile.c", "hostile.h", "hostile.mk"):
        check_c_text((out / f).read_text(encoding="ascii"), benign_quoted(tmp_path, f))
    # Strict build of the model with a caller that uses the header.
    (out / "main.c").write_text('#include "hostile.h"\nint main(void) { return 0; }\n')
    subprocess.run(["cc", *STRICT, "-I.", "hostile.c", "main.c", "-o", "prog", "-lm"], cwd=out,
                   check=True, capture_output=True)
    # The report keeps the original names (JSON-escaped), readable back.
    import json
    rep = json.loads((out / "report.json").read_text())
    assert rep["inputs"][0]["name"] == names[0].decode("utf-8", "replace")
    assert res.report["name"] == "hostile"
    # And the names changed nothing in the computation.
    xs = [random_inputs([1, 10], "int8", 4, seed=1), random_inputs([1, 5], "float32", 4, seed=2)]
    got, _ = run_model(model, xs, name="hostile")
    ref = tflm_run(data, xs)
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_allclose(got[1], ref[1], rtol=0, atol=1e-5 * max(1e-6, float(np.abs(ref[1]).max())))


def test_non_utf8_file_name(tmp_path):
    """A model file whose name is not valid UTF-8 (a bytes path on Linux)."""
    data = hostile_model([b"n%d" % i for i in range(10)])
    raw = bytes(tmp_path) + b"/caf\xe9\xff.tflite"
    with open(raw, "wb") as f:
        f.write(data)
    import os
    path = Path(os.fsdecode(raw))
    out = tmp_path / "out"
    compile_model(path, out, name="hostile")
    check_c_text((out / "hostile.c").read_text(encoding="ascii"), benign_quoted(tmp_path, "hostile.c"))
    p = subprocess.run([sys.executable, "-m", "eerie_c.cli", os.fsdecode(raw), "-o", str(tmp_path / "o2")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr


def test_hostile_names_keep_report_and_picture_well_formed(tmp_path):
    """Names reach the human-readable views too: report.md's layer table and memory.svg's labels.
    A newline or control byte must not break a Markdown row or make the SVG invalid XML."""
    import xml.etree.ElementTree as ET
    model = tmp_path / "m.tflite"
    # "\x00nul\x01" names a drawn layer, "layer/$\frac{$/x" the reshape sharing its buffer
    model.write_bytes(hostile_model(HOSTILE[5:] + HOSTILE[:5]))
    out = tmp_path / "out"
    res = compile_model(model, out, name="hostile")
    ET.parse(out / "memory.svg")   # raises on a character XML 1.0 forbids
    md = (out / "report.md").read_text()
    assert all(ch == "\n" or ch.isprintable() for ch in md)
    table = md.split("## Layers", 1)[1].split("## Verification", 1)[0]
    rows = [ln for ln in table.splitlines() if ln.startswith("|")]
    assert len(rows) == 2 + len(res.report["ops"])   # header, rule, one row per layer
    assert all(ln.count("|") == 10 for ln in rows), rows


@pytest.mark.parametrize("layer", ["\u6a21\u578b/\u5c42\U0001f642/Relu", "layer/$x^{$/x", "a/$\\frac{$/b"])
def test_picture_labels_any_name_quietly(tmp_path, layer):
    """A layer name that is a broken TeX formula, or CJK and emoji, is drawn as text: no crash
    (as matplotlib's mathtext once gave), no "Glyph missing" warnings on stderr even with -q, and non-ASCII
    characters shown as \\uXXXX escapes rather than empty boxes."""
    import xml.etree.ElementTree as ET
    names = [b"n%d" % i for i in range(10)]
    names[3] = layer.encode()          # the first FULLY_CONNECTED's output: an arena buffer
    model = tmp_path / "m.tflite"
    model.write_bytes(hostile_model(names))
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "eerie_c.cli", "-q", str(model), "-o", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    root = ET.parse(out / "memory.svg").getroot()
    texts = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert all(t.isascii() for t in texts)
    label = layer.split("/")[-2]
    shown = "".join(ch if ord(ch) < 128 else (f"\\u{ord(ch):04x}" if ord(ch) < 0x10000 else f"\\U{ord(ch):08x}")
                    for ch in label)
    assert any(shown in t for t in texts), (shown, texts)
