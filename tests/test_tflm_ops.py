"""`eerie-c ops --vs-tflm`: TFLM's operator registrations against the kernel registry, and the
README's sentence that quotes its counts."""
import re
import subprocess
import sys
from pathlib import Path

from eerie_c import tflm_ops
from eerie_c.kernels import load_all

ROOT = Path(__file__).resolve().parents[1]


def test_vs_tflm_counts_add_up():
    out = subprocess.run([sys.executable, "-m", "eerie_c.cli", "ops", "--vs-tflm"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.startswith("TFLM registers 118 operators (100 builtin, 18 custom).")
    n = {k: int(v) for k, v in re.findall(r"^(supported|partly|missing) here:\s+(\d+)", out, re.M)}
    assert sum(n.values()) == tflm_ops.TFLM_COUNT == 118
    rows = tflm_ops.compare()["rows"]
    assert n["supported"] == sum(r["status"] == "supported" for r in rows)
    assert n["missing"] == sum(r["status"] == "missing" for r in rows)
    # each section lists its ops
    assert f"Missing ({n['missing']}):" in out and f"Supported ({n['supported']}):" in out


def test_statuses_follow_the_registry():
    reg = load_all()
    for r in tflm_ops.compare()["rows"]:
        info = reg.get(r["op"])
        if r["status"] == "missing":
            assert info is None, r
        elif r["status"] == "partial":
            assert r["missing"], r
    # what this work added is there with every dtype TFLM runs
    status = {r["op"]: r["status"] for r in tflm_ops.compare()["rows"]}
    for kind in ("SHAPE", "SIN", "COS", "FLOOR_DIV", "FLOOR_MOD", "REVERSE_V2", "ADD_N",
                 "L2_POOL_2D", "EMBEDDING_LOOKUP", "BROADCAST_ARGS", "REDUCE_ALL",
                 "DYNAMIC_UPDATE_SLICE", "QUANTIZE", "TFLite_Detection_PostProcess",
                 "CIRCULAR_BUFFER", "TFLM_DECODE", "SignalWindow", "SignalStacker"):
        assert status[kind] == "supported", kind
    # the limits listed are of supported ops; the gaps left out on purpose are gaps
    assert all(status[k] == "supported" for k in tflm_ops.LIMITS)
    assert all(status[k] != "supported" for k, _ in tflm_ops.NOT_TAKEN)


def test_readme_quotes_the_counts():
    out = tflm_ops.vs_tflm_text().splitlines()
    supported = int(out[1].split(":")[1].split()[0])
    partly = int(out[2].split(":")[1].split()[0])
    text = (ROOT / "README.md").read_text()
    m = re.search(r"of the (\d+) operators TFLM registers, (\d+) are supported with every dtype "
                  r"TFLM runs and (\d+) with some", text)
    assert m, "README.md: the sentence quoting `eerie-c ops --vs-tflm`"
    assert (int(m[1]), int(m[2]), int(m[3])) == (118, supported, partly)
