"""What a firmware project needs per architecture: the cross toolchain, the C library's link
flags, the runtime sources, QEMU, and how the stack of the whole firmware is bounded.

Arm (Cortex-M): arm-none-eabi-gcc with newlib (nano, nosys), runtime_c/eerie_startup.c and
eerie_rt.c (vector table, SysTick counter), qemu-system-arm.
RISC-V (RV32): riscv64-unknown-elf-gcc with picolibc (Debian's package; the toolchain has no
newlib), runtime_c/eerie_startup_riscv.c and eerie_rt_riscv.c (written into the project as
runtime/eerie_startup.c and eerie_rt.c, so Makefile, CMakeLists and names stay the same),
qemu-system-riscv32 with the board's qemu_system / qemu_args.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Arch:
    family: str
    cross: str                     # tool prefix: CROSS gcc, size, objdump
    qemu: str                      # default QEMU binary (a board may name its own)
    link_specs: str                # libc link flags after -nostartfiles (Makefile: CFLAGS too)
    cmake_link_specs: str          # the same for CMake, whose link line has no compile options
    runtime: dict                  # project file under runtime/ -> file in runtime_c/
    cmake_toolchain: str           # the CMake toolchain file under runtime/
    apt: str                       # Debian packages that provide the toolchain
    handlers: tuple[str, ...]      # interrupt/trap handlers the firmware's stack bound adds
    # What the hardware pushes on the stack when it takes an interrupt, without and with an
    # FPU: Cortex-M stacks 8 words, 26 with the (lazy) FP context. RISC-V pushes nothing: the
    # handler saves registers in its own frame, which -fstack-usage counts.
    exception_frame: tuple[int, int]


ARM = Arch("arm", "arm-none-eabi-", "qemu-system-arm", "--specs=nano.specs --specs=nosys.specs",
           "--specs=nano.specs --specs=nosys.specs",
           {"eerie_rt.h": "eerie_rt.h", "eerie_rt.c": "eerie_rt.c", "eerie_semihosting.h": "eerie_semihosting.h",
            "eerie_startup.c": "eerie_startup.c", "arm-none-eabi.cmake": "arm-none-eabi.cmake"},
           "arm-none-eabi.cmake", "gcc-arm-none-eabi libnewlib-arm-none-eabi",
           ("SysTick_Handler",), (32, 104))

# The RISC-V targets' own flags carry -specs=picolibc.specs (for its headers), and gcc rejects
# the specs file given twice: the Makefile links with CFLAGS, so only CMake adds it.
RISCV = Arch("riscv", "riscv64-unknown-elf-", "qemu-system-riscv32", "", "-specs=picolibc.specs",
             {"eerie_rt.h": "eerie_rt.h", "eerie_rt.c": "eerie_rt_riscv.c", "eerie_semihosting.h": "eerie_semihosting.h",
              "eerie_startup.c": "eerie_startup_riscv.c",
              "riscv64-unknown-elf.cmake": "riscv64-unknown-elf.cmake"},
             "riscv64-unknown-elf.cmake", "gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf",
             ("eerie_trap_handler",), (0, 0))

ARCHES = {"arm": ARM, "riscv": RISCV}


def arch_of(board) -> Arch:
    return ARCHES[board.family]
