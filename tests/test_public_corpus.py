"""models/public_corpus/README.md, the corpus bench/corpus_bench.py runs: every row names a
permissive licence whose text is there, a source (repository, path, 40-hex commit) and a
sha256; every model file matches its row's sha256 and input column and parses as a TFLite model
with int8 tensors (a real flatbuffer, not a Git LFS pointer). Rows may point at copies the
project already ships (tests/corpus/, examples/micro_speech/); the files of models/public_corpus/ itself are all there
or none is (a checkout without them still checks the table), never some. No compiling here:
bench/corpus_bench.py does that, outside CI."""
from __future__ import annotations

import hashlib
import importlib.util
import re
import sys
from pathlib import Path

import tflite

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "models" / "public_corpus"
SHIPPED = ("tests/corpus/", "examples/micro_speech/models/")   # copies the project already has

# SPDX id -> words its text must contain
LICENCE_WORDS = {
    "Apache-2.0": ("Apache License", "Version 2.0"),
    "MIT": ("Permission is hereby granted, free of charge",),
    "BSD-3-Clause": ("Redistribution and use in source and binary forms", "Neither the name"),
}


def load_bench():
    spec = importlib.util.spec_from_file_location("corpus_bench", REPO / "bench" / "corpus_bench.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod         # its dataclass looks itself up there
    spec.loader.exec_module(mod)
    return mod


def rows():
    return load_bench().corpus_models(CORPUS / "README.md")


def input_column(data: bytes) -> str:
    names = {v: k.lower() for k, v in vars(tflite.TensorType).items() if not k.startswith("_")}
    sg = tflite.Model.GetRootAs(data, 0).Subgraphs(0)
    cols = []
    for k in range(sg.InputsLength()):
        t = sg.Tensors(sg.Inputs(k))
        cols.append(f"{names[t.Type()]} {'x'.join(str(int(d)) for d in t.ShapeAsNumpy())}")
    return ", ".join(cols)


def test_table_has_sources_and_licences():
    rs = rows()
    assert len(rs) >= 30, len(rs)
    assert len({r.name for r in rs}) == len(rs), "duplicate names"
    assert len({r.sha256 for r in rs}) == len(rs), "the same file twice"
    for r in rs:
        assert re.fullmatch(r"[a-z0-9_]+", r.name), r.name
        assert re.fullmatch(r"[0-9a-f]{40}", r.commit), (r.name, r.commit)
        assert re.fullmatch(r"[0-9a-f]{64}", r.sha256), (r.name, r.sha256)
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", r.repo), (r.name, r.repo)
        assert r.path and r.what and r.input, r.name
        assert r.licence in LICENCE_WORDS, f"{r.name}: licence {r.licence!r} is not one we redistribute"
        assert r.file.startswith(SHIPPED + ("models/public_corpus/",)), (r.name, r.file)


def test_files_match_the_table():
    rs = rows()
    own = [r for r in rs if r.file.startswith("models/public_corpus/")]
    here = {p.name for p in CORPUS.glob("*.tflite")}
    listed = {Path(r.file).name for r in own}
    assert here <= listed, f"files not in the table: {sorted(here - listed)}"
    assert not here or here == listed, f"some corpus files are missing: {sorted(listed - here)}"
    present = [r for r in rs if r.file_path.is_file()]
    shipped = [r for r in rs if r.file.startswith(SHIPPED)]
    assert all(r.file_path.is_file() for r in shipped), [r.file for r in shipped if not r.file_path.is_file()]
    for r in present:
        data = r.file_path.read_bytes()
        assert data[4:8] == b"TFL3", f"{r.file}: not a TFLite flatbuffer (a Git LFS pointer?)"
        assert hashlib.sha256(data).hexdigest() == r.sha256, f"{r.file}: sha256 differs from the table"
        model = tflite.Model.GetRootAs(data, 0)
        assert model.SubgraphsLength() >= 1 and model.Subgraphs(0).OperatorsLength() >= 1, r.file
        sg = model.Subgraphs(0)
        types = {sg.Tensors(i).Type() for i in range(sg.TensorsLength())}
        assert tflite.TensorType.INT8 in types, f"{r.file}: no int8 tensor"
        assert input_column(data) == r.input, (r.file, input_column(data), r.input)
