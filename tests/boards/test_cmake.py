"""CMake: a generated firmware project builds with `make` and with CMake (the shipped
arm-none-eabi or riscv64-unknown-elf toolchain file) into ELFs that behave the same in QEMU (outputs bit-exact with
TFLM, the same instruction counts), and NAME.cmake works from a CMakeLists.txt of our own:
include() it, target_link_libraries(app PRIVATE NAME), the CPU / float-ABI flags reach the
application through the library's INTERFACE options."""
from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

from conftest import random_inputs, require_board_tools, tflm_run
from eerie_c.api import compile_model
from eerie_c.cli import main as cli_main
from eerie_c.resources import resource_dir
from eerie_c.toolchain.boards import get_board
from eerie_c.toolchain.firmware import pack_records, unpack_records
from eerie_c.toolchain.qemu import run_qemu


@pytest.fixture(scope="module")
def cmake():
    if shutil.which("cmake") is None:   # .ci/setup installs it: fail, never skip
        pytest.fail("cmake is not installed (Debian: apt-get install cmake; .ci/setup does)")
    return "cmake"


def _run(args, cwd, env=None):
    p = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, " ".join(map(str, args)) + "\n" + p.stdout + p.stderr
    return p.stdout


# (board, its toolchain file, flags the CMake build must show)
CMAKE_BOARDS = [("mps2-an386", "arm-none-eabi.cmake", ("-mcpu=cortex-m4", "-mfloat-abi=hard")),
                ("riscv-virt", "riscv64-unknown-elf.cmake", ("-march=rv32imafc", "-mabi=ilp32f"))]
CMAKE_BOARDS_FLAGS = [(b, flags) for b, _, flags in CMAKE_BOARDS]


@pytest.mark.parametrize("board,toolchain,flags", CMAKE_BOARDS, ids=[b for b, _, _ in CMAKE_BOARDS])
def test_project_builds_with_make_and_cmake_alike(cmake, models_dir, tmp_path, board, toolchain, flags):
    require_board_tools(board)
    model = models_dir / "ad01_int8.tflite"
    out = tmp_path / "fw"
    assert cli_main([str(model), "--board", board, "-o", str(out), "-q"]) == 0
    for f in ("CMakeLists.txt", "ad01_int8.cmake", f"runtime/{toolchain}"):
        assert (out / f).is_file(), f
    x = random_inputs([1, 640], "int8", 3, seed=5)
    (out / "inputs.bin").write_bytes(pack_records([x]))
    brd = get_board(board)
    specs = [{"dtype": "int8", "shape": [1, 640], "bytes": 640}]

    _run(["make", "-B", "ad01_int8.elf"], out)
    by_make = run_qemu(brd, out / "ad01_int8.elf", out, timeout=120)
    y_make = unpack_records((out / "outputs.bin").read_bytes(), specs, 3, "make's ELF")[0]
    (out / "outputs.bin").unlink()

    _run([cmake, "-S", ".", "-B", "build", f"-DCMAKE_TOOLCHAIN_FILE=runtime/{toolchain}"], out)
    log = _run([cmake, "--build", "build", "--verbose"], out)
    assert all(f in log for f in flags), log[-2000:]
    by_cmake = run_qemu(brd, out / "build" / "ad01_int8.elf", out, timeout=120)
    y_cmake = unpack_records((out / "outputs.bin").read_bytes(), specs, 3, "CMake's ELF")[0]

    ref = tflm_run(model, [x])[0]
    np.testing.assert_array_equal(y_make, ref)
    np.testing.assert_array_equal(y_cmake, ref)
    assert by_cmake.instructions == by_make.instructions


HAND_CMAKE = """\
cmake_minimum_required(VERSION 3.13)
project(app C)
include(../model/ad01_int8.cmake)
add_executable(app.elf app.c {rt}/{startup} {rt}/{rt_c})
target_include_directories(app.elf PRIVATE {rt})
{compile_specs}target_link_options(app.elf PRIVATE -nostartfiles {specs} -T {ld})
target_link_libraries(app.elf PRIVATE ad01_int8)
"""


@pytest.mark.parametrize("board", ["mps2-an386", "riscv-virt"])
def test_model_fragment_works_from_a_handwritten_cmakelists(cmake, models_dir, tmp_path, board):
    from test_boards import HAND, HAND_APP
    from eerie_c.toolchain.arch import arch_of
    require_board_tools(board)
    target, _, startup, rt_c, _, _ = HAND[board]
    brd = get_board(board)
    arch = arch_of(brd)
    model = models_dir / "ad01_int8.tflite"
    compile_model(model, tmp_path / "model", target=target)
    app = tmp_path / "app"
    app.mkdir()
    rt = resource_dir("runtime_c")
    # RISC-V: the application's own sources need picolibc's headers (docs/integration.md)
    compile_specs = ("target_compile_options(app.elf PRIVATE -specs=picolibc.specs)\n"
                     if arch.family == "riscv" else "")
    (app / "CMakeLists.txt").write_text(HAND_CMAKE.format(
        rt=rt, startup=startup, rt_c=rt_c, compile_specs=compile_specs, specs=arch.cmake_link_specs,
        ld=brd.linker_script))
    (app / "app.c").write_text(HAND_APP)
    _run([cmake, "-S", ".", "-B", "build", f"-DCMAKE_TOOLCHAIN_FILE={rt / arch.cmake_toolchain}"], app)
    log = _run([cmake, "--build", "build", "--verbose"], app)
    # The application's own app.c got the model's core and ABI flags (INTERFACE options).
    app_line = next(ln for ln in log.splitlines() if "app.c" in ln and " -c " in ln)
    flags = dict(CMAKE_BOARDS_FLAGS)[board]
    assert all(f in app_line for f in flags), app_line
    x = random_inputs([1, 640], "int8", 1, seed=11)
    (app / "x.bin").write_bytes(x[0].tobytes())
    run_qemu(brd, app / "build" / "app.elf", app, timeout=60)
    y = np.frombuffer((app / "y.bin").read_bytes(), np.int8).reshape(1, 640)
    np.testing.assert_array_equal(y, tflm_run(model, [x])[0][0])


CUBE_CMAKE = """\
# The shape of an STM32CubeMX CMake project: the application's sources under Core/, its own
# toolchain file under cmake/, third-party code pulled in with include().
cmake_minimum_required(VERSION 3.22)
set(CMAKE_TOOLCHAIN_FILE ${{CMAKE_CURRENT_SOURCE_DIR}}/cmake/gcc-arm-none-eabi.cmake)
project(cube_app C)
include(Middlewares/eerie/ad01_int8.cmake)
add_executable(${{PROJECT_NAME}}.elf Core/Src/main.c {rt}/eerie_startup.c {rt}/eerie_rt.c)
target_include_directories(${{PROJECT_NAME}}.elf PRIVATE Core/Inc {rt})
target_link_options(${{PROJECT_NAME}}.elf PRIVATE -nostartfiles --specs=nano.specs --specs=nosys.specs -T {ld})
target_link_libraries(${{PROJECT_NAME}}.elf PRIVATE ad01_int8)
"""


def test_sources_only_drop_into_a_cube_style_cmake_project(board_tools, cmake, models_dir, tmp_path, capsys):
    from test_boards import HAND_APP
    model = models_dir / "ad01_int8.tflite"
    proj = tmp_path / "cube"
    drop = proj / "Middlewares" / "eerie"
    assert cli_main([str(model), "--target", "cortex-m4", "--sources-only", "-o", str(drop)]) == 0
    assert sorted(p.name for p in drop.iterdir()) == ["ad01_int8.c", "ad01_int8.cmake", "ad01_int8.h",
                                                      "ad01_int8.mk", "ad01_int8_README.md"]
    readme = (drop / "ad01_int8_README.md").read_text()
    assert "-mcpu=cortex-m4" in readme and "target_link_libraries(app PRIVATE ad01_int8)" in readme
    rt = resource_dir("runtime_c")
    brd = get_board("mps2-an386")
    (proj / "cmake").mkdir()
    shutil.copy(rt / "arm-none-eabi.cmake", proj / "cmake" / "gcc-arm-none-eabi.cmake")
    (proj / "Core" / "Src").mkdir(parents=True)
    (proj / "Core" / "Inc").mkdir(parents=True)
    (proj / "Core" / "Src" / "main.c").write_text(HAND_APP)
    (proj / "CMakeLists.txt").write_text(CUBE_CMAKE.format(rt=rt, ld=brd.linker_script))
    _run([cmake, "-S", ".", "-B", "build"], proj)
    _run([cmake, "--build", "build"], proj)
    x = random_inputs([1, 640], "int8", 1, seed=12)
    (proj / "x.bin").write_bytes(x[0].tobytes())
    run_qemu(brd, proj / "build" / "cube_app.elf", proj, timeout=60)
    y = np.frombuffer((proj / "y.bin").read_bytes(), np.int8).reshape(1, 640)
    np.testing.assert_array_equal(y, tflm_run(model, [x])[0][0])


# A Zephyr application's CMakeLists.txt, as docs/integration.md shows it: Zephyr's package,
# found before project(), sets the toolchain and makes `app`, a static library that its own
# kernel image links. The stand-in package below does just that (no Zephyr SDK here), so the
# application file is written exactly as in a real Zephyr tree.
ZEPHYR_APP_CMAKE = """\
cmake_minimum_required(VERSION 3.20.0)
find_package(Zephyr REQUIRED HINTS $ENV{{ZEPHYR_BASE}})
project(kws_app)
target_sources(app PRIVATE src/main.c)
include(${{CMAKE_CURRENT_SOURCE_DIR}}/eerie/ad01_int8.cmake)
target_link_libraries(app PRIVATE ad01_int8)
"""
ZEPHYR_STAND_IN = """\
# Stand-in for ZephyrConfig.cmake: the toolchain before project(), the board's CPU flags for
# everything (Zephyr's zephyr_interface), then `app` and the image that links it.
set(CMAKE_TOOLCHAIN_FILE {toolchain})
enable_language(C)
add_compile_options({cpu})
add_link_options({cpu})
add_library(app STATIC)
target_include_directories(app PRIVATE {rt})
add_executable(zephyr.elf {rt}/eerie_startup.c {rt}/eerie_rt.c)
target_include_directories(zephyr.elf PRIVATE {rt})
target_link_options(zephyr.elf PRIVATE -nostartfiles --specs=nano.specs --specs=nosys.specs -T {ld})
target_link_libraries(zephyr.elf PRIVATE app)
set(Zephyr_FOUND TRUE)
"""


def test_sources_only_drop_into_a_zephyr_style_application(board_tools, cmake, models_dir, tmp_path):
    from test_boards import HAND_APP
    model = models_dir / "ad01_int8.tflite"
    app = tmp_path / "app"
    assert cli_main([str(model), "--target", "cortex-m4", "--sources-only", "-o", str(app / "eerie")]) == 0
    rt = resource_dir("runtime_c")
    brd = get_board("mps2-an386")
    zephyr = tmp_path / "zephyr"
    (zephyr / "share" / "zephyr-package" / "cmake").mkdir(parents=True)
    (zephyr / "share" / "zephyr-package" / "cmake" / "ZephyrConfig.cmake").write_text(
        ZEPHYR_STAND_IN.format(toolchain=rt / "arm-none-eabi.cmake", rt=rt, ld=brd.linker_script,
                               cpu="-mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16"))
    (app / "src").mkdir(parents=True)
    (app / "src" / "main.c").write_text(HAND_APP)
    (app / "CMakeLists.txt").write_text(ZEPHYR_APP_CMAKE.format())
    env = {**os.environ, "ZEPHYR_BASE": str(zephyr / "share" / "zephyr-package" / "cmake")}
    _run([cmake, "-S", ".", "-B", "build"], app, env=env)
    _run([cmake, "--build", "build"], app, env=env)
    x = random_inputs([1, 640], "int8", 1, seed=13)
    (app / "x.bin").write_bytes(x[0].tobytes())
    run_qemu(brd, app / "build" / "zephyr.elf", app, timeout=60)
    y = np.frombuffer((app / "y.bin").read_bytes(), np.int8).reshape(1, 640)
    np.testing.assert_array_equal(y, tflm_run(model, [x])[0][0])


def test_sources_only_refuses_a_board(models_dir, tmp_path, capsys):
    rc = cli_main([str(models_dir / "ad01_int8.tflite"), "--board", "mps2-an386", "--sources-only",
                   "-o", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert rc != 0 and "--sources-only" in err and "Traceback" not in err
    assert not (tmp_path / "x").exists()
