"""The README's operator table is the registry's (regenerate: python docs/update_ops_table.py)."""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs"))


def test_readme_ops_table_is_generated_from_the_registry():
    import update_ops_table as u
    text = (ROOT / "README.md").read_text()
    m = re.search(re.escape(u.BEGIN) + r"\n(.*?)\n" + re.escape(u.END), text, re.S)
    assert m, "README.md lacks the generated operator table"
    assert m.group(1) == u.table(), "README's op table is stale: run python docs/update_ops_table.py"


def test_readme_links_resolve():
    text = (ROOT / "README.md").read_text()
    for link in re.findall(r"\]\(((?:docs|examples)/[^)#]+)\)", text):
        assert (ROOT / link).exists(), link
