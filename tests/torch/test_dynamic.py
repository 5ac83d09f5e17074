"""Dynamic batch: `torch.export.Dim("batch", max=N)` on dim 0 compiles once to a per-sample
schedule that NAME_invoke(..., int batch) runs for 0..N samples (static arena, proved bounded
loop); results match eager for several batch sizes. Anything that would mix samples, and a
Dim without a maximum, is a clear compile error."""
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = nn.functional
Dim = torch.export.Dim

import eerie_c  # noqa: E402

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
                assert np.abs(y - ref).max() <= 1e-5 * max(1.0, np.abs(ref).max())
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


@pytest.mark.parametrize("cls,words", [
    (SoftmaxOverBatch, "along dim 0"),
    (MeanOverBatch, "keep the batch as its dim 0"),
    (BatchAsValue, "used as a value"),
])
def test_ops_that_mix_samples_are_rejected(cls, words):
    with pytest.raises(eerie_c.EerieError, match=words):
        eerie_c.compile(cls(), (torch.randn(3, 4),), dynamic_shapes=BATCH)


def test_only_a_leading_dynamic_dim():
    with pytest.raises(eerie_c.EerieError, match="only a dynamic leading"):
        eerie_c.compile(nn.Linear(10, 4), (torch.randn(2, 3, 10),),
                        dynamic_shapes=({1: Dim("seq", max=8)},))
