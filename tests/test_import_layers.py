"""The package's shape: no import cycles, and each stage imports only the stages below it.

Every `import` counts, including those inside functions (a cycle hidden in a function is
still a cycle); only `if TYPE_CHECKING:` blocks (annotations) are left out. The stages, from
the bottom: utilities (errors, version, resources, progress, templating, report_text, names)
-> ir -> frontend -> passes -> kernels -> plan -> patch -> emit -> verify / toolchain -> pipeline
(with budgets, estimate, report, dynamic_io, memory_picture) -> runner, python_api, checker, api
-> validation (`eerie-c validate`: its helpers validation_* beside it) -> cli.

One exception, kept narrow: the arena proof (plan/proof.py) asks patch/'s independent stage
proofs whether a stage's output may overlap its input; those proofs import only utilities, so
plan never reaches patch's planner (test_plan_reaches_only_the_patch_proofs).
"""
import ast
from pathlib import Path

import eerie_c

PACKAGE = Path(eerie_c.__file__).parent

# What each stage must never import (directly, anywhere in its modules).
ENTRY = {"pipeline", "runner", "python_api", "checker", "api", "validation", "cli", "__init__"}
FORBIDDEN = {
    "ir": {"frontend", "passes", "kernels", "plan", "emit", "verify", "toolchain", "patch"} | ENTRY,
    "frontend": {"passes", "kernels", "plan", "emit", "verify", "toolchain", "patch"} | ENTRY,
    "passes": {"frontend", "plan", "emit", "verify", "toolchain", "patch"} | ENTRY,
    "kernels": {"frontend", "passes", "plan", "emit", "verify", "toolchain", "patch"} | ENTRY,
    "plan": {"frontend", "passes", "emit", "verify", "toolchain"} | ENTRY,
    "patch": {"frontend", "passes", "emit", "verify", "toolchain", "memory_picture"} | ENTRY,
    "emit": {"frontend", "passes", "verify", "toolchain"} | ENTRY,
    "verify": {"frontend", "passes", "kernels", "plan", "emit", "patch"} | ENTRY,
    "toolchain": {"frontend", "passes", "kernels", "plan", "patch"} | ENTRY,
    "templating": {"ir", "frontend", "passes", "kernels", "plan", "emit", "verify", "toolchain", "patch"} | ENTRY,
    "report_text": {"ir", "frontend", "passes", "kernels", "plan", "emit", "verify", "toolchain", "patch"} | ENTRY,
    # drawn from report.json's memory_plan alone, not from the planner's objects
    "memory_picture": {"ir", "frontend", "passes", "kernels", "plan", "patch", "emit", "verify",
                       "toolchain"} | ENTRY,
    "pipeline": ENTRY - {"pipeline"},
    "runner": {"python_api", "checker", "api", "validation", "cli", "__init__"},
    "python_api": {"checker", "api", "validation", "cli", "__init__"},
    "validation": {"cli", "__init__"},
}


def _modules() -> dict[str, tuple[Path, bool]]:
    mods = {}
    for p in sorted(PACKAGE.rglob("*.py")):
        parts = list(p.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        mods[".".join(parts[:-1] if is_pkg else parts)] = (p, is_pkg)
    return mods


def _runtime_nodes(tree):
    """Every node outside `if TYPE_CHECKING:` blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    graph = {m: set() for m in mods}
    for m, (path, is_pkg) in mods.items():
        base = m.split(".") if is_pkg else m.split(".")[:-1]
        for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    prefix = base[:len(base) - (node.level - 1)]
                    mod = ".".join(prefix + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else mod for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != m:
                    graph[m].add(t)
    return graph


def _cycles(graph) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _stage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_no_import_cycles():
    assert _cycles(import_graph()) == []


def test_stages_import_only_downwards():
    bad = sorted(f"{m} imports {t}" for m, ts in import_graph().items() for t in ts
                 if _stage(t) in FORBIDDEN.get(_stage(m), ()))
    assert bad == []


PATCH_PROOFS = {"eerie_c.patch.proof", "eerie_c.patch.cache_proof", "eerie_c.patch.rows_proof"}


def test_plan_reaches_only_the_patch_proofs():
    """plan/ imports from patch/ only its stage proofs, and everything those import, followed to
    the end, is a utility or another of them: never patch's planner, which imports plan."""
    graph = import_graph()
    into_patch = {t for m, ts in graph.items() if _stage(m) == "plan" for t in ts if _stage(t) == "patch"}
    assert into_patch and into_patch <= PATCH_PROOFS, into_patch
    seen, todo = set(), list(PATCH_PROOFS)
    while todo:
        m = todo.pop()
        for t in graph[m] - seen:
            seen.add(t)
            todo.append(t)
    assert seen <= PATCH_PROOFS | {"eerie_c.errors"}, sorted(seen)


def test_the_checker_sees_a_cycle(tmp_path, monkeypatch):
    """The test above can fail: a two-module cycle in a scratch package is found."""
    pkg = tmp_path / "eerie_c"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from .b import g\n")
    (pkg / "b.py").write_text("from .a import f\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import f\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", pkg)
    graph = import_graph()
    assert _cycles(graph) == [["eerie_c.a", "eerie_c.b"]]
    assert graph["eerie_c.c"] == set()


def test_torch_frontend_has_one_home():
    """The PyTorch side lives in frontend/torch/ and checker/, not beside the other stages."""
    strays = sorted(p.name for p in PACKAGE.glob("torch_*.py")) + \
        sorted(p.name for p in (PACKAGE / "frontend").glob("torch*.py"))
    assert strays == []


def test_no_module_shadows_the_api():
    """A submodule named like a function of the package (eerie_c.run, eerie_c.check) would
    replace that function once imported: import every module, then call through the API."""
    import importlib
    for m in _modules():
        if ".frontend.torch" in m or ".checker" in m:
            continue   # need torch; their names are checked below all the same
        importlib.import_module(m)
    names = {m.split(".")[1] for m in _modules() if m.count(".") >= 1}
    for api_name in ("compile", "run", "check"):
        assert api_name not in names, f"eerie_c/{api_name}.py or eerie_c/{api_name}/ shadows eerie_c.{api_name}()"
        assert callable(getattr(eerie_c, api_name)) and not isinstance(getattr(eerie_c, api_name), type(eerie_c))
