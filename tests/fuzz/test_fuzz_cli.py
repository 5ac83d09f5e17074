"""Fuzzing through the command line, what a user sees: mutants of a small model given to
`python -m eerie_c.cli` exit 0, or 2 with exactly one line on stderr, no traceback and no
output directory. And the fuzz tests' seeding: FUZZ_SEED (run_long.py --seed) really
changes the examples."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fuzzing import (HANG_SECONDS, apply_mutations, apply_writes, byte_mutations,  # noqa: E402
                     field_writes, fuzz_settings, locate_fields, small_model)


def test_cli_mutants(tmp_path):
    """Mutants of the small model through `python -m eerie_c.cli`: exit 0, or exit 2 with
    exactly one line on stderr, no traceback and no output directory."""
    buf = small_model()
    fields = locate_fields(buf)
    src, out = tmp_path / "fuzz.tflite", tmp_path / "out"
    codes = []

    @fuzz_settings(24)
    @given(st.one_of(field_writes(fields).map(lambda w: apply_writes(buf, w)),
                     byte_mutations(len(buf)).map(lambda m: apply_mutations(buf, m))))
    def prop(data):
        src.write_bytes(data)
        shutil.rmtree(out, ignore_errors=True)
        p = subprocess.run([sys.executable, "-m", "eerie_c.cli", "-q", str(src), "-o", str(out),
                            "--name", "m"], capture_output=True, text=True, timeout=HANG_SECONDS * 3)
        codes.append(p.returncode)
        assert p.returncode in (0, 2), (p.returncode, p.stderr)
        assert "Traceback" not in p.stderr
        if p.returncode == 2:
            assert len(p.stderr.strip().splitlines()) == 1, p.stderr
            assert p.stderr.startswith("eerie-c: error: ")
            assert not out.exists()
        else:
            assert p.stderr == "" and (out / "m.c").is_file()

    prop()
    assert 2 in codes


def test_fuzz_seed_varies_the_examples():
    """FUZZ_SEED / run_long.py --seed N: each seed its own examples, the same seed the same;
    no seed (CI) the same examples every run."""
    def draws(fuzz_seed):
        got = []

        @fuzz_settings(10, fuzz_seed)
        @given(byte_mutations(1000))
        def prop(muts):
            got.append(repr(muts))
        prop()
        return got

    assert draws("1") == draws("1")
    assert draws("1") != draws("2")
    assert draws(None) == draws(None)
