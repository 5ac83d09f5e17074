"""eerie-c: compile a trained neural network into one standalone C file for microcontrollers."""
from .version import __version__  # noqa: F401

from .errors import EerieError  # noqa: E402,F401


def compile(model, example_args=None, target=None, board=None, out_dir=None, name=None, **options):
    """Compile an nn.Module (with example_args), an ExportedProgram, or a .tflite / .pt2 path."""
    from .python_api import compile as _compile
    return _compile(model, example_args, target=target, board=board, out_dir=out_dir, name=name, **options)


def run(model, inputs, example_args=None, target=None, board=None, out_dir=None, name=None, timeout=None,
        **options):
    """Compile, build and run; returns (outputs, report). Inputs are numpy arrays."""
    from .python_api import run as _run
    return _run(model, inputs, example_args, target=target, board=board, out_dir=out_dir, name=name,
                timeout=timeout, **options)


def check(module, example_args=None, **options):
    """Can this PyTorch program be compiled? Returns an eerie_c.checker.CheckResult: `.ok`, `.text()`
    (each graph break / export failure / unsupported op with file:line and the fix), `.findings`."""
    from .checker import check as _check
    return _check(module, example_args, **options)


def validate(model, inputs=None, board=None, target=None, count=None, labels=None, out_dir=None,
             example_args=None, **options):
    """Compare the compiled model with its reference (TFLM for .tflite, PyTorch for .pt2 or an
    nn.Module / ExportedProgram) on `inputs` (a .npz/.npy/directory path, arrays, or None for
    random ones): returns an eerie_c.validation.ValidationResult (`.ok`, `.exit_code`,
    `.text()`, `.outputs`)."""
    from .validation import validate as _validate
    return _validate(model, inputs, board=board, target=target, count=count, labels=labels,
                     out_dir=out_dir, example_args=example_args, **options)
