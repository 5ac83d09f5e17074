"""Frontends: turn a model file into the IR and nothing else."""
from pathlib import Path

from ..errors import EerieError


def load_model(path, name: str | None = None):
    p = Path(path)
    if not p.exists():
        raise EerieError(f"{p}: no such file")
    if p.suffix == ".tflite":
        from .tflite import load_tflite
        return load_tflite(p.read_bytes(), name or p.stem)
    if p.suffix == ".pt2":
        from .torch import load_pt2
        return load_pt2(p, name or p.stem)
    raise EerieError(f"{p}: unknown model format (expected a .tflite file or a .pt2 file "
                     f"written by torch.export.save)")
