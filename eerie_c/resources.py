"""Where the data directories (templates/, runtime_c/, boards/) are.

Installed: they ship inside the package (see pyproject's package-dir). In a source checkout
they sit beside the package directory.
"""
from pathlib import Path

_PKG = Path(__file__).resolve().parent


def resource_dir(name: str) -> Path:
    for candidate in (_PKG / name, _PKG.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"eerie-c data directory {name!r} is missing from the installation")
