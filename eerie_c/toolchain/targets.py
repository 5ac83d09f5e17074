"""Compiler flags per target. The model's own C is always checked with the strict set."""
from dataclasses import dataclass

from ..errors import EerieError

STRICT = "-std=c99 -Wall -Wextra -Werror -Wvla -pedantic"


@dataclass(frozen=True)
class Target:
    name: str
    cc: str
    arch_flags: str
    opt: str = "-O2"

    @property
    def cflags(self) -> str:
        return " ".join(x for x in (STRICT, self.opt, self.arch_flags) if x)


TARGETS = {
    "host": Target("host", "cc", ""),
}


def get_target(name: str) -> Target:
    if name not in TARGETS:
        raise EerieError(f"unknown target {name!r} (known: {', '.join(sorted(TARGETS))})")
    return TARGETS[name]
