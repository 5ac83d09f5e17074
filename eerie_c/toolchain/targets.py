"""Compiler flags per target. The model's own C is always checked with the strict set.

Embedded targets (arm-none-eabi-gcc, Thumb):

    cortex-m     portable Thumb-2: -mcpu=cortex-m3, soft float. ARMv7-M code runs unchanged on
                 every ARMv7-M and ARMv8-M Mainline core (M3, M4, M7, M33, M35P, M55, M85), and
                 the soft-float ABI links with any firmware whatever its FPU settings are, so
                 one build fits all of them. Only ARMv6-M/ARMv8-M Baseline cores (M0, M0+,
                 M1, M23) need --target cortex-m0 instead.
    cortex-m0    ARMv6-M, no FPU.
    cortex-m3    ARMv7-M, no FPU.
    cortex-m4    ARMv7E-M, single-precision FPv4 (hard-float ABI).
    cortex-m7    ARMv7E-M, double-precision FPv5 (fpv5-d16: the M7 of the MPS2 AN500 image
                 has the DP unit; firmware for an SP-only M7 should use cortex-m4 flags).
    cortex-m33   ARMv8-M Mainline, single-precision FPv5.
    cortex-m55   ARMv8.1-M Mainline with MVE (Helium) and FPU; -mfpu=auto takes the
                 full feature set of -mcpu.

Embedded targets (riscv64-unknown-elf-gcc, 32-bit RISC-V, picolibc):

    riscv        portable RV32: rv32imc, soft float (ilp32). Runs on every RV32 core with the M
                 and C extensions (rv32imc, rv32imac, rv32imafc, ...), and the soft-float ABI
                 links with any ilp32 firmware.
    riscv32imc   RV32IMC, soft float (e.g. small cores without atomics). Debian's toolchain
                 has no rv32imc multilib: gcc links picolibc/libgcc for rv32im (uncompressed
                 but otherwise the same ISA), which runs unchanged on the core.
    riscv32imac  RV32IMAC, soft float (SiFive E31/FE310, GD32VF103, ESP32-C3 class).
    riscv32imafc RV32IMAFC with single-precision FPU, hard-float ABI ilp32f.

The ISA string carries no _zicsr: Debian's gcc 12 then falls back to the rv64 default
multilib. The runtime's CSR reads enable Zicsr locally (`.option arch, +zicsr`); the model's
C needs no CSR.
"""
from dataclasses import dataclass

from ..errors import EerieError

STRICT = "-std=c99 -Wall -Wextra -Werror -Wvla -pedantic"


@dataclass(frozen=True)
class Target:
    name: str
    cc: str
    arch_flags: str
    opt: str = "-O2"
    cpu: str | None = None        # the -mcpu a Cortex-M target tunes for; None for the host
    has_fpu: bool = False
    description: str = ""

    @property
    def family(self) -> str:
        """"arm", "riscv" or "host": which runtime, linker flags and QEMU a board needs."""
        if not self.embedded:
            return "host"
        return "riscv" if self.cc.startswith("riscv") else "arm"

    @property
    def cross(self) -> str:
        """The toolchain prefix (arm-none-eabi-, riscv64-unknown-elf-) for size, objdump, nm."""
        return self.cc[: -len("gcc")] if self.embedded else ""

    @property
    def cflags(self) -> str:
        return " ".join(x for x in (STRICT, self.opt, self.arch_flags) if x)

    @property
    def embedded(self) -> bool:
        return self.cpu is not None


def _m(name, cpu, fpu=None, description=""):
    # -ffunction-sections/-fdata-sections are part of the target's flags (not only of the
    # firmware Makefile) because they can change frame sizes: the stack bound is proved
    # for exactly the flags the firmware is built with.
    flags = (f"-mcpu={cpu} -mthumb " + (f"-mfloat-abi=hard -mfpu={fpu}" if fpu else "-mfloat-abi=soft")
             + " -ffunction-sections -fdata-sections")
    return Target(name, "arm-none-eabi-gcc", flags, cpu=cpu, has_fpu=fpu is not None, description=description)


def _rv(name, march, mabi, description):
    # -specs=picolibc.specs is a compile flag too: it puts picolibc's headers on the include
    # path (the toolchain ships no other libc for riscv64-unknown-elf).
    flags = f"-march={march} -mabi={mabi} -specs=picolibc.specs -ffunction-sections -fdata-sections"
    return Target(name, "riscv64-unknown-elf-gcc", flags, cpu=march, has_fpu="f" in march[4:],
                  description=description)


TARGETS = {
    "host": Target("host", "cc", "", description="the machine running eerie-c (gcc or clang)"),
    "cortex-m": _m("cortex-m", "cortex-m3", description="portable Thumb-2 (ARMv7-M), soft float"),
    "cortex-m0": _m("cortex-m0", "cortex-m0", description="ARMv6-M, soft float"),
    "cortex-m3": _m("cortex-m3", "cortex-m3", description="ARMv7-M, soft float"),
    "cortex-m4": _m("cortex-m4", "cortex-m4", "fpv4-sp-d16", "ARMv7E-M, FPv4 single precision"),
    "cortex-m7": _m("cortex-m7", "cortex-m7", "fpv5-d16", "ARMv7E-M, FPv5 double precision"),
    "cortex-m33": _m("cortex-m33", "cortex-m33", "fpv5-sp-d16", "ARMv8-M Mainline, FPv5 single precision"),
    "cortex-m55": _m("cortex-m55", "cortex-m55", "auto", "ARMv8.1-M Mainline, MVE and FPU"),
    "riscv": _rv("riscv", "rv32imc", "ilp32", "portable RV32IMC, soft float"),
    "riscv32imc": _rv("riscv32imc", "rv32imc", "ilp32", "RV32IMC, soft float"),
    "riscv32imac": _rv("riscv32imac", "rv32imac", "ilp32", "RV32IMAC, soft float"),
    "riscv32imafc": _rv("riscv32imafc", "rv32imafc", "ilp32f", "RV32IMAFC, single-precision FPU (ilp32f)"),
}


def get_target(name: str) -> Target:
    if name not in TARGETS:
        raise EerieError(f"unknown target {name!r} (known: {', '.join(sorted(TARGETS))})")
    return TARGETS[name]
