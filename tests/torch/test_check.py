"""eerie_c.check / `eerie-c check`: each kind of program torch.export cannot capture (or that
eerie-c cannot lower) is reported at the user's line with the rewrite that fixes it; the
rewritten programs pass the check, compile and match eager PyTorch. When the program does not
export, the ops eerie-c lacks are still listed, from an eager run of the module."""
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

# CI installs torch (.ci/setup): without it this module errors at collection, never skips.
import torch  # noqa: E402
nn = torch.nn

import eerie_c  # noqa: E402

HERE = Path(__file__).resolve()


def line_of(marker: str) -> int:
    """The line of this file that carries `# <marker>`."""
    hits = [k for k, text in enumerate(HERE.read_text().splitlines(), 1) if text.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1, marker
    return hits[0]


class PyIf(nn.Module):
    def forward(self, x):
        if x.mean() > 0:  # BREAK-if
            return torch.relu(x)
        return torch.sigmoid(x)


class CondIf(nn.Module):
    def forward(self, x):
        return torch.cond(x.mean() > 0, lambda x: torch.relu(x), lambda x: torch.sigmoid(x), (x,))


class PyWhile(nn.Module):
    def forward(self, x):
        d = x
        while d.abs().max() > 1e-6:  # BREAK-while
            d = -0.1 * x
            x = x + d
        return x


class WhileLoop(nn.Module):
    def forward(self, x):
        def cond(x, d, n):
            return (d.abs().max() > 1e-6) & (n < 100)

        def body(x, d, n):
            nd = -0.1 * x
            return x + nd, nd, n + 1
        return torch.while_loop(cond, body, (x, torch.ones_like(x), torch.zeros(())))[0]


class Item(nn.Module):
    def forward(self, x):
        s = x.sum().item()  # BREAK-item
        return x * s


class ToList(nn.Module):
    def forward(self, x):
        v = x.tolist()  # BREAK-tolist
        return torch.tensor(v) * 2


class Mask(nn.Module):
    def forward(self, x):
        return x[x > 0].sum()  # BREAK-mask


class Printing(nn.Module):
    def forward(self, x):
        print("forward", x.shape)  # BREAK-print
        return x + 1


class Unsupported(nn.Module):
    def forward(self, x):
        y = torch.erf(x)  # BREAK-erf
        return torch.sort(y).values  # BREAK-sort


def finding(res, marker):
    line = line_of(marker)
    hits = [f for f in res.findings if f.line == line and f.file and Path(f.file).resolve() == HERE]
    assert hits, f"nothing reported at line {line}:\n{res.text()}"
    return hits[0]


def test_python_if_is_reported_and_its_cond_rewrite_compiles():
    res = eerie_c.check(PyIf(), (torch.randn(6),))
    assert not res.ok and res.exit_code == 1
    f = finding(res, "BREAK-if")
    assert f.kind == "if" and f.fatal and "torch.cond" in f.fix
    assert f"test_check.py:{line_of('BREAK-if')}: problem" in res.text()
    assert "if x.mean() > 0:" in res.text()

    good = eerie_c.check(CondIf(), (torch.randn(6),))
    assert good.ok and good.exit_code == 0 and not good.findings, good.text()
    xs = np.stack([np.random.default_rng(s).standard_normal(6).astype(np.float32) + off
                   for s, off in enumerate((-2.0, 2.0))])
    (got,), _ = eerie_c.run(CondIf(), [xs], (torch.randn(6),))
    m = CondIf()
    for x, g in zip(xs, got):
        ref = m(torch.tensor(x)).numpy()
        assert np.abs(g - ref).max() <= 1e-5
    # the two inputs took different branches
    assert np.abs(got[0] - torch.sigmoid(torch.tensor(xs[0])).numpy()).max() <= 1e-5
    assert np.abs(got[1] - torch.relu(torch.tensor(xs[1])).numpy()).max() <= 1e-5


def test_python_while_is_reported_and_while_loop_passes():
    res = eerie_c.check(PyWhile(), (torch.randn(4),))
    f = finding(res, "BREAK-while")
    assert not res.ok and f.kind == "loop" and "torch.while_loop" in f.fix and "max_iterations" in f.fix
    assert eerie_c.check(WhileLoop(), (torch.randn(4),)).ok


@pytest.mark.parametrize("cls,marker,kind,words", [
    (Item, "BREAK-item", "item", "0-d tensor"),
    (ToList, "BREAK-tolist", "tolist", "indexing"),
    (Mask, "BREAK-mask", "shape", "torch.where(mask"),
])
def test_value_dependent_python(cls, marker, kind, words):
    res = eerie_c.check(cls(), (torch.randn(5),))
    f = finding(res, marker)
    assert not res.ok and f.kind == kind and f.fatal and words in f.fix, res.text()
    assert len(res.problems) == 1, res.text()


class ListIndexedByValue(nn.Module):
    def forward(self, x):
        outs = [x * 2, x + 1, x - 1]
        return outs[x[:3].argmax()]  # BREAK-list-index


class StackedIndexSelect(nn.Module):
    """The rewrite the container finding suggests."""
    def forward(self, x):
        outs = [x * 2, x + 1, x - 1]
        return torch.stack(outs).index_select(0, x[:3].argmax().reshape(1))[0]


class SortByKey(nn.Module):
    def forward(self, x):
        parts = list(x.split(2))
        parts.sort(key=lambda t: t.sum())  # BREAK-sort-key
        return torch.cat(parts)


class DictByValue(nn.Module):
    def forward(self, x):
        table = {0: x * 2, 1: x + 1}
        return table[int(x.sum() > 0)]  # BREAK-dict-key


class AppendInLoop(nn.Module):
    def forward(self, x):
        outs = [x]
        while x.abs().sum() > 1:  # BREAK-append-loop
            x = x * 0.5
            outs.append(x)
        return torch.stack(outs).sum(0)


@pytest.mark.parametrize("cls,marker", [
    (ListIndexedByValue, "BREAK-list-index"), (SortByKey, "BREAK-sort-key"),
    (DictByValue, "BREAK-dict-key"), (AppendInLoop, "BREAK-append-loop"),
])
def test_containers_driven_by_tensor_values(cls, marker):
    res = eerie_c.check(cls(), (torch.randn(6),))
    f = finding(res, marker)
    assert f.kind == "container" and f.fatal, res.text()
    assert "list/dict manipulation" in res.text() and "torch.stack" in f.fix and "topk" in f.fix
    assert len(res.problems) == 1, res.text()


def test_stacked_index_select_rewrite_compiles():
    """The suggested rewrite of a list indexed by a tensor passes (argmax: ARG_MAX)."""
    m = StackedIndexSelect()
    assert eerie_c.check(m, (torch.randn(6),)).ok
    xs = np.random.default_rng(3).standard_normal((3, 6)).astype(np.float32)
    (got,), _ = eerie_c.run(m, [xs], (torch.randn(6),))
    for x, g in zip(xs, got):
        np.testing.assert_allclose(g, m(torch.tensor(x)).numpy(), rtol=0, atol=1e-5)


class MaskOfCast(nn.Module):
    def forward(self, x):
        return x.float()[x > 0].sum()  # BREAK-mask-of-cast


class IfThenUnbind(nn.Module):
    """Does not export (the `if`); `for v in x` and unbind are fine (export decomposes them)."""
    def forward(self, x):
        if x.sum() > 0:  # BREAK-if-then-unbind
            x = x * 2
        a, b = x.unbind(1)
        return torch.stack([v * 2 for v in x]) + (a + b).unsqueeze(1)


def test_float_method_is_a_cast_not_a_python_number():
    f = finding(eerie_c.check(MaskOfCast(), (torch.randn(5),)), "BREAK-mask-of-cast")
    assert f.kind == "shape", f


def test_unbind_and_iteration_are_not_reported_as_ops():
    res = eerie_c.check(IfThenUnbind(), (torch.randn(4, 2),))
    assert finding(res, "BREAK-if-then-unbind").kind == "if"
    assert len(res.problems) == 1 and "tensor_split" not in res.text(), res.text()


def test_print_is_a_warning_only():
    res = eerie_c.check(Printing(), (torch.randn(3),))
    f = finding(res, "BREAK-print")
    assert f.kind == "print" and not f.fatal and "Remove it" in f.fix
    assert res.ok and res.exit_code == 0, res.text()
    assert "warning: print/logging in forward" in res.text()


def test_unsupported_ops_listed_with_their_lines():
    res = eerie_c.check(Unsupported(), (torch.randn(5),))
    erf, sort = finding(res, "BREAK-erf"), finding(res, "BREAK-sort")
    assert erf.kind == sort.kind == "op"
    assert "aten.erf" in erf.reason and "aten.sort" in sort.reason
    assert not res.ok and len(res.problems) == 2, res.text()


class IfAndUnsupported(nn.Module):
    """Does not export (a Python `if` on a value), and uses ops eerie-c lacks: the check still
    lists those, from an eager run, and none of the supported ones around them."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(2, 3, 3, padding=1)
        self.bn = nn.BatchNorm2d(3)
        self.l = nn.Linear(4, 4)

    def forward(self, x):                                    # [1, 2, 4, 4]
        h = nn.functional.max_pool2d(torch.relu(self.bn(self.c(x))), 2, ceil_mode=True)
        h = self.l(h.flatten(2))                             # [1, 3, 4]
        att = torch.softmax(h @ h.transpose(1, 2), -1) @ h
        if att.mean() > 0:  # BREAK-eager-if
            att = torch.cumsum(att, 1)  # BREAK-eager-cumsum
        return torch.erf(att) + h[0].t().sum()  # BREAK-eager-erf


def test_ops_eerie_c_lacks_are_listed_when_export_fails():
    torch.manual_seed(0)
    x = torch.randn(1, 2, 4, 4)
    m = IfAndUnsupported().eval()
    with torch.no_grad():
        m.l.bias.fill_(2.0)      # the example takes the branch with cumsum (a random search
    assert m(x).mean() > 0       # for such an x ran for minutes with some seeds)
    res = eerie_c.check(m, (x,))
    assert not res.ok and finding(res, "BREAK-eager-if").kind == "if"
    cumsum, erf = finding(res, "BREAK-eager-cumsum"), finding(res, "BREAK-eager-erf")
    assert cumsum.kind == erf.kind == "op" and "eager op scan" in cumsum.found_by
    assert "aten.cumsum" in cumsum.reason and "aten.erf" in erf.reason
    # conv, eval batch norm, pooling, linear, t, matmul, softmax: no false reports
    assert "aten.t" not in erf.reason and "batch_norm" not in res.text()
    assert len(res.problems) == 3, res.text()


def test_a_function_can_be_checked():
    assert eerie_c.check(lambda x: torch.tanh(x) * 2, (torch.randn(3),)).ok


SCRIPT = '''
import torch
from torch import nn


class Bad(nn.Module):
    example_args = (torch.randn(8),)

    def forward(self, x):
        if x.sum() > 0:
            x = x * 2
        return x


class Good(nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: x * 2, lambda x: x.clone(), (x,))


def good():
    return Good(), (torch.randn(8),)
'''


def cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "eerie_c.cli", "check", *args], cwd=cwd,
                          capture_output=True, text=True)


def test_cli(tmp_path):
    (tmp_path / "mymodel.py").write_text(textwrap.dedent(SCRIPT))
    p = cli("mymodel.py:Bad", cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "mymodel.py:10: problem: value-dependent `if`" in p.stdout and "torch.cond" in p.stdout
    p = cli("mymodel.py:good", cwd=tmp_path)
    assert p.returncode == 0 and "OK: exports in one graph and compiles" in p.stdout, p.stdout + p.stderr


def test_cli_targets(tmp_path, monkeypatch, capsys):
    from eerie_c.cli import main
    from eerie_c.checker import load_target
    (tmp_path / "mymodel.py").write_text(textwrap.dedent(SCRIPT))
    monkeypatch.chdir(tmp_path)
    module, args, _ = load_target("mymodel.py:Good", ["8"])
    assert type(module).__name__ == "Good" and args[0].shape == (8,)
    with pytest.raises(eerie_c.EerieError, match="--shape"):
        load_target("mymodel.py:Good")   # no example inputs anywhere
    # 2: the program could not be loaded (documented in --help and docs/pytorch.md)
    assert main(["check", "mymodel.py:Missing"]) == 2
    assert main(["check", "nofile.py:Net"]) == 2
    assert main(["check", "mymodel.py:Good"]) == 2                # no example inputs
    (tmp_path / "broken.py").write_text("import no_such_module_here\n")
    assert main(["check", "broken.py:Net"]) == 2                  # importing it failed
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    assert "2  the program could not be loaded" in capsys.readouterr().out
