#!/usr/bin/env python3
"""Download the public corpus's model files that the repository does not ship
(models/public_corpus/README.md): each from its source repository at the commit the table
names, through raw.githubusercontent.com. A model stored as a C array (a .cc / .cpp file, the
table's path ends in "(C array)") is turned back into its bytes: the hex and decimal byte
literals of its largest initializer. Each file must match the table's sha256, else nothing is
written for it.

    python3 bench/corpus_fetch.py                 # every missing file
    python3 bench/corpus_fetch.py --models ei_fomo_balloon tflm_retinaface
"""
from __future__ import annotations

import argparse
import hashlib
import re
import sys
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus_bench import corpus_models  # noqa: E402

RAW = "https://raw.githubusercontent.com/{repo}/{commit}/{path}"


def c_array_bytes(source: str) -> bytes:
    """The bytes of the largest brace initializer in a C/C++ source (0x.. or decimal)."""
    best = b""
    for body in re.findall(r"\{([^{}]*)\}", source):
        vals = re.findall(r"\b(0[xX][0-9a-fA-F]+|\d+)\b", body)
        if len(vals) > len(best):
            best = bytes(int(v, 0) & 0xFF for v in vals)
    return best


def fetch(row) -> str:
    path = row.path.replace(" (C array)", "")
    url = RAW.format(repo=row.repo, commit=row.commit, path=path)
    with urllib.request.urlopen(url, timeout=60) as r:
        data = r.read()
    if row.path.endswith("(C array)"):
        data = c_array_bytes(data.decode("utf-8", "replace"))
    got = hashlib.sha256(data).hexdigest()
    if got != row.sha256:
        return f"sha256 {got[:12]}.. is not the table's {row.sha256[:12]}.. ({url})"
    row.file_path.write_bytes(data)
    return "ok"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="*", help="names from the table (default: every missing file)")
    args = ap.parse_args(argv)
    rows = [r for r in corpus_models() if not r.file_path.is_file()
            and (not args.models or r.name in args.models)]
    bad = 0
    for r in rows:
        try:
            status = fetch(r)
        except OSError as e:
            status = f"download failed: {e}"
        bad += status != "ok"
        print(f"{r.name}: {status}")
    print(f"{len(rows) - bad} of {len(rows)} fetched")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
