"""Proofs about the generated C, run on every compile (see ast_proof.py and stack.py).

`verify_generated` writes the model's C to a scratch directory, proves the source free of
allocation, VLAs, recursion, function pointers and unbounded loops (pycparser) under each
preprocessor configuration it is built under (the target compiler's own macros, and none:
proof_config.py), then compiles it with the target's real toolchain to bound the stack of
NAME_invoke and to size it.
"""
from __future__ import annotations

import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..toolchain.targets import Target
from .ast_proof import prove_configurations
from .proof_config import configurations
from .stack import stack_bound

# Hardware exception entry on Cortex-M stacks 8 words, or 26 with the (lazily reserved) FP
# context; the eerie runtime's SysTick handler adds a small leaf frame on top. The model
# never enables interrupts itself, but a firmware's interrupts land on the same stack.
EXCEPTION_FRAME = {False: 32, True: 104}
RUNTIME_HANDLER_BYTES = 16
# RISC-V hardware stacks nothing on a trap; a C interrupt handler saves what it may clobber in
# its own frame: at most the 16 caller-saved integer registers (ra, t0-t6, a0-a7), and with an
# FPU the 20 caller-saved FP registers (ft0-ft11, fa0-fa7, 4 bytes each on F).
RISCV_TRAP_SAVE = {False: 64, True: 144}


def interrupt_allowance(target: Target) -> int:
    if not target.embedded:
        return 0
    if target.family == "riscv":
        return RISCV_TRAP_SAVE[target.has_fpu] + RUNTIME_HANDLER_BYTES
    return EXCEPTION_FRAME[target.has_fpu] + RUNTIME_HANDLER_BYTES


def verify_generated(name: str, files: dict[str, str], target: Target) -> tuple[list[dict], dict]:
    """Returns (checks for report["verified"], figures for the report). Raises CompilerBug."""
    entry = f"{name}_invoke"
    with tempfile.TemporaryDirectory(prefix="eerie_verify_") as tmp, \
            ThreadPoolExecutor(max_workers=1) as pool:
        d = Path(tmp)
        for f in (f"{name}.c", f"{name}.h"):
            (d / f).write_text(files[f])
        # The target compiler builds the file (a separate process, most of the stack bound's
        # time) while this process proves the source: the two are independent. A failed
        # proof is reported first, as before; the pool waits for the compile either way.
        stack_job = pool.submit(stack_bound, d / f"{name}.c", [d], target.cc, target.cflags, entry)
        ast = prove_configurations(d / f"{name}.c", [d], entry, configurations(target))
        stack = stack_job.result()
    # The bound is NAME_invoke's own worst case; firmware budgets add one interrupt on top
    # (reported separately because it depends on the firmware, not on the model).
    allowance = interrupt_allowance(target)
    bound = stack["stack_bound_bytes"]
    figures = {"stack_bound_bytes": bound, "stack_interrupt_allowance_bytes": allowance,
               "stack_path": stack["path"]}
    sizes = stack.get("object_sizes")
    if sizes:
        figures["model_object_sizes"] = sizes
    stack_check = {"check": "stack_bound", "ok": True, "stack_bound_bytes": bound,
                   "compiler": stack["compiler"], "frames": "all static",
                   "includes": stack["includes"],
                   "externals": stack["externals"]}
    ast_check = {k: v for k, v in ast.items() if k != "externals"}
    ast_check["check"] = "c_source"
    ast_check["proves"] = ("in each configuration: no allocator calls, no VLAs, constant array "
                           "sizes, no recursion, no function pointers, every loop (C, and inline "
                           "assembly in the one counted form) bounded by compile-time constants, "
                           "inline assembly free of stack, branch and trap instructions")
    return [ast_check, stack_check], figures
