"""Cortex-M boards in QEMU: every shared model on every board equals TFLM (int8 bit for bit,
float within 1e-5 of the output range) on 5 random inputs passed into the firmware; the
measurements are reported; budgets fail at compile time; the model's .mk fragment works
from a hand-written firmware Makefile; the SysTick instruction counter is calibrated."""
from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import MODELS, assert_invoke_stack_within_bound, input_specs, random_inputs, require_board_tools, tflm_run
from eerie_c.api import compile_model, run_model
from eerie_c.cli import main as cli_main
from eerie_c.resources import resource_dir
from eerie_c.toolchain.boards import board_names, get_board
from eerie_c.toolchain.targets import TARGETS
from test_target_flags import expected_m_flags, m_flags

BOARDS = ["mps2-an385", "mps2-an386", "mps2-an500", "mps2-an505", "mps3-an547"]
# The Cortex-M0 board is too small for the shared models (tests/boards/test_cortex_m0.py checks
# that each of them fails to fit at compile time) and runs small models of every kernel family
# instead, with the same stack checks. It is calibrated and listed like the others.
ALL_BOARDS = BOARDS + ["microbit", "netduinoplus2"]
# The STM32F405 board talks over its UART (frames, no semihosting: ~130 us per byte under QEMU),
# so it runs the two models with small inputs; tests/boards/test_netduinoplus2.py has the rest.
UART_MODELS = ["kws_ref_model", "pretrainedResnet_quant"]
INT8_MODELS = ["kws_ref_model", "vww_96_int8", "pretrainedResnet_quant", "ad01_int8"]
FLOAT_MODELS = ["pretrainedResnet", "ad01_fp32"]
FPU_BOARDS = ["mps2-an386", "mps2-an500", "mps2-an505", "mps3-an547"]
# Float models also run with soft float on the M3.
FLOAT_BOARDS = FPU_BOARDS + ["mps2-an385"]
N_INPUTS = 5
# board_tools (tests/conftest.py): board tests FAIL (never skip) without the toolchain and QEMU.


# Each combination takes 1-3 s (build + one QEMU boot for all inputs), except float ResNet-8
# in soft float on the M3: ~0.9 G instructions per inference, ~12 s. All run in CI.
def _combos():
    for m in INT8_MODELS:
        for b in BOARDS:
            yield m, b
    for m in FLOAT_MODELS:
        for b in FLOAT_BOARDS:
            yield m, b
    for m in UART_MODELS:
        yield m, "netduinoplus2"


def _param(m, b):
    return pytest.param(m, b, id=f"{m}-{b}")


@functools.lru_cache(maxsize=None)
def _inputs_and_reference(model: str):
    path = MODELS / f"{model}.tflite"
    spec = input_specs(path)
    xs = [random_inputs(s["shape"], s["dtype"], N_INPUTS, seed=7 + k) for k, s in enumerate(spec)]
    return path, xs, tflm_run(path, xs)


def test_all_boards_are_listed(board_tools, capsys):
    assert set(ALL_BOARDS) <= set(board_names())
    assert cli_main(["boards"]) == 0
    out = capsys.readouterr().out
    for b in ALL_BOARDS:
        brd = get_board(b)
        line = next(ln for ln in out.splitlines() if ln.startswith(b + " "))
        assert brd.cpu in line and ("MiB" in line or "KiB" in line)


@pytest.mark.parametrize("model,board", [_param(m, b) for m, b in _combos()])
def test_model_on_board_matches_tflm(board_tools, models_dir, tmp_path, model, board):
    path, xs, ref = _inputs_and_reference(model)
    out_dir = tmp_path / "fw"
    got, report = run_model(path, xs, board=board, out_dir=out_dir)
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        assert g.shape == r.shape and g.dtype == r.dtype
        if np.issubdtype(r.dtype, np.floating):
            span = max(float(np.abs(r).max()), 1e-6)
            np.testing.assert_allclose(g, r, rtol=0, atol=1e-5 * span)
        else:
            np.testing.assert_array_equal(g, r)
    saved = json.loads((out_dir / "report.json").read_text())
    for key in ("instructions", "flash_bytes", "ram_static_bytes", "stack_high_water_bytes"):
        assert saved[key] == report[key]
    assert saved["board"] == board and len(saved["instructions_per_inference"]) == N_INPUTS
    # A sanity floor on the measured count: one SMLAD does 2 int8 MACs, one MVE VMLADAVA 16.
    macs_per_instruction = 16 if board == "mps3-an547" else 2
    assert saved["instructions"] >= saved["macs"] / macs_per_instruction
    assert saved["flash_bytes"] > saved["constant_bytes"]   # weights plus code
    assert saved["ram_static_bytes"] >= saved["arena_bytes"]
    assert 0 < saved["stack_high_water_bytes"] < saved["stack_reserve_bytes"]
    # The compile-time stack bound of NAME_invoke (plus one interrupt, which may land inside
    # the measured call) covers what it used in QEMU, and is a useful bound (within 2x of the
    # measurement), not a huge constant.
    assert_invoke_stack_within_bound(saved)
    # The same for the whole firmware: the painted stack's high-water mark (start-up, harness,
    # model, interrupts) stays under the bound proven from every source file's call graph.
    # Tightness is judged on the thread part of the bound: the exception frame the hardware
    # stacks (32 B, 104 B with FP context) is a constant a run only sees when an interrupt
    # happens to land at the deepest call.
    hw, fw_bound, fw = saved["stack_high_water_bytes"], saved["firmware_stack_bound_bytes"], saved["firmware_stack"]
    assert hw <= fw_bound == fw["thread_bytes"] + fw["exception_frame_bytes"] + fw["handler_bytes"]
    assert fw["thread_bytes"] <= 2 * hw, (hw, fw_bound, fw)
    assert saved["firmware_stack"]["path"][:2] == ["Reset_Handler", "main"]


# ---- the SysTick instruction counter ----------------------------------------------------

CAL_MAIN = r"""
#include <stdint.h>
#include "eerie_rt.h"
#if defined(__ARM_ARCH_6M__)
#define ASM_SYNTAX_RESTORE "\n.syntax divided"
#else
#define ASM_SYNTAX_RESTORE ""
#endif
int main(void)
{
    uint32_t n = 1000000u;
    uint64_t t0 = eerie_counter_ticks();
    /* exactly 2,000,000 instructions: subs + bne per iteration */
    /* (ARMv6-M inline asm is in divided syntax unless told otherwise) */
    __asm__ __volatile__(".syntax unified\n1: subs %0, %0, #1\n\tbne 1b" ASM_SYNTAX_RESTORE
                         : "+l"(n) :: "cc");
    eerie_put_kv("loop_instructions", eerie_ticks_to_instructions(eerie_counter_ticks() - t0));
    eerie_put_kv("stack_high_water_bytes", eerie_stack_high_water());
    return 0;
}
"""


def board_link_flags(brd) -> list[str]:
    """What a hand-made build for `brd` adds: the part's runtime sources, the UART console,
    and, for a board with CCM on a QEMU that has none (before 8.0), arena and stack in SRAM."""
    from eerie_c.toolchain.qemu import QEMU
    from eerie_c.toolchain.serial_link import qemu_version
    rt = resource_dir("runtime_c")
    flags = [str(rt / f) for f in brd.runtime_sources]
    if brd.output == "uart":
        flags.append("-DEERIE_CONSOLE_UART")
    if brd.ccm is not None and qemu_version(QEMU) < (8, 0):
        flags += ["-Wl,--defsym=__eerie_arena_in_ccm__=0", "-Wl,--defsym=__eerie_stack_in_ccm__=0"]
    return flags


@pytest.mark.parametrize("reload", [None, 0xFFF])
@pytest.mark.parametrize("board", ALL_BOARDS)
def test_instruction_counter_calibrated(board_tools, tmp_path, board, reload):
    """A loop of exactly 2,000,000 instructions measures as such on every board (to one
    SysTick tick plus the counter's own reads); with a tiny reload value the same loop wraps
    the 24-bit counter hundreds of times and still measures the same."""
    brd = get_board(board)
    tgt = TARGETS[brd.target]
    rt = resource_dir("runtime_c")
    (tmp_path / "main.c").write_text(CAL_MAIN)
    ipt = brd.insns_per_tick
    cmd = ["arm-none-eabi-gcc", *tgt.cflags.split(), f"-I{rt}", "main.c", str(rt / "eerie_startup.c"),
           str(rt / "eerie_rt.c"), f"-DEERIE_INSNS_PER_TICK_NUM={ipt.numerator}u",
           f"-DEERIE_INSNS_PER_TICK_DEN={ipt.denominator}u",
           "-nostartfiles", "--specs=nano.specs", "--specs=nosys.specs", "-T", str(brd.linker_script),
           "-Wl,--gc-sections", "-o", "cal.elf", "-lm", *board_link_flags(brd)]
    if reload is not None:
        cmd.append(f"-DEERIE_SYSTICK_RELOAD={reload}u")
    subprocess.run(cmd, cwd=tmp_path, check=True, capture_output=True)
    from eerie_c.toolchain.qemu import run_qemu
    run = run_qemu(brd, tmp_path / "cal.elf", tmp_path, timeout=60)
    got = run.values["loop_instructions"]
    tick = float(ipt)
    # Each wrap costs the interrupt handler's few instructions (entry, increment, return).
    wraps = 0 if reload is None else 2_000_000 / tick / (reload + 1)
    assert 2_000_000 - tick <= got <= 2_000_000 + 2 * tick + 40 + 20 * wraps, got
    assert 0 < run.values["stack_high_water_bytes"] < 1024


# ---- budgets ------------------------------------------------------------------------------

def _tiny_board(tmp_path: Path, base: str = "mps2-an386", **sizes) -> Path:
    """A copy of `base` with smaller memories (and its linker script beside it)."""
    src = get_board(base)
    d = json.loads(src.source.read_text())
    d["name"] = f"tiny-{base}"
    for region, size in sizes.items():
        d[region]["size"] = size
    p = tmp_path / f"tiny-{base}.json"
    p.write_text(json.dumps(d))
    shutil.copy(src.linker_script, tmp_path / src.linker_script.name)
    return p


@pytest.mark.parametrize("base", ["mps2-an386", "riscv-virt"])
@pytest.mark.parametrize("region,size,word", [("flash", 64 * 1024, "flash"), ("ram", 1024, "RAM")])
def test_model_too_large_fails_at_compile_time(models_dir, tmp_path, capsys, region, size, word, base):
    require_board_tools(base)
    board = _tiny_board(tmp_path, base, **{region: size})
    out = tmp_path / "out"
    rc = cli_main([str(models_dir / "ad01_int8.tflite"), "--board", str(board), "-o", str(out)])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert len(err.splitlines()) == 1
    # "...: flash needs 287384 bytes (...) but the board has 65536, 221848 bytes too many"
    assert f"{word} needs" in err and "bytes too many" in err and f"tiny-{base}" in err, err
    need = int(err.split(" needs ")[1].split()[0])
    over = int(err.split(", ")[-1].split()[0])
    assert need - size == over > 0
    assert not out.exists()


def test_model_too_large_for_itcm_and_qspi(board_tools, models_dir, tmp_path, capsys):
    """ad01_fp32 (1 MiB of weights) fits the AN547 only because its constants go to QSPI flash:
    with that region shrunk to 512 KiB the compile fails on the constants."""
    src = get_board("mps3-an547")
    d = json.loads(src.source.read_text())
    d["rodata"]["size"] = 512 * 1024
    (tmp_path / "small547.json").write_text(json.dumps(d))
    shutil.copy(src.linker_script, tmp_path / src.linker_script.name)
    rc = cli_main([str(models_dir / "ad01_fp32.tflite"), "--board", str(tmp_path / "small547.json"),
                   "-o", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and "rodata flash needs" in err and "bytes too many" in err, err


def test_target_must_run_on_the_board(board_tools, models_dir, tmp_path, capsys):
    rc = cli_main([str(models_dir / "ad01_int8.tflite"), "--board", "mps2-an385", "--target", "cortex-m7",
                   "-o", str(tmp_path / "o")])
    assert rc == 2 and "does not run on board mps2-an385" in capsys.readouterr().err
    # The portable target runs anywhere ARMv7-M does; ARMv6-M code runs on every core.
    x = random_inputs([1, 640], "int8", 2)
    ref = tflm_run(models_dir / "ad01_int8.tflite", [x])[0]
    for board, target in (("mps2-an500", "cortex-m"), ("mps2-an385", "cortex-m0")):
        got, rep = run_model(models_dir / "ad01_int8.tflite", [x], board=board, target=target)
        assert rep["target"] == target and rep["board"] == board
        np.testing.assert_array_equal(got[0], ref)


# ---- firmware projects and the CLI ------------------------------------------------------------

@pytest.mark.parametrize("board,flag", [("mps2-an386", "-mcpu=cortex-m4"), ("riscv-virt", "-march=rv32imafc")])
def test_firmware_project_make_and_make_run(models_dir, tmp_path, board, flag):
    require_board_tools(board)
    out = tmp_path / "fw"
    assert cli_main([str(models_dir / "ad01_int8.tflite"), "--board", board, "-o", str(out)]) == 0
    for f in ("ad01_int8.c", "ad01_int8.h", "ad01_int8.mk", "main.c", "Makefile", f"{board}.ld",
              "runtime/eerie_startup.c", "runtime/eerie_rt.c", "runtime/eerie_rt.h", "report.json"):
        assert (out / f).is_file(), f
    assert "include ad01_int8.mk" in (out / "Makefile").read_text()
    assert flag in (out / "ad01_int8.mk").read_text()
    subprocess.run(["make", "-C", str(out)], check=True, capture_output=True)
    p = subprocess.run(["make", "-C", str(out), "run"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "eerie: inferences 1" in p.stdout + p.stderr
    assert (out / "outputs.bin").stat().st_size == 640


@pytest.mark.parametrize("board", ["mps2-an505", "riscv-virt"])
def test_cli_run_on_board_writes_outputs_and_report(models_dir, tmp_path, capsys, board):
    require_board_tools(board)
    x = random_inputs([1, 640], "int8", 5, seed=3)
    np.save(tmp_path / "x.npy", x)
    rc = cli_main(["run", str(models_dir / "ad01_int8.tflite"), "--board", board,
                   "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy"),
                   "-o", str(tmp_path / "fw")])
    out = capsys.readouterr().out
    assert rc == 0
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), tflm_run(models_dir / "ad01_int8.tflite", [x])[0])
    rep = json.loads((tmp_path / "fw" / "report.json").read_text())
    printed = json.loads(out.strip().splitlines()[-1])
    for key in ("instructions", "flash_bytes", "ram_static_bytes", "stack_high_water_bytes"):
        assert printed[key] == rep[key] and rep[key] > 0
    assert (tmp_path / "fw" / "ad01_int8.elf").is_file()


HAND_MAKEFILE = """\
# A firmware of our own that takes the model in through its fragment.
include ../model/ad01_int8.mk
CC = {cc}
RT = {rt}
CFLAGS += $(AD01_INT8_CFLAGS) $(AD01_INT8_INCLUDES) -I$(RT)
SRCS = app.c $(RT)/{startup} $(RT)/{rt_c} $(AD01_INT8_SRCS)

app.elf: $(SRCS)
\t$(CC) $(CFLAGS) $(SRCS) -nostartfiles {specs}-T {ld} -o $@ -lm
"""
# per architecture: compiler, runtime sources, libc link specs (RISC-V's picolibc specs come
# with the fragment's CFLAGS), the flag the fragment must bring
HAND = {"mps2-an386": ("cortex-m4", "arm-none-eabi-gcc", "eerie_startup.c", "eerie_rt.c",
                       "--specs=nano.specs --specs=nosys.specs ", "-mcpu=cortex-m4"),
        "riscv-virt": ("riscv32imafc", "riscv64-unknown-elf-gcc", "eerie_startup_riscv.c", "eerie_rt_riscv.c",
                       "", "-march=rv32imafc")}

HAND_APP = r"""
#include "eerie_rt.h"
#include "ad01_int8.h"
static int8_t in[AD01_INT8_INPUT0_ELEMENTS], out[AD01_INT8_OUTPUT0_ELEMENTS];
int main(void)
{
    int f = eerie_sh_open("x.bin", EERIE_SH_MODE_RB);
    if (f < 0 || eerie_sh_read(f, in, sizeof in) != sizeof in) {
        return 1;
    }
    ad01_int8_invoke(in, out);
    f = eerie_sh_open("y.bin", EERIE_SH_MODE_WB);
    return eerie_sh_write(f, out, sizeof out) == sizeof out ? 0 : 1;
}
"""


@pytest.mark.parametrize("board", sorted(HAND))
def test_model_fragment_works_from_a_handwritten_makefile(models_dir, tmp_path, board):
    require_board_tools(board)
    target, cc, startup, rt_c, specs, flag = HAND[board]
    model = models_dir / "ad01_int8.tflite"
    compile_model(model, tmp_path / "model", target=target)
    app = tmp_path / "app"
    app.mkdir()
    brd = get_board(board)
    (app / "Makefile").write_text(HAND_MAKEFILE.format(cc=cc, rt=resource_dir("runtime_c"), startup=startup,
                                                       rt_c=rt_c, specs=specs, ld=brd.linker_script))
    (app / "app.c").write_text(HAND_APP)
    p = subprocess.run(["make"], cwd=app, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert flag in p.stdout     # the fragment's flags reached the compiler
    x = random_inputs([1, 640], "int8", 1, seed=11)
    (app / "x.bin").write_bytes(x[0].tobytes())
    from eerie_c.toolchain.qemu import run_qemu
    run_qemu(brd, app / "app.elf", app, timeout=60)
    y = np.frombuffer((app / "y.bin").read_bytes(), np.int8).reshape(1, 640)
    np.testing.assert_array_equal(y, tflm_run(model, [x])[0][0])


@pytest.mark.parametrize("target", [t for t in TARGETS if TARGETS[t].embedded])
def test_every_embedded_target_compiles_the_model(models_dir, tmp_path, target):
    """Every embedded target's flags compile generated C cleanly (-Werror), M0 and the RISC-V
    ones included (their flags: test_riscv.py's table)."""
    tgt = TARGETS[target]
    require_board_tools("riscv-virt" if tgt.family == "riscv" else "mps2-an386")
    compile_model(models_dir / "ad01_fp32.tflite", tmp_path, target=target)
    mk = (tmp_path / "ad01_fp32.mk").read_text()
    flags = mk.split("AD01_FP32_CFLAGS := ")[1].splitlines()[0]
    if tgt.family == "arm":
        # The exact -m flags come from the table in test_target_flags.py, not from TARGETS itself.
        assert m_flags(flags) == expected_m_flags(target)
    else:
        assert tgt.arch_flags in flags
    subprocess.run([tgt.cc, *flags.split(), "-c", "ad01_fp32.c", "-o", "m.o"],
                   cwd=tmp_path, check=True, capture_output=True)


def test_example_script_runs_the_bundled_model_on_a_board(board_tools, tmp_path):
    """The README's main job (after set-up): examples/run_on_board.sh compiles the shipped
    example model for mps2-an386, runs it in QEMU and prints outputs and measurements."""
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "ex"
    p = subprocess.run(["bash", str(root / "examples" / "run_on_board.sh")], cwd=tmp_path,
                       env={**os.environ, "OUT": str(out)},
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    measured = json.loads(next(ln for ln in p.stdout.splitlines() if ln.startswith("{")))
    assert measured["board"] == "mps2-an386" and measured["instructions"] > 0
    assert measured["stack_high_water_bytes"] > 0
    x, y = np.load(out / "x.npy"), np.load(out / "y.npy")
    np.testing.assert_array_equal(y, tflm_run(root / "examples" / "tiny_conv.tflite", [x])[0])
