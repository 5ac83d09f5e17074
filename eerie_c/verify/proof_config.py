"""The preprocessor configurations the C-source proof runs under.

The generated C branches on compiler macros (`#if defined(__ARM_FEATURE_DSP)`, `__ARM_FEATURE_MVE`,
`__thumb2__`, `__GNUC__`): on a Cortex-M target most of the int8 kernels' inner loops are in
those branches (ACLE/MVE intrinsics, inline assembly), so a proof of the portable branches
alone would not be about the code that ships.  Each compile therefore proves the file once
per configuration it is built under:

* the target's own: the preprocessor of the target's compiler (arm-none-eabi-gcc for Cortex-M,
  cc for the host) run with the target's flags, so exactly the macros that compiler predefines
  for that core (`-dM -E` lists them; `features` records the Arm ones in the report);
* portable: no compiler-specific macros at all (gcc -undef), the configuration of any other
  C99 compiler the file may be built with (the file promises to build anywhere).

Both see only the verifier's stand-in headers (fake_include/, -nostdinc), so a kernel that
uses an intrinsic the stand-ins do not declare fails the proof instead of passing unseen.
"""
from __future__ import annotations

import shlex
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache

from ..errors import CompilerBug

# Target flags that change predefined macros; warnings and -pedantic do not.
_MACRO_FLAGS = ("-m", "-std", "-O", "-f", "-D", "-U", "-ansi")


@dataclass(frozen=True)
class ProofConfig:
    label: str                 # for report.json and messages
    cpp: str                   # the compiler whose preprocessor is run (`cpp -E`)
    flags: tuple[str, ...]     # its flags (the target's macro-relevant ones)
    undef: bool = False        # -undef: no predefined macros beyond __STDC__ and friends


PORTABLE = ProofConfig("portable (no compiler-specific macros: gcc -undef)", "gcc", ("-std=c99",), undef=True)


def target_config(target) -> ProofConfig:
    """The configuration `target`'s compiler builds the file under."""
    flags = tuple(f for f in shlex.split(target.cflags) if f.startswith(_MACRO_FLAGS))
    arch = " ".join(f for f in flags if f.startswith("-m")) or "host"
    return ProofConfig(f"{target.name} ({target.cc} {arch} macros)", target.cc, flags)


def configurations(target) -> list[ProofConfig]:
    """What a compile for `target` proves: the target's configuration first, then portable."""
    return [target_config(target), PORTABLE]


@lru_cache(maxsize=None)
def predefined_macros(cpp: str, flags: tuple[str, ...]) -> dict[str, str]:
    """{macro: definition} that `cpp flags` predefines (`-dM -E` of an empty file)."""
    if shutil.which(cpp) is None:
        raise CompilerBug(f"C proof: preprocessor {cpp!r} is not installed")
    p = subprocess.run([cpp, *flags, "-dM", "-E", "-x", "c", "/dev/null"], capture_output=True, text=True)
    if p.returncode != 0:
        raise CompilerBug(f"C proof: {cpp} {' '.join(flags)} -dM -E failed:\n{p.stderr.strip()}")
    out = {}
    for line in p.stdout.splitlines():
        parts = line.split(None, 2)
        if len(parts) >= 2 and parts[0] == "#define":
            out[parts[1]] = parts[2] if len(parts) > 2 else ""
    return out


def features(config: ProofConfig) -> list[str]:
    """The Arm architecture and feature macros of `config` (what selects the kernels' target
    branches), e.g. ["__ARM_ARCH=7", "__ARM_FEATURE_DSP", "__thumb2__"], or the RISC-V ISA
    macros (no kernel branches on them yet: ["__riscv", "__riscv_mul", ...]); [] for others."""
    if config.undef:
        return []
    macros = predefined_macros(config.cpp, config.flags)
    keep = sorted(m for m in macros if (m.startswith(("__ARM_FEATURE_", "__ARM_ARCH", "__thumb"))
                                        or m == "__riscv" or m.startswith("__riscv_"))
                  and m not in ("__ARM_ARCH_PROFILE", "__ARM_ARCH_ISA_ARM", "__riscv_arch_test"))
    return [f"{m}={macros[m]}" if m == "__ARM_ARCH" else m for m in keep]
