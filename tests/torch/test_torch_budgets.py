"""Memory budgets through the nn.Module Python API (eerie_c.compile / eerie_c.run), as for model
files: an arena or proven stack bound over budget is a one-line error before anything is
written; a compile that meets its budgets (and a board's memories) records that in
report.json's `verified` list as a `budgets` check with the figures it was held against."""
import json
import shutil

import pytest

torch = pytest.importorskip("torch")

import eerie_c  # noqa: E402
from eerie_c.errors import EerieError  # noqa: E402


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(10, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()


EXAMPLE = (torch.randn(1, 10),)


def _figures():
    return eerie_c.compile(_mlp(), EXAMPLE).report


@pytest.mark.parametrize("which", ["arena", "stack"])
def test_module_over_budget_is_a_one_line_error(tmp_path, which):
    rep = _figures()
    need = rep["arena_bytes"] if which == "arena" else rep["stack_bound_bytes"]
    out = tmp_path / "o"
    with pytest.raises(EerieError) as e:
        eerie_c.compile(_mlp(), EXAMPLE, out_dir=out, **{f"{which}_budget": need - 1})
    msg = str(e.value)
    assert len(msg.splitlines()) == 1, msg
    assert f"exceeds --{which}-budget" in msg and f"is {need - 1}" in msg and "1 bytes over" in msg, msg
    assert not out.exists()
    # eerie_c.run takes the same budgets, and fails before building anything
    with pytest.raises(EerieError, match=f"exceeds --{which}-budget"):
        eerie_c.run(_mlp(), [EXAMPLE[0].numpy()], EXAMPLE, **{f"{which}_budget": need - 1})


def test_budgets_met_are_recorded_in_the_report(tmp_path):
    rep = _figures()
    assert not any(v["check"] == "budgets" for v in rep["verified"])   # none given, none claimed
    res = eerie_c.compile(_mlp(), EXAMPLE, out_dir=tmp_path / "o", arena_budget=rep["arena_bytes"],
                          stack_budget=rep["stack_bound_bytes"])
    saved = json.loads((tmp_path / "o" / "report.json").read_text())
    for r in (res.report, saved):
        check = next(v for v in r["verified"] if v["check"] == "budgets")
        assert check == {"check": "budgets", "ok": True, "arena_budget": rep["arena_bytes"],
                         "arena_bytes": rep["arena_bytes"], "stack_budget": rep["stack_bound_bytes"],
                         "stack_bound_bytes": rep["stack_bound_bytes"]}
    assert "PASS `budgets`" in (tmp_path / "o" / "report.md").read_text()


@pytest.mark.parametrize("board,cc", [("mps2-an386", "arm-none-eabi-gcc"), ("riscv-virt", "riscv64-unknown-elf-gcc")])
def test_board_fit_is_recorded_in_the_report(tmp_path, board, cc):
    missing = [t for t in (cc, "make") if shutil.which(t) is None]
    if missing:
        pytest.fail(f"needs {', '.join(missing)} on PATH (.ci/setup installs them)")
    res = eerie_c.compile(_mlp(), EXAMPLE, board=board, stack_budget=4096)
    check = next(v for v in res.report["verified"] if v["check"] == "budgets")
    b = res.report["budget"]
    assert check["ok"] and check["board"] == board and check["stack_budget"] == 4096
    assert check["board_flash_needed_bytes"] == b["flash_bytes"] <= check["board_flash_bytes"]
    assert check["board_ram_needed_bytes"] == b["ram_bytes"] <= check["board_ram_bytes"]
    assert check["board_firmware_stack_bound_bytes"] <= check["board_stack_reserve_bytes"]
