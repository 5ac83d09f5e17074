"""Board definitions: boards/NAME.json (CPU, memory regions, QEMU machine, how output leaves
the chip) plus boards/NAME.ld, the linker script for eerie-c firmware projects.

A board may also be given as a path to a .json file of the same form (its linker script is
looked up beside it), for boards of one's own or for tight budgets in tests.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from ..errors import EerieError
from ..resources import resource_dir
from .targets import TARGETS, Target, get_target

# What the firmware adds to the model: harness, start-up, semihosting, libc's memcpy/memset
# and libgcc helpers (measured at 3-6 KiB on every board), plus the model's layer code.
RUNTIME_CODE_BYTES = 8 * 1024
CODE_BYTES_PER_OP = 1024
RUNTIME_RAM_BYTES = 64

# Targets whose code runs on each CPU: its own, and the portable subsets it implements.
_RUNS_ON = {
    "cortex-m0": {"cortex-m0"},
    "cortex-m3": {"cortex-m", "cortex-m0", "cortex-m3"},
    "cortex-m4": {"cortex-m", "cortex-m0", "cortex-m3", "cortex-m4"},
    "cortex-m7": {"cortex-m", "cortex-m0", "cortex-m3", "cortex-m4", "cortex-m7"},
    "cortex-m33": {"cortex-m", "cortex-m0", "cortex-m3", "cortex-m33"},
    "cortex-m55": {"cortex-m", "cortex-m0", "cortex-m3", "cortex-m33", "cortex-m55"},
    # RISC-V: the board's cpu is its ISA string; code for a subset of the ISA runs on it.
    "rv32imac": {"riscv", "riscv32imc", "riscv32imac"},
    "rv32imafc": {"riscv", "riscv32imc", "riscv32imac", "riscv32imafc"},
}


@dataclass(frozen=True)
class Region:
    origin: int
    size: int
    contents: str = ""


@dataclass(frozen=True)
class Board:
    name: str
    description: str
    cpu: str
    target: str
    qemu_machine: str
    flash: Region
    ram: Region
    rodata: Region | None      # a separate region for constants (weights), if the board has one
    ccm: Region | None         # core-coupled RAM (CPU only): the arena and stack go there if they fit
    stack_bytes: int
    insns_per_tick: Fraction   # SysTick ticks -> instructions under QEMU -icount shift=0
    output: str                # "semihosting", or "uart": frames on the UART (no semihosting)
    linker_script: Path
    source: Path
    runtime_sources: tuple[str, ...] = ()   # the part's own runtime_c files (UART driver, vectors)
    qemu_system: str = "qemu-system-arm"   # the QEMU binary for the board's architecture
    qemu_args: tuple[str, ...] = ()        # extra QEMU arguments (RISC-V virt: -bios none)

    @property
    def family(self) -> str:
        """"arm" or "riscv": the runtime, link flags and QEMU the firmware project uses."""
        return get_target(self.target).family

    def compatible(self, target: str) -> bool:
        return target in _RUNS_ON.get(self.cpu, {self.target})

    def to_json(self) -> dict:
        d = json.loads(self.source.read_text())
        d["linker_script"] = self.linker_script.name
        return d


def _region(d: dict, what: str, src: Path) -> Region:
    try:
        origin = d["origin"]
        return Region(int(origin, 0) if isinstance(origin, str) else int(origin), int(d["size"]),
                      d.get("contents", ""))
    except (KeyError, TypeError, ValueError) as e:
        raise EerieError(f"{src}: bad {what} region ({e})") from None


def load_board(path: Path) -> Board:
    path = Path(path)
    try:
        d = json.loads(path.read_text())
    except OSError as e:
        raise EerieError(f"{path}: cannot read board file ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise EerieError(f"{path}: not valid JSON ({e})") from None
    try:
        name, cpu = str(d["name"]), str(d["cpu"])
        target = str(d.get("target", cpu))
        get_target(target)
        ld = path.parent / d.get("linker_script", f"{path.stem}.ld")
        if not ld.is_file():
            raise EerieError(f"{path}: linker script {ld.name} not found beside it")
        if d.get("output", "semihosting") not in ("semihosting", "uart"):
            raise EerieError(f"{path}: output must be \"semihosting\" or \"uart\", not {d['output']!r}")
        return Board(
            name=name, description=d.get("description", ""), cpu=cpu, target=target,
            qemu_machine=str(d["qemu_machine"]),
            flash=_region(d["flash"], "flash", path), ram=_region(d["ram"], "ram", path),
            rodata=_region(d["rodata"], "rodata", path) if d.get("rodata") else None,
            ccm=_region(d["ccm"], "ccm", path) if d.get("ccm") else None,
            stack_bytes=int(d.get("stack_bytes", 16384)),
            insns_per_tick=Fraction(str(d.get("systick_instructions_per_tick", 40))),
            output=str(d.get("output", "semihosting")), linker_script=ld, source=path,
            runtime_sources=tuple(str(f) for f in d.get("runtime_sources", ())),
            qemu_system=str(d.get("qemu_system", "qemu-system-arm")),
            qemu_args=tuple(str(a) for a in d.get("qemu_args", ())))
    except KeyError as e:
        raise EerieError(f"{path}: board file lacks the key {e.args[0]!r}") from None


def board_names() -> list[str]:
    return sorted(p.stem for p in resource_dir("boards").glob("*.json"))


def list_boards() -> list[Board]:
    return [load_board(resource_dir("boards") / f"{n}.json") for n in board_names()]


def get_board(name) -> Board:
    """A board by name (boards/NAME.json), or a path to a board .json file."""
    s = str(name)
    if s.endswith(".json") or "/" in s:
        return load_board(Path(s))
    p = resource_dir("boards") / f"{s}.json"
    if not p.is_file():
        raise EerieError(f"unknown board {s!r} (known: {', '.join(board_names())}; "
                         f"`eerie-c boards` lists them)")
    return load_board(p)


def resolve_target(board: Board, target: str | None) -> Target:
    """The board's own target unless another one that runs on its CPU was asked for."""
    if target is None:
        return get_target(board.target)
    tgt = get_target(target)
    if not tgt.embedded or not board.compatible(target):
        ok = ", ".join(sorted(t for t in TARGETS if board.compatible(t)))
        raise EerieError(f"target {target!r} does not run on board {board.name} ({board.cpu}); "
                         f"use one of: {ok}")
    return tgt


def placement(board: Board, arena_bytes: int) -> dict[str, str]:
    """Which RAM holds the arena and which the stack: "ccm" or "ram". A board with
    core-coupled RAM (STM32F4's CCM: fast, but no DMA can reach it) gets the arena and the
    stack there when both fit, else the arena alone (the larger of the two), else the stack
    alone; what does not go there stays in RAM with .data, .bss and the I/O buffers."""
    if board.ccm is None:
        return {"arena": "ram", "stack": "ram"}
    ccm, stack = board.ccm.size, board.stack_bytes
    if arena_bytes + stack <= ccm:
        return {"arena": "ccm", "stack": "ccm"}
    if arena_bytes <= ccm:
        return {"arena": "ccm", "stack": "ram"}
    return {"arena": "ram", "stack": "ccm" if stack <= ccm else "ram"}


def budget(board: Board, report: dict) -> dict:
    """Flash and RAM the firmware needs, from the compile's proven figures: the model object's
    measured code and constants, its arena and static data, and its proven stack bound."""
    consts = int(report["constant_bytes"])
    code = int(report.get("code_bytes", CODE_BYTES_PER_OP * len(report.get("ops", [])))) + RUNTIME_CODE_BYTES
    # The harness's I/O buffers; inputs planned into the arena (inputs_in_arena) need none.
    ins = [] if report.get("inputs_in_arena") else report["inputs"]
    io = sum(int(t["bytes"]) for t in ins + report["outputs"])
    # The model's proven stack bound plus one interrupt's exception frame and handler.
    stack = int(report.get("stack_bound_bytes", board.stack_bytes)) + int(report.get("stack_interrupt_allowance_bytes", 0))
    static = int(report.get("static_data_bytes", 0)) + io + RUNTIME_RAM_BYTES
    # The generated project's linker script reserves board.stack_bytes for the stack whatever
    # the bound (the harness's own I/O needs room too), so that reserve is what must fit:
    # counting only the proven bound would pass models that then fail to link.
    arena, reserve = int(report["arena_bytes"]), max(stack, board.stack_bytes)
    where = placement(board, arena)
    need = {"ram": static, "ccm": 0}
    need[where["arena"]] += arena
    need[where["stack"]] += reserve
    b = {"constant_bytes": consts, "code_bytes": code, "io_buffer_bytes": io,
         "static_data_bytes": static, "stack_bound_bytes": stack, "stack_reserve_bytes": board.stack_bytes,
         "ram_bytes": need["ram"] + need["ccm"], "flash_bytes": consts + code,
         "board_flash_bytes": board.flash.size + (board.rodata.size if board.rodata else 0),
         "board_ram_bytes": board.ram.size + (board.ccm.size if board.ccm else 0)}
    if board.ccm is not None:
        b.update({"placement": where, "sram_bytes": need["ram"], "ccm_bytes": need["ccm"]})
    return b


def check_budget(board: Board, name: str, report: dict) -> dict:
    """Raise a one-line EerieError giving each figure and the shortfall when a model does
    not fit the board."""
    b = budget(board, report)
    consts, code = b["constant_bytes"], b["code_bytes"]
    if board.rodata is not None:
        checks = [("constants", consts, board.rodata, "rodata flash", f"constants {consts}"),
                  ("code", code, board.flash, "flash", f"code {code} incl. runtime")]
    else:
        checks = [("flash", consts + code, board.flash, "flash",
                   f"constants {consts} + code {code} incl. runtime")]
    arena, reserve = int(report["arena_bytes"]), max(b["stack_bound_bytes"], board.stack_bytes)
    where = b.get("placement", {"arena": "ram", "stack": "ram"})
    stack_text = (f"stack reserve {reserve} (proven stack bound {b['stack_bound_bytes']} incl. one interrupt)")
    parts = ([f"arena {arena}"] if where["arena"] == "ram" else []) + \
        [f"static data {b['static_data_bytes']} (I/O buffers {b['io_buffer_bytes']})"] + \
        ([stack_text] if where["stack"] == "ram" else [])
    checks.append(("ram", b.get("sram_bytes", b["ram_bytes"]), board.ram, "RAM", " + ".join(parts)))
    if board.ccm is not None:
        in_ccm = ([f"arena {arena}"] if where["arena"] == "ccm" else []) + \
            ([stack_text] if where["stack"] == "ccm" else [])
        checks.append(("ccm", b["ccm_bytes"], board.ccm, "CCM", " + ".join(in_ccm) or "nothing"))
    for _, need, region, label, detail in checks:
        if need > region.size:
            raise EerieError(f"model {name} does not fit board {board.name}: {label} needs {need} bytes "
                             f"({detail}) but the board has {region.size}, {need - region.size} bytes too many")
    if b["stack_bound_bytes"] > board.stack_bytes:
        raise EerieError(f"model {name} does not fit board {board.name}: the proven stack bound is "
                         f"{b['stack_bound_bytes']} bytes but the board reserves {board.stack_bytes} for the "
                         f"stack, {b['stack_bound_bytes'] - board.stack_bytes} bytes too many")
    return b


def format_size(n: int) -> str:
    if n % (1024 * 1024) == 0:
        return f"{n // (1024 * 1024)} MiB"
    if n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} B"
