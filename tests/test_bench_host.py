"""bench/compare_tflm.py's host rows: our C (host target, -O2, a shared object through ctypes)
and the tflite-micro Python runtime timed in one process. Runs the real code path on ad01 with
a tiny repeat count and checks the table and the bit-exact column; no timing is asserted."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def load_bench():
    spec = importlib.util.spec_from_file_location("compare_tflm", REPO / "bench" / "compare_tflm.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod         # the module's dataclass looks itself up there
    spec.loader.exec_module(mod)
    return mod


def test_host_rows_on_ad01(models_dir, capsys):
    bench = load_bench()
    bench.MODELS_DIR = models_dir
    # no board: host rows only; one input record, 2 timed inferences per side
    rc = bench.main(["--boards", "--models", "ad01_int8", "--inputs", "1", "--host-repeat", "2",
                     "--no-write"])
    out = capsys.readouterr().out
    assert rc == 0, out
    rows = [line for line in out.splitlines() if line.startswith("|")]
    assert rows[0] == bench.HOST_HEADER
    assert len(rows) == 3, out                     # header, separator, ad01
    cells = [c.strip() for c in rows[2].strip("|").split("|")]
    assert len(cells) == len(bench.HOST_HEADER.strip("|").split("|")) == 5
    model, ours, tflm, ratio, exact = cells
    assert model == "ad01_int8"
    assert exact == "yes"
    assert float(ours.replace(",", "")) > 0 and float(tflm.replace(",", "")) > 0
    assert ratio.endswith("x") and float(ratio[:-1]) > 0


def test_host_row_fields(models_dir):
    bench = load_bench()
    r = bench.measure_host("ad01_int8", n_inputs=2, seed=3, repeat=1, models_dir=models_dir)
    assert r["exact"] is True
    assert r["repeat"] == (1, 1)
    assert abs(r["ratio"] - r["ours_us"] / r["tflm_us"]) < 1e-12


def test_no_host_skips_host_rows(capsys):
    bench = load_bench()
    assert bench.main(["--boards", "--no-host", "--no-write"]) == 0
    assert bench.HOST_HEADER not in capsys.readouterr().out
