"""eerie_c.compile / eerie_c.run with in-memory PyTorch programs: an ExportedProgram (static,
and exported with a named Dim, whose name becomes NAME_invoke's size argument), example_args
refused with one, default C names from classes named like C keywords, and a board compile of
a module giving the same firmware figures as its .pt2."""
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import eerie_c  # noqa: E402
from eerie_c.api import compile_model, default_name  # noqa: E402


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(2, 3, 3, padding=1)
        self.fc = nn.Linear(3, 4)

    def forward(self, x):                               # [1, 2, 6, 6]
        return self.fc(torch.relu(self.c(x)).mean(dim=(2, 3)))


class Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(5, 3)

    def forward(self, x):                               # [2, T, 5]
        h = self.inp(x)
        return torch.softmax(h, dim=1), h[:, -1]


def test_exported_program_compiles_and_runs():
    torch.manual_seed(0)
    m = Tiny().eval()
    ep = torch.export.export(m, (torch.randn(1, 2, 6, 6),))
    xs = np.random.default_rng(0).standard_normal((2, 1, 2, 6, 6)).astype(np.float32)
    (got,), _ = eerie_c.run(ep, [xs])
    with torch.no_grad():
        ref = np.stack([m(torch.tensor(x)).numpy() for x in xs])
    assert np.abs(got - ref).max() <= 1e-5
    with pytest.raises(eerie_c.EerieError, match="ExportedProgram keeps the example inputs"):
        eerie_c.compile(ep, (torch.randn(1, 2, 6, 6),))


def test_exported_program_keeps_its_dim_names():
    """Dim("seq") given to torch.export by the user: NAME_invoke takes `int seq`, not size0;
    the program runs at several sequence lengths from one compile."""
    torch.manual_seed(1)
    m = Seq().eval()
    seq = torch.export.Dim("seq", min=3, max=12)
    ep = torch.export.export(m, (torch.randn(2, 6, 5),), dynamic_shapes=({1: seq},))
    res = eerie_c.compile(ep)
    header = res.files[res.name + ".h"]
    assert "int seq)" in header and "size0" not in header, header
    assert [p["name"] for p in res.report["dynamic_sizes"]["parameters"]] == ["seq"]
    rng = np.random.default_rng(1)
    infs = [[rng.standard_normal((2, t, 5)).astype(np.float32)] for t in (3, 12, 7)]
    outs, _ = eerie_c.run(ep, infs)
    with torch.no_grad():
        for (x,), got in zip(infs, outs):
            for g, r in zip(got, m(torch.tensor(x))):
                assert g.shape == tuple(r.shape) and np.abs(g - r.numpy()).max() <= 1e-5


def test_default_names_avoid_c_keywords():
    class Float(nn.Module):
        def forward(self, x):
            return x * 2
    assert eerie_c.compile(Float(), (torch.randn(3),)).name == "float_model"
    assert [default_name(Path(p)) for p in ("int.pt2", "main.tflite", "net.pt2")] == \
        ["int_model", "main_model", "net"]
    with pytest.raises(eerie_c.EerieError, match="not a valid C identifier"):
        eerie_c.compile(Float(), (torch.randn(3),), name="float")   # a name the user gave: refused


def test_module_and_pt2_board_compiles_agree(tmp_path):
    """compile(module, board=...) plans the inputs inside the arena, as the .pt2 CLI path does:
    the same RAM, flash and stack figures."""
    torch.manual_seed(2)
    m = Tiny().eval()
    x = torch.randn(1, 2, 6, 6)
    a = eerie_c.compile(m, (x,), board="mps2-an386", name="tiny")
    path = tmp_path / "tiny.pt2"
    torch.export.save(torch.export.export(m, (x,)), str(path))
    b = compile_model(path, board="mps2-an386")
    keys = ("inputs_in_arena", "arena_bytes", "ram_bytes", "flash_bytes", "stack_bound_bytes")
    assert a.report["inputs_in_arena"] is True
    assert {k: a.report[k] for k in keys} == {k: b.report[k] for k in keys}
