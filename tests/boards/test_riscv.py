"""32-bit RISC-V: the targets' flags and multilibs, the riscv-virt board in qemu-system-riscv32
(int8 models bit-exact with TFLM, a float model close to it, hard and soft float), the proven
stack bounds against the painted stack, the minstret instruction counter, and the verifier's
RISC-V pieces (library stack table from machine code, inline-assembly words).

CI time: two int8 models and one float model (hard + soft float) share one set of inputs each;
bench/riscv_bench.py runs all four int8 models and prints instructions per MAC. Set
EERIE_RISCV_ALL_MODELS=1 to run all four int8 models here too."""
from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

from conftest import MODELS, assert_invoke_stack_within_bound, input_specs, random_inputs, require_tools, tflm_run
from eerie_c.api import compile_model, run_model
from eerie_c.cli import main as cli_main
from eerie_c.resources import resource_dir
from eerie_c.toolchain.boards import get_board
from eerie_c.toolchain.targets import TARGETS
from eerie_c.verify.asm_check import scan_asm
from eerie_c.verify.lib_stack_riscv import NAMES, SAVE_RESTORE_BYTES, depths, measure, parse
from eerie_c.verify.lib_stack_table_riscv import MULTILIB_STACK

RISCV_TOOLS = ("riscv64-unknown-elf-gcc", "riscv64-unknown-elf-size", "riscv64-unknown-elf-objdump",
               "make", "qemu-system-riscv32")
BOARD = "riscv-virt"
N_INPUTS = 3
INT8_ALL = ["kws_ref_model", "vww_96_int8", "pretrainedResnet_quant", "ad01_int8"]
INT8_MODELS = INT8_ALL if os.environ.get("EERIE_RISCV_ALL_MODELS") else ["kws_ref_model", "ad01_int8"]

# target -> (-march, -mabi, the multilib gcc links: Debian's toolchain has no rv32imc one, so
# rv32imc code links rv32im's libraries, which run on the core unchanged).
EXPECTED = {
    "riscv": ("rv32imc", "ilp32", "rv32im/ilp32"),
    "riscv32imc": ("rv32imc", "ilp32", "rv32im/ilp32"),
    "riscv32imac": ("rv32imac", "ilp32", "rv32imac/ilp32"),
    "riscv32imafc": ("rv32imafc", "ilp32f", "rv32imafc/ilp32f"),
}


@pytest.fixture(scope="session")
def riscv_tools():
    """Fails (never skips) without the RISC-V toolchain and QEMU (.ci/setup installs them)."""
    missing = [t for t in RISCV_TOOLS if shutil.which(t) is None]
    if missing:
        pytest.fail(f"this test needs {', '.join(missing)} on PATH: apt-get install "
                    f"gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf qemu-system-misc make "
                    f"(.ci/setup does this)", pytrace=False)


def test_riscv_targets_are_exactly_the_table(riscv_tools):
    assert set(EXPECTED) == {t for t, tgt in TARGETS.items() if tgt.family == "riscv"}
    for name, (march, mabi, lib) in EXPECTED.items():
        tgt = TARGETS[name]
        flags = tgt.cflags.split()
        assert f"-march={march}" in flags and f"-mabi={mabi}" in flags and "-specs=picolibc.specs" in flags
        assert tgt.has_fpu == (mabi == "ilp32f") and tgt.cross == "riscv64-unknown-elf-"
        p = subprocess.run([tgt.cc, f"-march={march}", f"-mabi={mabi}", "-print-multi-directory"],
                           capture_output=True, text=True, check=True)
        assert p.stdout.strip() == lib


def test_board_is_listed_and_takes_only_riscv_targets(riscv_tools, capsys, tmp_path):
    assert cli_main(["boards"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(BOARD + " "))
    assert "rv32imafc" in line and "virt" in line and "MiB" in line
    brd = get_board(BOARD)
    assert brd.family == "riscv" and brd.qemu_system == "qemu-system-riscv32"
    assert all(brd.compatible(t) for t in EXPECTED) and not brd.compatible("cortex-m4")
    rc = cli_main([str(MODELS / "ad01_int8.tflite"), "--board", BOARD, "--target", "cortex-m4",
                   "-o", str(tmp_path / "o")])
    assert rc == 2 and f"does not run on board {BOARD}" in capsys.readouterr().err


@functools.lru_cache(maxsize=None)
def _inputs_and_reference(model: str):
    path = MODELS / f"{model}.tflite"
    spec = input_specs(path)
    xs = [random_inputs(s["shape"], s["dtype"], N_INPUTS, seed=7 + k) for k, s in enumerate(spec)]
    return path, xs, tflm_run(path, xs)


def _check_measurements(saved: dict, target: str):
    assert saved["board"] == BOARD and saved["target"] == target
    assert len(saved["instructions_per_inference"]) == N_INPUTS
    # Portable C kernels on RV32 (no SIMD): at least one instruction per MAC.
    assert saved["instructions"] >= saved["macs"]
    assert saved["flash_bytes"] > saved["constant_bytes"] and saved["ram_static_bytes"] >= saved["arena_bytes"]
    # The compile-time estimate (estimate.py's rv32 fit) keeps report.md's 2x promise.
    assert 0.5 <= saved["est_instructions"] / saved["instructions"] <= 2.0, saved["est_instructions"]
    # NAME_invoke's proven bound covers its measured stack and is within 2x of it; the whole
    # firmware's bound (start-up, harness, model, plus the trap handler) covers the high water.
    assert_invoke_stack_within_bound(saved)
    # No interrupt is ever enabled on these boards and the RISC-V runtime repaints every word
    # below the caller's sp (a naked function): the bound alone covers the measurement.
    assert saved["invoke_stack_bytes"] <= saved["stack_bound_bytes"]
    hw, fw = saved["stack_high_water_bytes"], saved["firmware_stack"]
    assert 0 < hw <= saved["firmware_stack_bound_bytes"] == fw["thread_bytes"] + fw["handler_bytes"]
    assert fw["exception_frame_bytes"] == 0 and fw["handler_path"][0] == "eerie_trap_handler"
    assert fw["thread_bytes"] <= 2 * hw, (hw, fw)
    assert fw["path"][:2] == ["Reset_Handler", "main"]


@pytest.mark.parametrize("model", INT8_MODELS)
def test_int8_model_on_riscv_virt_is_bit_exact_with_tflm(riscv_tools, models_dir, tmp_path, model):
    path, xs, ref = _inputs_and_reference(model)
    got, report = run_model(path, xs, board=BOARD, out_dir=tmp_path / "fw")
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(g, r)
    saved = json.loads((tmp_path / "fw" / "report.json").read_text())
    assert saved["instructions"] == report["instructions"]
    _check_measurements(saved, "riscv32imafc")
    # The C proof ran under the RISC-V compiler's own macros, and the portable configuration.
    src = next(c for c in saved["verified"] if c["check"] == "c_source")
    assert "riscv64-unknown-elf-gcc" in json.dumps(src) and "__riscv" in json.dumps(src)


@pytest.mark.parametrize("target", ["riscv32imafc", "riscv32imac"])
def test_float_model_close_to_tflm_hard_and_soft_float(riscv_tools, models_dir, tmp_path, target):
    """ad01_fp32 with the FPU and in soft float; soft float calls libgcc (__mulsf3, __addsf3),
    whose stack depth (measured from its machine code) is part of the proven bound."""
    path, xs, ref = _inputs_and_reference("ad01_fp32")
    got, report = run_model(path, xs, board=BOARD, target=target, out_dir=tmp_path / "fw")
    for g, r in zip(got, ref):
        span = max(float(np.abs(r).max()), 1e-6)
        np.testing.assert_allclose(g, r, rtol=0, atol=1e-5 * span)
    saved = json.loads((tmp_path / "fw" / "report.json").read_text())
    _check_measurements(saved, target)
    ext = next(c for c in saved["verified"] if c["check"] == "stack_bound")["externals"]
    if target == "riscv32imac":
        assert {"__addsf3", "__mulsf3"} <= set(ext), ext
        assert ext["__mulsf3"] == MULTILIB_STACK["rv32imac/ilp32"]["__mulsf3"] > 0
    else:
        assert not any(n.endswith("sf3") for n in ext), ext


def test_sifive_e_runs_a_small_model_and_rejects_a_big_one(riscv_tools, models_dir, tmp_path, capsys):
    """The 16 KiB-DTIM board: ad01_int8 (768-byte arena, weights in XIP flash) runs bit-exact,
    built for the portable `riscv` target (RV32IMC code linked with the rv32im libraries);
    kws_ref_model (16,000-byte arena) fails at compile time on RAM."""
    path, xs, ref = _inputs_and_reference("ad01_int8")
    got, report = run_model(path, xs, board="sifive_e", target="riscv", out_dir=tmp_path / "fw")
    np.testing.assert_array_equal(got[0], ref[0])
    assert report["board"] == "sifive_e" and report["target"] == "riscv"
    assert get_board("sifive_e").target == "riscv32imac"
    assert report["stack_high_water_bytes"] <= report["firmware_stack_bound_bytes"] <= 4096
    assert report["ram_static_bytes"] + 4096 <= 16384
    rc = cli_main([str(MODELS / "kws_ref_model.tflite"), "--board", "sifive_e", "-o", str(tmp_path / "k")])
    err = capsys.readouterr().err
    assert rc == 2 and "RAM needs" in err and "bytes too many" in err, err


def test_cmake_builds_the_same_riscv_firmware(riscv_tools, models_dir, tmp_path):
    """The project's CMakeLists.txt with the shipped riscv64-unknown-elf toolchain file (picolibc
    specs on the link line) builds an image that runs in QEMU like the Makefile's."""
    require_tools("cmake")
    fw = tmp_path / "fw"
    compile_model(MODELS / "ad01_int8.tflite", fw, board=BOARD)
    assert "riscv64-unknown-elf.cmake" in (fw / "CMakeLists.txt").read_text()
    for cmd in (["cmake", "-S", ".", "-B", "build"], ["cmake", "--build", "build"],
                ["cmake", "--build", "build", "-t", "run"]):
        p = subprocess.run(cmd, cwd=fw, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
    assert "eerie: inferences 1" in p.stdout + p.stderr


CAL_MAIN = r"""
#include <stdint.h>
#include "eerie_rt.h"
int main(void)
{
    uint32_t n = 1000000u;
    uint64_t t0 = eerie_counter_ticks();
    /* exactly 2,000,000 instructions: addi + bnez per iteration */
    __asm__ __volatile__("1: addi %0, %0, -1\n\tbnez %0, 1b" : "+r"(n));
    eerie_put_kv("loop_instructions", eerie_ticks_to_instructions(eerie_counter_ticks() - t0));
    eerie_put_kv("stack_high_water_bytes", eerie_stack_high_water());
    return 0;
}
"""


def test_minstret_counts_instructions(riscv_tools, tmp_path):
    """A loop of exactly 2,000,000 instructions measures as such (plus the counter's own few
    reads) under -icount shift=0, the same on every run."""
    brd = get_board(BOARD)
    rt = resource_dir("runtime_c")
    (tmp_path / "main.c").write_text(CAL_MAIN)
    cmd = ["riscv64-unknown-elf-gcc", *TARGETS[brd.target].cflags.split(), f"-I{rt}", "main.c",
           str(rt / "eerie_startup_riscv.c"), str(rt / "eerie_rt_riscv.c"), "-nostartfiles",
           "-T", str(brd.linker_script), "-Wl,--gc-sections", "-o", "cal.elf"]
    subprocess.run(cmd, cwd=tmp_path, check=True, capture_output=True)
    from eerie_c.toolchain.qemu import run_qemu
    got = [run_qemu(brd, tmp_path / "cal.elf", tmp_path, timeout=60).values for _ in range(2)]
    assert got[0] == got[1]
    assert 2_000_000 <= got[0]["loop_instructions"] <= 2_000_000 + 20, got
    assert 0 < got[0]["stack_high_water_bytes"] < 1024


# ---- verifier pieces -----------------------------------------------------------------------

DIS = """
80000000 <leaf>:
80000000:\t8082                \tret
80000010 <outer>:
80000010:\t7179                \tadd\tsp,sp,-48
80000012:\tc606                \tsw\tra,44(sp)
80000014:\t2081                \tjal\t80000040 <mid>
80000016:\tc119                \tbeqz\ta0,8000001c <outer+0xc>
80000018:\tb7e5                \tj\t80000000 <leaf>
8000001c:\t6145                \tadd\tsp,sp,48
8000001e:\t8082                \tret
80000040 <mid>:
80000040:\t2b92f2ef          \tjal\tt0,80000100 <__riscv_save_4>
80000044:\t1141                \tadd\tsp,sp,-16
80000046:\t00000097          \tauipc\tra,0x0
8000004a:\t000080e7          \tjalr\t-74(ra) # 80000000 <leaf>
8000004e:\t8782                \tjr\ta5
80000100 <__riscv_save_4>:
80000100:\t7139                \tadd\tsp,sp,-64
80000102:\t5301                \tli\tt1,-32
80000104:\t40610133          \tsub\tsp,sp,t1
80000108:\t8282                \tjr\tt0
80000120 <fp_restore>:
80000120:\t1141                \tadd\tsp,sp,-16
80000122:\t8122                \tmv\tsp,s0
80000130 <indirect>:
80000130:\t9782                \tjalr\ta5
"""


def test_riscv_disassembly_reader():
    f = parse(DIS)
    assert f["leaf"] == (0, set())
    # The millicode save area stays allocated after it returns: charged to the caller itself.
    assert f["mid"] == (SAVE_RESTORE_BYTES + 16, {"leaf"})
    assert f["outer"] == (48, {"mid", "leaf"})
    assert f["__riscv_save_4"] == (64, set())       # li t1,-32; sub sp,sp,t1 gives back, never takes
    assert f["fp_restore"] is None and f["indirect"] is None   # sp from a register; indirect call
    d = depths(f)
    assert d["outer"] == 48 + SAVE_RESTORE_BYTES + 16 and "indirect" not in d


def test_riscv_table_is_what_the_libraries_measure(riscv_tools):
    """The stored table against a fresh measurement of one multilib (same toolchain)."""
    fresh, _ = measure(("-march=rv32imac", "-mabi=ilp32"), NAMES)
    assert fresh == MULTILIB_STACK["rv32imac/ilp32"]
    assert {"__addsf3", "__mulsf3", "__divsf3", "__udivdi3", "memcpy", "expf"} <= set(fresh)


@pytest.mark.parametrize("template", ["addi sp, sp, -16", "mv %0, ra", "csrr %0, mstatus", "ecall",
                                      "bnez %0, 1f", "tail foo", "c.j 1f", "jalr %0"])
def test_riscv_assembly_words_are_rejected(template):
    text = f'void f(int x) {{ __asm__ volatile("{template}" : "+r"(x)); }}\n'
    _, stmts = scan_asm(text)
    assert stmts and stmts[0].error, template


def test_riscv_straight_line_assembly_is_accepted():
    _, stmts = scan_asm('void f(int x, int y) { __asm__("mul %0, %0, %1" : "+r"(x) : "r"(y)); }\n')
    assert stmts and stmts[0].error is None
