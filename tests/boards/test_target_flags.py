"""The float ABI and FPU each Cortex-M target really gets: the exact -m flags per target (a
table written here, not read back from TARGETS), and the ARM build attributes of the firmware
ELFs the boards build (arm-none-eabi-readelf -A): hard-float boards pass floats in VFP
registers and record their FPU; the M0 and M3 boards, and the portable cortex-m target on an
FPU board, record neither. Changing a target's FPU or float ABI fails one of these."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from eerie_c.api import compile_model
from eerie_c.toolchain.boards import get_board
from eerie_c.toolchain.targets import TARGETS

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "examples" / "tiny_conv.tflite"

# target -> (-mcpu, -mfloat-abi, -mfpu or None). Soft float on ARMv6-M/ARMv7-M without an FPU
# and on the portable target (it must link into any firmware whatever its FPU settings).
EXPECTED = {
    "cortex-m": ("cortex-m3", "soft", None),
    "cortex-m0": ("cortex-m0", "soft", None),
    "cortex-m3": ("cortex-m3", "soft", None),
    "cortex-m4": ("cortex-m4", "hard", "fpv4-sp-d16"),
    "cortex-m7": ("cortex-m7", "hard", "fpv5-d16"),
    "cortex-m33": ("cortex-m33", "hard", "fpv5-sp-d16"),
    # -mfpu=auto: the FPU and MVE (integer and float) that -mcpu=cortex-m55 implies; the ELF
    # test below checks that both really arrive.
    "cortex-m55": ("cortex-m55", "hard", "auto"),
}


def m_flags(flags: str) -> dict[str, str | bool]:
    """The machine options of a flag string: {"-mcpu": "cortex-m4", "-mthumb": True, ...}."""
    out: dict[str, str | bool] = {}
    for f in flags.split():
        if f.startswith("-m"):
            k, _, v = f.partition("=")
            assert k not in out, f"{k} given twice in {flags!r}"
            out[k] = v or True
    return out


def expected_m_flags(target: str) -> dict[str, str | bool]:
    cpu, abi, fpu = EXPECTED[target]
    d: dict[str, str | bool] = {"-mcpu": cpu, "-mthumb": True, "-mfloat-abi": abi}
    if fpu:
        d["-mfpu"] = fpu
    return d


def test_every_embedded_target_is_in_the_table():
    # RISC-V targets have their own table (tests/boards/test_riscv.py).
    assert set(EXPECTED) == {t for t, tgt in TARGETS.items() if tgt.family == "arm"}
    assert not TARGETS["host"].embedded and m_flags(TARGETS["host"].cflags) == {}


@pytest.mark.parametrize("target", sorted(EXPECTED))
def test_target_flags_are_exactly_the_table(target):
    tgt = TARGETS[target]
    assert m_flags(tgt.cflags) == expected_m_flags(target)
    assert tgt.cpu == EXPECTED[target][0]
    assert tgt.has_fpu == (EXPECTED[target][1] == "hard")


@pytest.mark.parametrize("target", sorted(EXPECTED))
def test_model_mk_fragment_carries_the_table_flags(tmp_path, target):
    """What a firmware Makefile gets through NAME.mk, not only what TARGETS says."""
    compile_model(TINY, tmp_path, target=target)
    line = next(ln for ln in (tmp_path / "tiny_conv.mk").read_text().splitlines()
                if ln.startswith("TINY_CONV_CFLAGS := "))
    assert m_flags(line) == expected_m_flags(target)


# (board, target or None for the board's own): the FP attributes the linked ELF must carry.
#   fp_arch: Tag_FP_arch, None = no such tag; sp_only: Tag_ABI_HardFP_use: SP only;
#   mve: Tag_MVE_arch.
ELF_CASES = [
    ("microbit", None, dict(fp_arch=None, sp_only=False, mve=None)),
    ("mps2-an385", None, dict(fp_arch=None, sp_only=False, mve=None)),
    ("mps2-an386", None, dict(fp_arch="VFPv4-D16", sp_only=True, mve=None)),
    ("mps2-an500", None, dict(fp_arch="FPv5/FP-D16 for ARMv8", sp_only=False, mve=None)),
    ("mps2-an505", None, dict(fp_arch="FPv5/FP-D16 for ARMv8", sp_only=True, mve=None)),
    ("mps3-an547", None, dict(fp_arch="FPv5/FP-D16 for ARMv8", sp_only=False, mve="MVE Integer and FP")),
    # The portable target on an FPU board stays soft float.
    ("mps2-an386", "cortex-m", dict(fp_arch=None, sp_only=False, mve=None)),
]


CPU_ARCH = {"cortex-m0": "v6S-M", "cortex-m3": "v7", "cortex-m4": "v7E-M", "cortex-m7": "v7E-M",
            "cortex-m33": "v8-M.mainline", "cortex-m55": "v8.1-M.mainline"}


def _attributes(elf: Path) -> dict[str, str]:
    text = subprocess.run(["arm-none-eabi-readelf", "-A", str(elf)], check=True, capture_output=True,
                          text=True).stdout
    out = {}
    for ln in text.splitlines():
        k, sep, v = ln.strip().partition(": ")
        if sep and k.startswith("Tag_"):
            out[k] = v
    assert "Tag_CPU_arch" in out, text
    return out


@pytest.mark.parametrize("board,target,want", ELF_CASES,
                         ids=[f"{b}-{t or 'own'}" for b, t, _ in ELF_CASES])
def test_board_elf_float_abi_and_fpu(board_tools, tmp_path, board, target, want):
    out = tmp_path / "fw"
    compile_model(TINY, out, board=board, target=target)
    p = subprocess.run(["make", "-C", str(out)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    a = _attributes(out / "tiny_conv.elf")
    hard = want["fp_arch"] is not None
    assert (a.get("Tag_ABI_VFP_args") == "VFP registers") == hard, a
    assert a.get("Tag_FP_arch") == want["fp_arch"], a
    assert (a.get("Tag_ABI_HardFP_use") == "SP only") == want["sp_only"], a
    assert a.get("Tag_MVE_arch") == want["mve"], a
    # The architecture the linked image needs (merged over the model, the runtime and newlib).
    cpu = get_board(board).cpu if target is None else TARGETS[target].cpu
    assert a["Tag_CPU_arch"] == CPU_ARCH[cpu], a
