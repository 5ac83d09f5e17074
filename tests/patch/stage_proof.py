"""What the patch-stage proof tests share: compile a model with a forced stage, and check that
the stage proof (patch/proof.py and the cached / row-input proofs it calls) accepts the
planner's stage and rejects a corrupted one with the expected message."""
import dataclasses
from pathlib import Path

import pytest

from eerie_c.api import compile_model
from eerie_c.errors import CompilerBug
from eerie_c.patch.proof import prove_patches


def compile_stage(model: bytes | Path, tmp_path: Path, patch, **kw):
    """(compile result, {kernel scratch function: step}) of `model` with the stage `patch`."""
    if not isinstance(model, Path):
        p = tmp_path / "m.tflite"
        p.write_bytes(model)
        model = p
    res = compile_model(model, out_dir=tmp_path / "o", patch=patch, **kw)
    return res, {o["function"]: o["step"] for o in res.report["ops"] if o["scratch_bytes"]}


def proof_rejects(res, scratch, match, stage=None, **changes):
    """The proof accepts the compiled stage, then rejects `stage` (or the compiled one with
    `changes` replaced) with a CompilerBug matching `match`; the compiled stage is put back."""
    op = res.graph.ops[0]
    good = op.attrs["patch"]
    assert prove_patches(res.graph, res.extra["plan"], scratch)["ok"]
    op.attrs["patch"] = stage if stage is not None else dataclasses.replace(good, **changes)
    try:
        with pytest.raises(CompilerBug, match=match):
            prove_patches(res.graph, res.extra["plan"], scratch)
    finally:
        op.attrs["patch"] = good
