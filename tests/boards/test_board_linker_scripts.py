"""Each board's JSON against its linker script (boards/NAME.ld): the MEMORY regions' ORIGIN
and LENGTH equal the JSON's flash, ram and (if any) rodata regions, constants go to the
rodata region exactly when the JSON has one, and the default stack reserve equals
stack_bytes. eerie-c budgets with the JSON while the firmware is linked with the script, so
a disagreement passes the budget check and fails (or overflows) on the board."""
from __future__ import annotations

import json
import re

import pytest

from eerie_c.resources import resource_dir
from eerie_c.toolchain.boards import board_names, get_board

BOARDS_DIR = resource_dir("boards")
# JSON region -> MEMORY region name used by every board's script.
REGION_NAMES = {"flash": "FLASH", "ram": "RAM", "rodata": "ROFLASH", "ccm": "CCM"}
UNITS = {"": 1, "K": 1024, "M": 1024 * 1024}


def ld_number(text: str) -> int:
    """A linker-script number: 0x..., decimal, or with a K/M suffix."""
    m = re.fullmatch(r"\s*(0x[0-9a-fA-F]+|\d+)\s*([KM]?)\s*", text)
    assert m, f"not a plain linker-script number: {text!r}"
    return int(m.group(1), 0) * UNITS[m.group(2)]


def memory_regions(ld: str) -> dict[str, tuple[int, int]]:
    block = re.search(r"^MEMORY\s*\{(.*?)^\}", ld, re.M | re.S)
    assert block, "no MEMORY block"
    out = {}
    for m in re.finditer(r"^\s*(\w+)\s*\([rwx]+\)\s*:\s*ORIGIN\s*=\s*([^,]+),\s*LENGTH\s*=\s*(\S+)\s*$",
                         block.group(1), re.M):
        out[m.group(1)] = (ld_number(m.group(2)), ld_number(m.group(3)))
    assert out, block.group(1)
    return out


def default_stack(ld: str) -> int:
    m = re.search(r"^__eerie_stack_size__\s*=\s*DEFINED\(__eerie_stack_size__\)\s*\?\s*"
                  r"__eerie_stack_size__\s*:\s*([^;]+);", ld, re.M)
    assert m, "no default __eerie_stack_size__"
    return ld_number(m.group(1))


def test_parser_reads_the_forms_the_scripts_use():
    assert ld_number("0x4000") == 16384 and ld_number("512K") == 524288 and ld_number("8M") == 8 << 20
    ld = ("__eerie_stack_size__ = DEFINED(__eerie_stack_size__) ? __eerie_stack_size__ : 0x800;\n"
          "MEMORY\n{\n    FLASH  (rx)  : ORIGIN = 0x10000000, LENGTH = 256K\n"
          "    RAM    (rwx) : ORIGIN = 0x20000000, LENGTH = 16K\n}\n")
    assert memory_regions(ld) == {"FLASH": (0x10000000, 256 << 10), "RAM": (0x20000000, 16 << 10)}
    assert default_stack(ld) == 2048


def test_every_board_has_a_script():
    assert board_names() and all((BOARDS_DIR / f"{b}.ld").is_file() for b in board_names())


@pytest.mark.parametrize("board", board_names())
def test_linker_script_matches_board_json(board):
    brd = get_board(board)
    spec = json.loads((BOARDS_DIR / f"{board}.json").read_text())
    ld = brd.linker_script.read_text()
    regions = memory_regions(ld)
    want = {REGION_NAMES[k]: (int(spec[k]["origin"], 0), int(spec[k]["size"]))
            for k in REGION_NAMES if spec.get(k)}
    assert regions == want, (regions, want)
    assert default_stack(ld) == int(spec["stack_bytes"]) == brd.stack_bytes
    # Constants (.rodata) live in the rodata region when the board has one, else in flash.
    rodata_to = re.search(r"^\s*\.rodata\s*:.*?\}\s*>\s*(\w+)", ld, re.M | re.S).group(1)
    assert rodata_to == ("ROFLASH" if spec.get("rodata") else "FLASH")
    # The stack sits at the top of the RAM region the JSON describes (or of the CCM, when the
    # board has one and the firmware's Makefile puts it there).
    if spec.get("ccm"):
        assert ("__stack_top__ = __eerie_stack_in_ccm__ ? ORIGIN(CCM) + LENGTH(CCM) : "
                "ORIGIN(RAM) + LENGTH(RAM);") in ld
    else:
        assert "__stack_top__ = ORIGIN(RAM) + LENGTH(RAM);" in ld
