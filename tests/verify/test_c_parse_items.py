"""The C-source proof parses by top-level item, memoised across configurations
(eerie_c/verify/c_parse.py): the result must be the AST a whole-file parse gives, with the
same coordinates, and shared items must really be reused."""
from __future__ import annotations


import pytest
from pycparser import c_ast, c_parser

from eerie_c.api import compile_model
from eerie_c.toolchain.targets import get_target
from eerie_c.verify.asm_check import scan_asm
from eerie_c.verify.c_parse import parse, preprocess, shrink_tables, walk
from eerie_c.verify.proof_config import configurations

# Fails (never skips) without arm-none-eabi-gcc (cross_cc).
pytestmark = pytest.mark.usefixtures("cross_cc")


def _shape(ast):
    def name(n):
        v = getattr(n, "name", None)
        return v if isinstance(v, str) else None
    def where(n):
        # line:column only: parsing the whole file, pycparser 2.x names a function body's
        # Compound after the file of the token before it (an earlier #include); item by item
        # it names the right file. The proof's messages use the line, which both agree on.
        c = getattr(n, "coord", None)
        return None if c is None else (c.line, c.column)
    return [(type(n).__name__, name(n), where(n)) for n in walk(ast)]


@pytest.mark.parametrize("target", ["cortex-m55", "cortex-m4"])
def test_item_parse_equals_whole_file_parse(models_dir, tmp_path, target):
    compile_model(models_dir / "kws_ref_model.tflite", tmp_path, target=target, name="m")
    c = tmp_path / "m.c"
    source = shrink_tables(c.read_text())
    cache: dict = {}
    sizes = []
    for config in configurations(get_target(target)):
        text, _ = scan_asm(preprocess(c, [tmp_path], None, config, source))
        before = len(cache)
        items = parse(text, c, cache)
        sizes.append(len(cache) - before)
        whole = c_parser.CParser().parse(shrink_tables(text.replace("__volatile__", "volatile")), str(c))
        assert _shape(items) == _shape(whole)
    # the second configuration reparses only what differs (the target-branch functions)
    assert sizes[1] < sizes[0] / 2, sizes


def test_file_scope_compound_literal_and_odd_layouts_parse(tmp_path):
    c = tmp_path / "odd.c"
    c.write_text("struct p { int a, b; };\n"
                 "static const struct p q = (struct p){1, 2}; int g(void) { return q.a; }\n"
                 "typedef int T; T h(T x)\n{\n    return x + g();\n}\n"
                 "int k(void) { T t = 1; { int T = 2; t += T; } return t; }\n")
    ast = parse(preprocess(c, [tmp_path]), c)
    names = [e.decl.name if isinstance(e, c_ast.FuncDef) else e.name for e in ast.ext]
    assert names == [None, "q", "g", "T", "h", "k"]


def test_a_second_compile_parses_nothing_again(models_dir, monkeypatch):
    """Each compile proves its C in a fresh temporary directory; the line markers name files
    relative to it (ast_proof._relative_markers), so compiling the same model again reuses
    every parsed item (with the directory in the markers, it parsed all ~200 again)."""
    from eerie_c.verify import ast_proof
    calls = []
    real = c_parser.CParser.parse

    def counted(self, *a, **kw):
        calls.append(1)
        return real(self, *a, **kw)
    monkeypatch.setattr(c_parser.CParser, "parse", counted)
    monkeypatch.setattr(ast_proof, "PROVED", {})   # the whole-proof cache aside: items only
    compile_model(models_dir / "ad01_int8.tflite", target="cortex-m4", name="twice", patch="off")
    first = len(calls)
    ast_proof.PROVED.clear()
    compile_model(models_dir / "ad01_int8.tflite", target="cortex-m4", name="twice", patch="off")
    assert first > 0 and len(calls) == first, (first, len(calls) - first)
