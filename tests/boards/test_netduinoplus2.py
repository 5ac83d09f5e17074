"""netduinoplus2 (ST STM32F405RG): the firmware has no semihosting, its inputs, outputs and
report lines travel as frames on USART1 (runtime_c/eerie_uart.h), and its arena and stack sit
in the core-coupled RAM (CCM) when they fit. Here: the generated project builds with make and
with CMake into images that behave alike in QEMU (bit-exact with TFLM, the same instruction
counts), `make run` works without eerie-c, the default image really uses CCM and contains no
semihosting call, the serial-port code path a physical board uses works (through a QEMU pty),
and the host side fails with clear errors. (Every shared-model check: tests/boards/test_boards.py.)

QEMU models the STM32F405's CCM from 8.0 on; with an older QEMU (Debian 12 has 7.2) the images
run here are linked with CCM=0, arena and stack in SRAM. EERIE_QEMU=/path/to/qemu-system-arm
runs these tests (and eerie-c) on another QEMU build."""
from __future__ import annotations

import math
import os
import re
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import random_inputs, tflm_run
from eerie_c.cli import main as cli_main
from eerie_c.toolchain import serial_link
from eerie_c.errors import EerieError
from eerie_c.toolchain.boards import budget, check_budget, get_board, placement
from eerie_c.toolchain.firmware import pack_records, unpack_records
from eerie_c.toolchain.qemu import QEMU, parse_output, run_qemu

BOARD = "netduinoplus2"
CCM_END = 0x10010000


@pytest.fixture(scope="module")
def qemu_ccm(board_tools) -> bool:
    return serial_link.qemu_version(QEMU) >= (8, 0)


@pytest.fixture(scope="module")
def project(board_tools, models_dir, tmp_path_factory):
    """ad01_int8's firmware project for the board, compiled once for the tests here."""
    out = tmp_path_factory.mktemp("np2") / "fw"
    assert cli_main([str(models_dir / "ad01_int8.tflite"), "--board", BOARD, "-o", str(out), "-q"]) == 0
    return out


def _run(args, cwd, timeout=300):
    p = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, " ".join(map(str, args)) + "\n" + p.stdout + p.stderr
    return p.stdout


def _symbols(elf) -> dict[str, int]:
    out = subprocess.run(["arm-none-eabi-nm", str(elf)], capture_output=True, text=True, check=True).stdout
    return {m.group(3): int(m.group(1), 16) for m in re.finditer(r"^([0-9a-f]+) (\w) (\S+)$", out, re.M)}


def test_project_make_cmake_and_make_run(qemu_ccm, models_dir, project):
    model, out = models_dir / "ad01_int8.tflite", project
    for f in ("main.c", "Makefile", "CMakeLists.txt", "netduinoplus2.ld", "runtime/eerie_serial.py",
              "runtime/eerie_uart.c", "runtime/eerie_uart.h", "runtime/eerie_stm32f4.c"):
        assert (out / f).is_file(), f

    # The image for the board: arena and stack in CCM, no semihosting (an unanswered
    # "bkpt 0xAB" would stop a real part), the vector table at the start of flash.
    _run(["make", "-B", "ad01_int8.elf", "bin"], out)
    sym = _symbols(out / "ad01_int8.elf")
    assert 0x10000000 <= sym["ad01_int8_arena"] < CCM_END and sym["__stack_top__"] == CCM_END
    assert not any(s.startswith("eerie_sh_") for s in sym)
    dis = _run(["arm-none-eabi-objdump", "-d", "ad01_int8.elf"], out)
    assert "bkpt" not in dis
    initial_sp, reset = struct.unpack("<II", (out / "ad01_int8.bin").read_bytes()[:8])
    assert initial_sp == CCM_END and reset == sym["Reset_Handler"] | 1

    # `make run` drives QEMU through runtime/eerie_serial.py, as a user would without eerie-c;
    # on a QEMU without CCM it runs the SRAM-linked image.
    x = random_inputs([1, 640], "int8", 2, seed=5)
    (out / "inputs.bin").write_bytes(pack_records([x]))
    log = _run(["make", "-B", f"QEMU={QEMU}", "run"], out)
    assert "eerie: inferences 2" in log
    assert ("ad01_int8-sram.elf" in log) != qemu_ccm
    by_make, _ = parse_output(log)
    specs = [{"dtype": "int8", "shape": [1, 640], "bytes": 640}]
    y_make = unpack_records((out / "outputs.bin").read_bytes(), specs, 2, "make run")[0]
    (out / "outputs.bin").unlink()

    # CMake builds the same image.
    _run(["cmake", "-S", ".", "-B", "build", "-DCMAKE_TOOLCHAIN_FILE=runtime/arm-none-eabi.cmake",
          *([] if qemu_ccm else ["-DCCM=OFF"])], out)
    _run(["cmake", "--build", "build"], out)
    by_cmake = run_qemu(get_board(BOARD), out / "build" / "ad01_int8.elf", out, timeout=120)
    y_cmake = unpack_records((out / "outputs.bin").read_bytes(), specs, 2, "CMake's ELF")[0]

    ref = tflm_run(model, [x])[0]
    np.testing.assert_array_equal(y_make, ref)
    np.testing.assert_array_equal(y_cmake, ref)
    # The same counts, to SysTick's resolution: on this board a tick is 125/21 instructions,
    # and where the count starts within a tick depends on how long `make run`'s serial wait
    # took, so a reading may differ by one tick (ad01's 341,755 vs 341,761).
    tick = math.ceil(get_board(BOARD).insns_per_tick)
    assert len(by_make) == len(by_cmake.instructions) == 2
    assert all(abs(a - b) <= tick for a, b in zip(by_cmake.instructions, by_make)), \
        (by_cmake.instructions, by_make)


def test_serial_port_path_through_a_pty(qemu_ccm, models_dir, project):
    """What `make run-board PORT=...` does with a physical board, against QEMU's UART on a
    pseudo-terminal: raw termios set-up, and the board's first READY is lost (nobody had the
    port open when it booted), so the host must ask again (QUERY) before sending records."""
    out = project
    _run(["make", "-B", *([] if qemu_ccm else ["CCM=0"]), "ad01_int8.elf"], out)
    x = random_inputs([1, 640], "int8", 2, seed=9)
    cmd = [QEMU, "-M", BOARD,
           "-nographic", "-monitor", "none", "-icount", "shift=0", "-chardev", "pty,id=uart0",
           "-serial", "chardev:uart0", "-kernel", "ad01_int8.elf"]
    p = subprocess.Popen(cmd, cwd=out, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        dev = re.search(r"(/dev/pts/\d+)", p.stdout.readline()).group(1)
        time.sleep(0.3)   # the board boots and sends its first READY into the void
        fd = serial_link.open_port(dev, 115200)
        try:
            res = serial_link.exchange(serial_link.Link(fd, fd, time.monotonic() + 60),
                                       pack_records([x]), probe=True)
        finally:
            os.close(fd)
    finally:
        p.kill()
        p.wait()
    assert res.status == 0 and "eerie: inferences 2" in res.text
    got = np.stack([np.frombuffer(o, np.int8).reshape(1, 640) for o in res.outputs])
    np.testing.assert_array_equal(got, tflm_run(models_dir / "ad01_int8.tflite", [x])[0])


FAULT_MAIN = r"""
#include <stdint.h>
#include "eerie_rt.h"
int main(void)
{
    eerie_puts("eerie: reading unmapped memory\n");
    return (int)*(volatile uint32_t *)0x30000000u;   /* nothing there on this part */
}
"""


def test_fault_is_reported_over_the_uart(board_tools, tmp_path):
    """A fault prints its line and ends the run through the UART (DONE with status 3): the
    runner calls it the firmware's fault, as on the semihosting boards."""
    from eerie_c.errors import CompilerBug
    from eerie_c.resources import resource_dir
    from eerie_c.toolchain.targets import TARGETS
    from test_boards import board_link_flags
    brd, rt = get_board(BOARD), resource_dir("runtime_c")
    (tmp_path / "main.c").write_text(FAULT_MAIN)
    _run(["arm-none-eabi-gcc", *TARGETS[brd.target].cflags.split(), f"-I{rt}", "main.c",
          str(rt / "eerie_startup.c"), str(rt / "eerie_rt.c"), "-nostartfiles", "--specs=nano.specs",
          "--specs=nosys.specs", "-T", str(brd.linker_script), "-o", "fault.elf", *board_link_flags(brd)],
         tmp_path)
    with pytest.raises(CompilerBug, match=r"faulted on netduinoplus2 \(QEMU exit 3\).*unmapped.*eerie: fault"):
        run_qemu(brd, tmp_path / "fault.elf", tmp_path, timeout=60)


def _fake_board(*frames: bytes, then: str = "time.sleep(30)") -> list[str]:
    """A stand-in for QEMU that writes these bytes on its 'UART' (stdout)."""
    data = b"".join(frames)
    return [sys.executable, "-c", f"import sys, time; sys.stdout.buffer.write({data!r}); "
                                  f"sys.stdout.flush(); {then}"]


def test_host_side_errors_are_clear():
    run = serial_link.run_qemu
    with pytest.raises(serial_link.LinkError, match=r"QEMU exited \(status 1\).*CCM.*Lockup"):
        run(["sh", "-c", "echo 'qemu: fatal: Lockup: cannot escalate' >&2; exit 1"], b"", 10)
    with pytest.raises(serial_link.LinkError, match="timed out waiting for the board"):
        run(["sleep", "30"], b"", 0.5)
    garbled = bytearray(serial_link.frame(serial_link.TEXT, b"eerie: hello\n"))
    garbled[-1] ^= 0xFF
    with pytest.raises(serial_link.LinkError, match="failed its checksum"):
        run(_fake_board(bytes(garbled)), b"", 10)
    ready = serial_link.frame(serial_link.READY, struct.pack("<III", 0, 7, 1))
    with pytest.raises(serial_link.LinkError, match="not a whole number of the firmware's 7-byte records"):
        run(_fake_board(ready), b"0123456789", 10)
    ready = serial_link.frame(serial_link.READY, struct.pack("<III", 0, 1 << 20, 1))
    with pytest.raises(serial_link.LinkError, match="closed before the board said it was done"):
        run(_fake_board(ready, then="import os; os.close(0); time.sleep(30)"), bytes(1 << 20), 10)
    with pytest.raises(serial_link.LinkError, match="timed out sending to the board"):
        run(_fake_board(ready), bytes(1 << 20), 1)   # it never reads: the deadline still holds
    # Noise before a frame is skipped; DONE ends the run (and the stand-in is killed).
    done = serial_link.frame(serial_link.DONE, struct.pack("<i", 0))
    res = run(_fake_board(b"\x00garbage\xee", serial_link.frame(serial_link.TEXT, b"hi\n"), done), b"", 10)
    assert (res.status, res.text) == (0, "hi\n")


def test_arena_and_stack_placement():
    """Both in CCM when they fit; else the arena alone (the larger); else the stack alone.
    The budget counts SRAM and CCM each against its own size."""
    brd = get_board(BOARD)
    assert brd.ccm.origin == 0x10000000 and brd.ccm.size == 64 << 10
    assert brd.ram.size == 128 << 10 and brd.flash.origin == 0x08000000
    small, mid, big = 46080, 60000, 70000
    assert placement(brd, small) == {"arena": "ccm", "stack": "ccm"}
    assert placement(brd, mid) == {"arena": "ccm", "stack": "ram"}
    assert placement(brd, big) == {"arena": "ram", "stack": "ccm"}
    report = {"constant_bytes": 1000, "code_bytes": 1000, "arena_bytes": big, "stack_bound_bytes": 300,
              "inputs": [{"bytes": 100}], "outputs": [{"bytes": 10}]}
    b = budget(brd, report)
    assert b["ccm_bytes"] == brd.stack_bytes and b["sram_bytes"] >= big
    assert b["board_ram_bytes"] == (128 + 64) << 10
    # SRAM is budgeted on its own: an arena of 131,000 bytes fits neither region.
    with pytest.raises(EerieError, match=r"RAM needs \d+ bytes \(arena 131000 \+ static data .*but the "
                                         r"board has 131072"):
        check_budget(brd, "m", {**report, "arena_bytes": 131000})


def test_dynamic_sizes_are_refused_in_one_line():
    """The UART harness passes fixed-size records only: a program with dynamic sizes (torch
    Dim) on this board is a clear error, not a semihosting harness that cannot link."""
    from types import SimpleNamespace
    from eerie_c.toolchain.firmware import firmware_files
    res = SimpleNamespace(graph=SimpleNamespace(dynamic_dims=["n"]), report={"arena_bytes": 0})
    with pytest.raises(EerieError, match="does not yet pass dynamic sizes: use a semihosting board"):
        firmware_files(res, get_board(BOARD))
