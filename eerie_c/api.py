"""The Python entry points in one place, for scripts and tests: compile a model file
(pipeline.py), run it (runner.py). `eerie_c.compile` / `eerie_c.run` also take in-memory PyTorch
programs (python_api.py). This module only re-exports; nothing below it imports it."""
from .names import check_name, default_name, merge_files, model_name  # noqa: F401
from .output import write_files  # noqa: F401
from .pipeline import (CompileResult, add_firmware, board_and_target, compile_graph,  # noqa: F401
                       compile_model, report_files)
from .runner import load_inputs, run_compiled, run_model  # noqa: F401
