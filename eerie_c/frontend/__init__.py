"""Frontends: turn a model file into the IR and nothing else."""
from pathlib import Path

from ..errors import EerieError


def load_model(path, name: str | None = None, max_iterations: int | None = None):
    """max_iterations: the loop bound (torch: default 1000; TFLite: WHILE loops whose trip
    count cannot be proved need it)."""
    p = Path(path)
    if not p.exists():
        raise EerieError(f"{p}: no such file")
    if p.suffix == ".tflite":
        from .tflite import load_tflite
        return load_tflite(p.read_bytes(), name or p.stem, max_iterations)
    if p.suffix == ".pt2":
        from .torch import load_pt2
        return load_pt2(p, name or p.stem, max_iterations)
    raise EerieError(f"{p}: unknown model format (expected a .tflite file or a .pt2 file "
                     f"written by torch.export.save)")
