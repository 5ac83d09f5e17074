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


def test_readme_shows_the_latest_bench_tables():
    """bench/compare_tflm.py writes the same tables into bench/results.md and the README."""
    readme = (ROOT / "README.md").read_text()
    m = re.search(r"<!-- bench:begin -->\n(.*?)<!-- bench:end -->\n", readme, re.S)
    assert m, "README.md lacks the bench section"
    results = (ROOT / "bench" / "results.md").read_text().split("\n<!-- notes -->\n")[0]
    assert m.group(1).strip() and m.group(1).strip() in results, \
        "README's bench tables differ from bench/results.md: rerun python bench/compare_tflm.py --all-boards"
