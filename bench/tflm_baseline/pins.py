"""The pinned sources of the TFLM + CMSIS-NN baseline (pins.toml) and where their build goes.

Pure Python, no sources needed: build.py, the harness and the unit test share it.
"""
from __future__ import annotations

import hashlib
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
PINS_FILE = HERE / "pins.toml"
DOWNLOADS = "tensorflow/lite/micro/tools/make/downloads"
# The cores the baseline is built for: board -> TFLM's TARGET_ARCH (cortex_m_generic).
BOARD_ARCH = {"mps2-an386": "cortex-m4+fp", "mps3-an547": "cortex-m55"}
# Every build lives under this folder, one subfolder per pin set (so worktrees share it).
CACHE_ENV = "EERIE_TFLM_BASELINE_DIR"


class PinError(ValueError):
    """pins.toml is malformed (a one-line message)."""


@dataclass(frozen=True)
class Pin:
    name: str          # the table name in pins.toml
    repo: str          # GitHub owner/name
    commit: str        # 40 hex digits
    dest: str          # folder under DOWNLOADS ("" = the TFLM tree itself)
    patch: str = ""    # a TFLM-tree path of the patch TFLM's download script applies

    @property
    def url(self) -> str:
        return f"https://github.com/{self.repo}"


def load_pins(path: Path = PINS_FILE) -> list[Pin]:
    """The pins, TFLM first; PinError names the first problem."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise PinError(f"{path}: {e}") from None
    pins = []
    for name, t in data.items():
        if not isinstance(t, dict):
            raise PinError(f"{path}: [{name}] is not a table")
        unknown = set(t) - {"repo", "commit", "dest", "patch"}
        if unknown:
            raise PinError(f"{path}: [{name}] has unknown field(s) {', '.join(sorted(unknown))}")
        for field in ("repo", "commit", "dest"):
            if not isinstance(t.get(field), str):
                raise PinError(f"{path}: [{name}] needs a string '{field}'")
        if not re.fullmatch(r"[0-9a-f]{40}", t["commit"]):
            raise PinError(f"{path}: [{name}] commit must be 40 lowercase hex digits, got {t['commit']!r}")
        if not re.fullmatch(r"[\w.-]+/[\w.-]+", t["repo"]):
            raise PinError(f"{path}: [{name}] repo must be OWNER/NAME, got {t['repo']!r}")
        pins.append(Pin(name, t["repo"], t["commit"], t["dest"].strip("/"), t.get("patch", "")))
    roots = [p for p in pins if p.dest == ""]
    if len(roots) != 1 or roots[0].name != "tflite-micro":
        raise PinError(f"{path}: exactly one entry, [tflite-micro], must have dest = \"\"")
    return roots + [p for p in pins if p.dest != ""]


def pins_key(pins: list[Pin]) -> str:
    """A short name for this pin set: its builds go to cache_root()/KEY."""
    text = "\n".join(f"{p.name} {p.repo} {p.commit} {p.dest} {p.patch}" for p in pins)
    return f"tflm-{pins[0].commit[:10]}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def cache_root() -> Path:
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "eerie-c" / "tflm-baseline"


def build_dir(pins: list[Pin] | None = None) -> Path:
    """Where this pin set's sources, libraries and flags are (build.py writes it)."""
    return cache_root() / pins_key(pins if pins is not None else load_pins())


def library_info(arch: str, pins: list[Pin] | None = None) -> Path:
    """The JSON file build.py writes beside one core's library (flags, paths)."""
    return build_dir(pins) / "lib" / arch / "build.json"
