"""`eerie-c validate`'s references: TFLM's own runtime (the tflite-micro package, reference
kernels) for a .tflite model, and the program itself run by eager PyTorch for a .pt2 (the
converted module for a PT2E int8 program). One inference per leading index; outputs batched."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .errors import EerieError
from .progress import Bar

TFLM_ARENA = 64 * 1024 * 1024   # TFLM's interpreter plans within it; generous for any MCU model
PIP_HINT = "pip install 'eerie-c[validate]'"


def reference_name(model) -> str:
    return "TFLM (tflite-micro reference kernels)" if Path(model).suffix != ".pt2" else "PyTorch eager"


def require_reference(model):
    """Fail before compiling when the reference's runtime is missing."""
    if Path(model).suffix == ".pt2":
        try:
            import torch  # noqa: F401
        except ImportError:
            raise EerieError("validating a .pt2 needs PyTorch (pip install torch)") from None
        return
    try:
        from tflite_micro.python.tflite_micro import runtime  # noqa: F401
    except ImportError:
        raise EerieError(f"validating a .tflite needs TFLM's runtime, the tflite-micro package: "
                         f"{PIP_HINT}") from None


def run_reference(model, arrays: list[np.ndarray], n_outputs: int) -> list[np.ndarray]:
    bar = Bar(len(arrays[0]), f"reference: {reference_name(model)}")
    try:
        if Path(model).suffix == ".pt2":
            outs = _torch(model, arrays, bar)
        else:
            outs = _tflm(model, arrays, n_outputs, bar)
    finally:
        bar.close()
    return [np.stack([o[k] for o in outs]) for k in range(n_outputs)]


def _tflm(model, arrays, n_outputs, bar) -> list[list[np.ndarray]]:
    from tflite_micro.python.tflite_micro import runtime
    try:
        it = runtime.Interpreter.from_bytes(Path(model).read_bytes(), arena_size=TFLM_ARENA)
    except Exception as e:
        raise EerieError(f"{model}: TFLM could not load the model for the reference "
                         f"({type(e).__name__}: {str(e).strip()[:200]})") from None
    outs = []
    for i in range(len(arrays[0])):
        for k, x in enumerate(arrays):
            it.set_input(x[i], k)
        try:
            it.invoke()
        except Exception as e:   # TFLM refuses the input (an index out of range, say)
            raise EerieError(_failed(i, e)) from None
        outs.append([it.get_output(k).copy() for k in range(n_outputs)])
        bar.step()
    return outs


def _torch(model, arrays, bar) -> list[list[np.ndarray]]:
    import torch
    from torch.utils._pytree import tree_leaves
    from .frontend.torch.capture import register_quantized_ops
    from .frontend.torch.quiet import quiet_torch
    register_quantized_ops()
    with quiet_torch():
        module = torch.export.load(str(model)).module()
    outs = []
    with torch.no_grad():
        for i in range(len(arrays[0])):
            try:
                result = module(*(torch.from_numpy(np.array(x[i])) for x in arrays))
            except Exception as e:   # an index input out of range, say
                raise EerieError(_failed(i, e)) from None
            outs.append([t.detach().numpy() for t in tree_leaves(result) if isinstance(t, torch.Tensor)])
            bar.step()
    return outs


def _failed(i: int, e: Exception) -> str:
    return (f"the reference failed on input {i} ({type(e).__name__}: {' '.join(str(e).split())[:200]}); "
            f"random integer inputs may be out of range for the model (indices): give --inputs")
