"""Dynamic batch: `torch.export.Dim("batch", max=N)` on dim 0 compiles once to a per-sample
schedule that NAME_invoke(..., int batch) runs for 0..N samples (static arena, proved bounded
loop); results match eager for several batch sizes. Anything that would mix samples, and a
Dim without a maximum, is a clear compile error."""
import subprocess

import numpy as np
import pytest

# CI installs torch (.ci/setup): without it this module errors at collection, never skips.
import torch  # noqa: E402
nn = torch.nn
F = nn.functional
Dim = torch.export.Dim

import eerie_c  # noqa: E402
from conftest import assert_invoke_stack_within_bound  # noqa: E402

BATCH = ({0: Dim("batch", max=8)},)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(10, 16)
        self.b = nn.Linear(16, 12)
        self.c = nn.Linear(12, 5)

    def forward(self, x):
        h = F.gelu(self.a(x))
        h = torch.sigmoid(self.b(h)) * 2.0 - torch.relu(h[:, :12])
        return torch.log_softmax(self.c(h), dim=-1)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 6, 3, padding=1)
        self.fc = nn.Linear(6, 4)

    def forward(self, x):
        y = F.max_pool2d(F.relu(self.c(x)), 2)
        return self.fc(y.mean(dim=(2, 3)))


def compare(m, shape, sizes, seed=0):
    m = m.eval()
    rng = np.random.default_rng(seed)
    infs = [[rng.standard_normal((n, *shape)).astype(np.float32)] for n in sizes]
    outs, report = eerie_c.run(m, infs, (torch.randn(3, *shape),), dynamic_shapes=BATCH)
    with torch.no_grad():
        for (x,), (y,) in zip(infs, outs):
            ref = m(torch.tensor(x)).numpy()
            assert y.shape == ref.shape
            if ref.size:
                assert np.abs(y - ref).max() <= 1e-5
    return report


def test_mlp_batch_1_3_8_from_one_compile():
    torch.manual_seed(0)
    report = compare(MLP(), (10,), [1, 3, 8, 0, 5])
    assert report["dynamic_batch"]["max"] == 8
    proof = next(v for v in report["verified"] if v["check"] == "c_source")
    assert proof["ok"] and proof["max_loop_trips"] >= 8   # the sample loop, proved bounded by 8


def test_cnn_dynamic_batch():
    torch.manual_seed(1)
    compare(CNN(), (3, 8, 8), [2, 1, 8])


def test_c_interface_and_out_of_range_batch(tmp_path):
    torch.manual_seed(0)
    m = MLP().eval()
    res = eerie_c.compile(m, (torch.randn(3, 10),), dynamic_shapes=BATCH, name="mlp", out_dir=tmp_path)
    h, c = res.files["mlp.h"], res.files["mlp.c"]
    assert "#define MLP_MAX_BATCH 8" in h
    assert "int mlp_invoke(const float *input0, float *output0, int batch);" in h
    assert "sample < batch && sample < 8" in c
    # the arena is planned for one sample: a batch of 8 needs no more memory
    static = eerie_c.compile(m, (torch.randn(1, 10),), name="mlp1")
    assert res.report["arena_bytes"] == static.report["arena_bytes"]
    (tmp_path / "main.c").write_text(
        '#include "mlp.h"\n'
        "static float x[9 * 10], y[9 * 5];\n"
        "int main(void) {\n"
        "    if (mlp_invoke(x, y, 9) != 2 || mlp_invoke(x, y, -1) != 2) return 1;\n"
        "    return mlp_invoke(x, y, 8) == 0 && mlp_invoke(x, y, 0) == 0 ? 0 : 1;\n"
        "}\n")
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I.", "mlp.c", "main.c",
                    "-o", "t", "-lm"], cwd=tmp_path, check=True)
    assert subprocess.run([str(tmp_path / "t")]).returncode == 0


def test_dim_without_max_is_a_one_line_error():
    with pytest.raises(eerie_c.EerieError, match=r"has no maximum: declare it as torch.export.Dim\(\"batch\", max=N\)") as e:
        eerie_c.compile(MLP(), (torch.randn(3, 10),), dynamic_shapes=({0: Dim("batch")},))
    assert "\n" not in str(e.value)
    res = eerie_c.check(MLP(), (torch.randn(3, 10),), dynamic_shapes=({0: Dim("batch")},))
    assert not res.ok and res.problems[0].kind == "dynamic" and "max=N" in res.problems[0].fix


class SoftmaxOverBatch(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=0)


class MeanOverBatch(nn.Module):
    def forward(self, x):
        return x - x.mean(dim=0, keepdim=True)


class BatchAsValue(nn.Module):
    def forward(self, x):
        return x / x.shape[0]


@pytest.mark.parametrize("cls", [SoftmaxOverBatch, MeanOverBatch])
def test_ops_along_a_dynamic_dim_0_compile_it_as_a_masked_dim(cls):
    """An op combining samples makes dim 0 an ordinary dynamic dim (masked at the maximum)."""
    compare(cls(), (4,), [1, 3, 8])


def test_a_dynamic_size_used_as_a_value_is_rejected():
    with pytest.raises(eerie_c.EerieError, match="used as a value"):
        eerie_c.compile(BatchAsValue(), (torch.randn(3, 4),), dynamic_shapes=BATCH)


# ---- a dynamic sequence dimension: [B, T, F] with T dynamic -----------------------------------

SEQ = Dim("seq", min=3, max=12)


class SeqModel(nn.Module):
    """Per-step ops, reductions over T, a conv1d over T, softmax over T, the last step."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(5, 6)
        self.conv = nn.Conv1d(6, 4, 3, padding=1)
        self.valid = nn.Conv1d(4, 3, 2)

    def forward(self, x):                       # [B, T, 5]
        h = torch.tanh(self.inp(x))              # [B, T, 6], per step
        y = F.relu(self.conv(h.transpose(1, 2)))  # [B, 4, T]
        z = self.valid(y)                        # [B, 3, T - 1]
        pooled = h.mean(dim=1) + h.amax(dim=1) - h.sum(dim=1) * 0.1
        return pooled, y, z, z.amin(-1), torch.softmax(h, dim=1), h[:, -1] * 2, h[:, 0]


def compare_seq(m, inferences, example, dyn, **kw):
    m = m.eval()
    outs, report = eerie_c.run(m, inferences, example, dynamic_shapes=dyn, **kw)
    if kw.get("board") is not None:
        # sizes vary per call; the bound (proven for the maxima) must cover the deepest call
        assert_invoke_stack_within_bound(report)
    with torch.no_grad():
        for xs, got in zip(inferences, outs):
            refs = m(*[torch.tensor(x) for x in xs])
            refs = refs if isinstance(refs, tuple) else (refs,)
            assert len(got) == len(refs)
            for g, r in zip(got, refs):
                r = r.numpy()
                assert g.shape == r.shape, (g.shape, r.shape)
                if r.size:
                    assert np.abs(g - r).max() <= 1e-5
    return outs, report


def seq_inputs(sizes, feat=5, seed=0):
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal((b, t, feat)).astype(np.float32)] for b, t in sizes]


def test_sequence_and_batch_dynamic():
    torch.manual_seed(0)
    _, report = compare_seq(SeqModel(), seq_inputs([(1, 3), (3, 12), (2, 7), (0, 5), (4, 4)]),
                            (torch.randn(2, 6, 5),), ({0: Dim("batch", max=4), 1: SEQ},))
    params = report["dynamic_sizes"]["parameters"]
    assert [(p["name"], p["min"], p["max"]) for p in params] == [("batch", 0, 4), ("seq", 3, 12)]
    assert report["dynamic_sizes"]["outputs"][2] == "[batch, 3, seq - 1]"


def test_sequence_only_static_batch():
    """Static batch 2: the views [2, T, F] -> [2*T, F] around the linear layers merge the batch
    with the dynamic dim, which the masks follow."""
    torch.manual_seed(1)
    compare_seq(SeqModel(), seq_inputs([(2, 4), (2, 12), (2, 3)]), (torch.randn(2, 6, 5),), ({1: SEQ},))


class Unbatched(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(3, 4)

    def forward(self, x):                        # [T, 3]: the dynamic dim is dim 0, not a batch
        h = torch.sigmoid(self.l(x))
        return torch.log_softmax(h, dim=0), h.mean(0), (h - h.mean(0, keepdim=True)).t()


def test_dynamic_dim_0_reduced_over():
    torch.manual_seed(2)
    rng = np.random.default_rng(3)
    infs = [[rng.standard_normal((t, 3)).astype(np.float32)] for t in (2, 9, 16, 5)]
    compare_seq(Unbatched(), infs, (torch.randn(6, 3),), ({0: Dim("t", min=2, max=16)},))


def test_sequence_c_interface(tmp_path):
    torch.manual_seed(0)
    res = eerie_c.compile(SeqModel().eval(), (torch.randn(2, 6, 5),), name="seqm", out_dir=tmp_path,
                          dynamic_shapes=({0: Dim("batch", max=4), 1: SEQ},))
    h, c = res.files["seqm.h"], res.files["seqm.c"]
    assert "int batch, int seq);" in h and "#define SEQM_MAX_SEQ 12" in h and "#define SEQM_MIN_SEQ 3" in h
    assert "input 0: [batch, seq, 5]" in h
    assert "DYN_MASK" not in c or "lim" in c
    # one compile serves every size: the arena is planned for the maximum
    proof = next(v for v in res.report["verified"] if v["check"] == "c_source")
    assert proof["ok"]
    (tmp_path / "main.c").write_text(
        '#include "seqm.h"\n'
        "static float x[4 * 12 * 5], y[4 * 12 * 6];\n"
        "int main(void) {\n"
        "    if (seqm_invoke(x, y, y, y, y, y, y, y, 2, 13) != 2 || seqm_invoke(x, y, y, y, y, y, y, y, 2, 1) != 2) return 1;\n"
        "    if (seqm_invoke(x, y, y, y, y, y, y, y, 5, 4) != 2) return 1;\n"
        "    return seqm_invoke(x, y, y, y, y, y, y, y, 4, 12) == 0 ? 0 : 1;\n"
        "}\n")
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I.", "seqm.c", "main.c",
                    "-o", "t", "-lm"], cwd=tmp_path, check=True)
    assert subprocess.run([str(tmp_path / "t")]).returncode == 0


class CatAlongT(nn.Module):
    def forward(self, x):
        return torch.cat([x, x], dim=1)


class SeqAsValue(nn.Module):
    def forward(self, x):
        return x.sum(1) / x.shape[1]


class SliceFromEnd(nn.Module):
    def forward(self, x):
        return x[:, -3:] * 2


@pytest.mark.parametrize("cls,words", [
    (CatAlongT, "concatenation along a dynamic dim"),
    (SeqAsValue, "used as a value"),
    (SliceFromEnd, "negative start"),
])
def test_unsupported_uses_of_a_dynamic_dim_are_one_line_errors(cls, words):
    with pytest.raises(eerie_c.EerieError, match=words) as e:
        eerie_c.compile(cls(), (torch.randn(2, 6, 4),), dynamic_shapes=({1: Dim("seq", min=4, max=8)},))
    assert "\n" not in str(e.value)


class SmallSeq(nn.Module):
    """A per-step layer, a softmax over T (masked) and the last step (a dynamic slice)."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(5, 3)

    def forward(self, x):                       # [B, T, 5]
        h = self.inp(x)
        return torch.softmax(h, dim=1), h[:, -1]


def test_pt2_with_a_dynamic_dim_runs_from_the_cli(tmp_path):
    """The sizes come from the shapes of the --input files (T = 9 of at most 12)."""
    import sys
    torch.manual_seed(0)
    m = SmallSeq().eval()
    ep = torch.export.export(m, (torch.randn(2, 6, 5),), dynamic_shapes=({1: SEQ},))
    torch.export.save(ep, str(tmp_path / "seq.pt2"))
    x = np.random.default_rng(0).standard_normal((2, 9, 5)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    outs = [str(tmp_path / f"y{k}.npy") for k in range(2)]
    p = subprocess.run([sys.executable, "-m", "eerie_c.cli", "run", str(tmp_path / "seq.pt2"), "--input",
                        str(tmp_path / "x.npy")] + [a for o in outs for a in ("--output", o)],
                       capture_output=True, text=True, cwd=tmp_path, env=_repo_env())
    assert p.returncode == 0, p.stderr
    with torch.no_grad():
        refs = m(torch.tensor(x))
    assert len(refs) == len(outs)
    for o, r in zip(outs, refs):
        got = np.load(o)
        assert got.shape == tuple(r.shape)
        assert np.abs(got - r.numpy()).max() <= 1e-5


def _repo_env():
    """Run `python -m eerie_c.cli` on this checkout, not an older installed copy."""
    import os
    from pathlib import Path
    root = str(Path(__file__).resolve().parents[2])
    return {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
