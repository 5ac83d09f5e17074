"""Memory budgets, checked at compile time against proven figures: a model that does not fit
fails with one line giving each figure and the shortfall, before anything is written."""
from __future__ import annotations

from .errors import EerieError


def check_budgets(report: dict, arena_budget: int | None = None,
                  stack_budget: int | None = None) -> dict | None:
    """Raise when a budget is exceeded; else the passed check for report["verified"] (with the
    budgets and the proven figures they were held against), or None when no budget was given."""
    name = report["name"]
    if arena_budget is not None and report["arena_bytes"] > arena_budget:
        raise EerieError(f"model {name} exceeds --arena-budget: the arena needs {report['arena_bytes']} bytes, "
                         f"the budget is {arena_budget}, {report['arena_bytes'] - arena_budget} bytes over")
    bound = report.get("stack_bound_bytes")
    if stack_budget is not None and bound is not None and bound > stack_budget:
        raise EerieError(f"model {name} exceeds --stack-budget: the proven worst-case stack of "
                         f"{name}_invoke is {bound} bytes, the budget is {stack_budget}, "
                         f"{bound - stack_budget} bytes over")
    if arena_budget is None and stack_budget is None:
        return None
    check = {"check": "budgets", "ok": True}
    if arena_budget is not None:
        check.update(arena_budget=arena_budget, arena_bytes=report["arena_bytes"])
    if stack_budget is not None:
        check.update(stack_budget=stack_budget, stack_bound_bytes=bound)
    return check


def record_board_budget(report: dict, board: str, figures: dict) -> None:
    """Add the board's fit (checked by toolchain/boards.py check_budget and the firmware stack
    proof) to the report's budgets check, creating it when no other budget was given."""
    check = next((v for v in report["verified"] if v["check"] == "budgets"), None)
    if check is None:
        check = {"check": "budgets", "ok": True}
        report["verified"].append(check)
    check["board"] = board
    check.update({f"board_{k}": v for k, v in figures.items()})


def parse_bytes(text: str) -> int:
    """'4096', '4k', '4KiB', '1M' -> bytes (for the --*-budget options)."""
    s = str(text).strip().lower().replace("ib", "").replace("b", "")
    mult = 1
    if s and s[-1] in "km":
        mult = 1024 if s[-1] == "k" else 1024 * 1024
        s = s[:-1]
    try:
        value = int(s, 0) * mult
    except ValueError:
        raise EerieError(f"not a byte count: {text!r} (examples: 4096, 64k, 1M)") from None
    if value < 0:
        raise EerieError(f"not a byte count: {text!r} (negative)")
    return value


# The generated C indexes the arena and each constant array with int offsets and sizes (as the
# per-tensor limits of frontend/tensor_checks.py assume), and a 32-bit Cortex-M cannot address
# more than 4 GiB in all: beyond these a model cannot work on any target, and the C compiler
# would fail (an exit-3 "bug") instead of a clear refusal.
MAX_ARENA_BYTES = 2 ** 31 - 1
MAX_CONSTANT_BYTES = 2 ** 31 - 1
ADDRESS_SPACE_32 = 2 ** 32


def check_limits(name: str, target, arena: int, constants: int, state: int) -> None:
    """Refuse a plan no target can hold (EerieError, one line with the figures)."""
    if arena > MAX_ARENA_BYTES:
        raise EerieError(f"model {name}: the activation arena needs {arena} bytes, more than the "
                         f"{MAX_ARENA_BYTES} bytes generated C can address (int offsets)")
    if constants > MAX_CONSTANT_BYTES:
        raise EerieError(f"model {name}: the constants need {constants} bytes, more than the "
                         f"{MAX_CONSTANT_BYTES} bytes generated C can address (int offsets)")
    total = arena + constants + state
    if target.embedded and total >= ADDRESS_SPACE_32:
        raise EerieError(f"model {name}: arena ({arena} B), constants ({constants} B) and state "
                         f"({state} B) total {total} bytes, more than {target.name}'s 32-bit "
                         f"address space ({ADDRESS_SPACE_32} bytes)")
