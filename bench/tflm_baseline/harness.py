"""Any .tflite on TFLM + CMSIS-NN in QEMU: the firmware (main.cc.in with the model's operators
registered, the model as a C array, eerie-c's own start-up and runtime, the board's linker
script), its build against the library build.py made, and one QEMU boot for all inputs.

The pure parts (model_ops, resolver_calls, harness_sources, linker_script) need no TFLM
sources; tests/test_tflm_baseline.py checks them.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
ARENA_BYTES = 2 * 1024 * 1024   # large enough for any model these boards hold; the used part is reported
RUNTIME_SOURCES = ("eerie_startup.c", "eerie_rt.c")
# BuiltinOperator names whose MicroMutableOpResolver method is not the CamelCase of the name.
_METHOD_EXCEPTIONS = {"BATCH_MATMUL": "AddBatchMatMul", "PADV2": "AddPadV2", "CUMSUM": "AddCumSum",
                      "UNIDIRECTIONAL_SEQUENCE_LSTM": "AddUnidirectionalSequenceLSTM"}


class HarnessError(RuntimeError):
    """The model cannot run on the baseline (one line)."""


def model_ops(model: bytes) -> list[str]:
    """The builtin operator names the model's operator-code table lists (each once, in order);
    custom operators are refused: the baseline registers builtins only."""
    import tflite
    m = tflite.Model.GetRootAs(model, 0)
    names = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
    ops = []
    for i in range(m.OperatorCodesLength()):
        oc = m.OperatorCodes(i)
        # Schema v3a: builtin_code holds codes above 127, deprecated_builtin_code the rest.
        code = max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())
        if code == tflite.BuiltinOperator.CUSTOM:
            raise HarnessError(f"custom operator {oc.CustomCode().decode(errors='replace')!r}: "
                               f"the TFLM baseline registers builtin operators only")
        name = names.get(code)
        if name is None:
            raise HarnessError(f"builtin operator code {code} is unknown to the tflite package")
        if name not in ops:
            ops.append(name)
    return ops


def resolver_method(op: str) -> str:
    """CONV_2D -> AddConv2D: the MicroMutableOpResolver method that registers a builtin."""
    if op in _METHOD_EXCEPTIONS:
        return _METHOD_EXCEPTIONS[op]
    return "Add" + "".join(part if part[:1].isdigit() else part[:1] + part[1:].lower()
                           for part in op.split("_"))


def available_methods(tflm_src: Path) -> set[str]:
    """The Add* methods this TFLM's MicroMutableOpResolver has."""
    header = tflm_src / "tensorflow/lite/micro/micro_mutable_op_resolver.h"
    return set(re.findall(r"TfLiteStatus (Add\w+)\(", header.read_text()))


def resolver_calls(ops: list[str], methods: set[str] | None = None) -> list[str]:
    """The resolver.AddX() lines for the model's operators; with `methods` (the library's),
    an operator TFLM cannot register is refused by name."""
    calls = []
    for op in ops:
        method = resolver_method(op)
        if methods is not None and method not in methods:
            raise HarnessError(f"operator {op}: this TFLM's MicroMutableOpResolver has no {method}()")
        calls.append(f"    if (resolver.{method}() != kTfLiteOk) {{\n"
                     f"        return fail(\"cannot register {op}\");\n    }}")
    return calls


def c_array(name: str, data: bytes) -> str:
    """The bytes as a 16-byte aligned const C array (what an application embeds)."""
    lines = [", ".join(f"0x{b:02x}" for b in data[i:i + 16]) for i in range(0, len(data), 16)]
    return (f"/* {len(data)} bytes: the .tflite flatbuffer. */\n"
            f"extern const unsigned char {name}[];\n"
            f"alignas(16) const unsigned char {name}[] = {{\n    "
            + ",\n    ".join(lines) + "\n};\n")


def harness_sources(model: bytes, model_name: str, board: str, methods: set[str] | None = None,
                    arena_bytes: int = ARENA_BYTES) -> dict[str, str]:
    """main.cc and model_data.cc for one model."""
    ops = model_ops(model)
    main = (HERE / "main.cc.in").read_text()
    for key, value in {"@MODEL@": model_name, "@BOARD@": board, "@ARENA_BYTES@": str(arena_bytes),
                       "@N_OPS@": str(len(ops)),
                       "@ADD_OPS@": "\n".join(resolver_calls(ops, methods))}.items():
        main = main.replace(key, value)
    return {"main.cc": main, "model_data.cc": c_array("g_model", model)}


_INIT_ARRAY = """    .init_array :
    {
        . = ALIGN(4);
        __init_array_start = .;
        KEEP(*(SORT(.init_array.*)))
        KEEP(*(.init_array))
        __init_array_end = .;
    } > FLASH

"""


def linker_script(board_ld: str) -> str:
    """The board's linker script with the static-constructor table C++ needs (main.cc runs it)."""
    anchor = "    .ARM.extab :"
    if anchor not in board_ld:
        raise HarnessError("the board's linker script has no .ARM.extab section to put .init_array before")
    return board_ld.replace(anchor, _INIT_ARRAY + anchor, 1)


def _run(cmd: list[str], cwd: Path, what: str) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if p.returncode != 0:
        tail = " | ".join((p.stderr or p.stdout).strip().splitlines()[-6:])
        raise HarnessError(f"{what} failed (exit {p.returncode}): {tail}")
    return p


def build_firmware(work: Path, info: dict, board, model: bytes, model_name: str) -> Path:
    """Write and build the firmware in `work`; returns the ELF."""
    from eerie_c.resources import resource_dir
    src = Path(info["src"])
    files = harness_sources(model, model_name, board.name, available_methods(src))
    rt = resource_dir("runtime_c")
    for f in ("eerie_rt.h", "eerie_semihosting.h", *RUNTIME_SOURCES):
        files[f] = (rt / f).read_text()
    files["board.ld"] = linker_script(board.linker_script.read_text())
    for name, text in files.items():
        (work / name).write_text(text)
    tc = info["toolchain_root"] + "arm-none-eabi-"
    ipt = board.insns_per_tick
    ticks = [f"-DEERIE_INSNS_PER_TICK_NUM={ipt.numerator}u", f"-DEERIE_INSNS_PER_TICK_DEN={ipt.denominator}u"]
    # The library's own flags (CPU, float ABI, defines), so the harness sees the same headers.
    cxx = [tc + "g++", *info["cxxflags"], "-O2", *info["includes"], "-I."]
    cc = [tc + "gcc", *[f for f in info["ccflags"] if not f.startswith("-W")], "-O2", "-I.", *ticks]
    objs = []
    for f in ("main.cc", "model_data.cc"):
        _run([*cxx, "-c", f, "-o", f + ".o"], work, f"compiling {f}")
        objs.append(f + ".o")
    for f in RUNTIME_SOURCES:
        _run([*cc, "-c", f, "-o", f + ".o"], work, f"compiling {f}")
        objs.append(f + ".o")
    elf = work / "tflm.elf"
    flags = [f for f in info["cxxflags"] if f.startswith(("-mcpu", "-mfpu", "-mfloat-abi", "-mthumb"))]
    _run([tc + "g++", *flags, "-nostartfiles", "--specs=nano.specs", "--specs=nosys.specs",
          "-T", "board.ld", "-Wl,--gc-sections", f"-Wl,--defsym=__eerie_stack_size__={board.stack_bytes}",
          "-Wl,-Map=tflm.map", *objs, info["library"], "-lm", "-o", elf.name], work, "linking the firmware")
    return elf


def run_records(work: Path, board, elf: Path, records: bytes, n: int, timeout: float = 1800):
    """One QEMU boot for n records; returns (outputs.bin bytes, QemuRun)."""
    from eerie_c.errors import EerieError
    from eerie_c.toolchain.qemu import run_qemu
    (work / "inputs.bin").write_bytes(records)
    try:
        run = run_qemu(board, elf, work, timeout)
    except EerieError as e:   # CompilerBug too: a fault here is TFLM's, not eerie-c's
        raise HarnessError(str(e)) from None
    if run.values.get("inferences") != n or len(run.instructions) != n:
        tail = " | ".join(run.stdout.strip().splitlines()[-4:])
        raise HarnessError(f"the TFLM firmware ran {run.values.get('inferences')} of {n} inferences: {tail}")
    return (work / "outputs.bin").read_bytes(), run


def random_records(details: list[dict], n: int, seed: int) -> list[np.ndarray]:
    """n random records per input: the full range for integer types, N(0, 1) for float."""
    rng = np.random.default_rng(seed)
    out = []
    for d in details:
        dtype, shape = np.dtype(d["dtype"]), tuple(int(s) for s in d["shape"])
        if dtype.kind in "iu":
            lo, hi = np.iinfo(dtype).min, np.iinfo(dtype).max
            if dtype.itemsize > 2:   # int32/int64 inputs are usually indices or sizes
                lo, hi = 0, 8
            out.append(rng.integers(lo, hi, size=(n, *shape), endpoint=True).astype(dtype))
        elif dtype == np.bool_:
            out.append(rng.integers(0, 2, size=(n, *shape)).astype(np.bool_))
        else:
            out.append(rng.standard_normal(size=(n, *shape)).astype(dtype))
    return out
