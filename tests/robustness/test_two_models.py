"""Two models compiled with different --name values, each into its own directory (the report
files have fixed names: a second model in the same directory replaces the first's report.json,
report.md and memory.svg), link into one program without symbol clashes, and each still
computes exactly what TFLM computes: on the host, and as one Cortex-M firmware image run in
QEMU. Every external symbol of a model's object starts with NAME_."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conftest import random_inputs, require_board_tools, require_tools, tflm_run  # noqa: E402
from tflite_builder import ACT, ModelBuilder  # noqa: E402

from eerie_c.api import compile_model  # noqa: E402

STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-Wvla", "-pedantic"]
N = 3

HOST_MAIN = r"""
#include <stdio.h>
#include <stdint.h>
#include "ad/ad.h"
#include "tiny/tiny.h"

static int8_t ad_in[AD_INPUT0_ELEMENTS], ad_out[AD_OUTPUT0_ELEMENTS];
static int8_t tiny_in[TINY_INPUT0_ELEMENTS], tiny_out[TINY_OUTPUT0_ELEMENTS];

int main(void)
{
    FILE *a = fopen("ad_in.bin", "rb"), *t = fopen("tiny_in.bin", "rb");
    FILE *ao = fopen("ad_out.bin", "wb"), *to = fopen("tiny_out.bin", "wb");
    int i;
    if (!a || !t || !ao || !to) return 2;
    for (i = 0; i < %(n)d; ++i) {
        /* Interleave the two models: each keeps its own arena. */
        if (fread(ad_in, 1, sizeof ad_in, a) != sizeof ad_in) return 3;
        if (fread(tiny_in, 1, sizeof tiny_in, t) != sizeof tiny_in) return 3;
        if (tiny_invoke(tiny_in, tiny_out) != 0 || ad_invoke(ad_in, ad_out) != 0) return 4;
        fwrite(ad_out, 1, sizeof ad_out, ao);
        fwrite(tiny_out, 1, sizeof tiny_out, to);
    }
    fclose(a); fclose(t); fclose(ao); fclose(to);
    return 0;
}
""" % {"n": N}

FIRMWARE_MAIN = r"""
#include <stdint.h>
#include "eerie_rt.h"
#include "ad.h"
#include "tiny/tiny.h"

static int8_t ad_in[AD_INPUT0_ELEMENTS], ad_out[AD_OUTPUT0_ELEMENTS];
static int8_t tiny_in[TINY_INPUT0_ELEMENTS], tiny_out[TINY_OUTPUT0_ELEMENTS];

int main(void)
{
    int a = eerie_sh_open("ad_in.bin", EERIE_SH_MODE_RB), t = eerie_sh_open("tiny_in.bin", EERIE_SH_MODE_RB);
    int ao = eerie_sh_open("ad_out.bin", EERIE_SH_MODE_WB), to = eerie_sh_open("tiny_out.bin", EERIE_SH_MODE_WB);
    int i;
    if (a < 0 || t < 0 || ao < 0 || to < 0) return 2;
    for (i = 0; i < %(n)d; ++i) {
        if (eerie_sh_read(a, ad_in, sizeof ad_in) != sizeof ad_in) return 3;
        if (eerie_sh_read(t, tiny_in, sizeof tiny_in) != sizeof tiny_in) return 3;
        if (tiny_invoke(tiny_in, tiny_out) != 0 || ad_invoke(ad_in, ad_out) != 0) return 4;
        (void)eerie_sh_write(ao, ad_out, sizeof ad_out);
        (void)eerie_sh_write(to, tiny_out, sizeof tiny_out);
    }
    (void)eerie_sh_close(a); (void)eerie_sh_close(t); (void)eerie_sh_close(ao); (void)eerie_sh_close(to);
    eerie_sh_puts("eerie: both models ran\n");
    return 0;
}
""" % {"n": N}


def tiny_model() -> bytes:
    rng = np.random.default_rng(11)
    mb = ModelBuilder()
    x = mb.input([1, 16], "int8", scale=0.04, zero_point=5, name="x")
    w = mb.const(rng.integers(-127, 128, (8, 16)), "int8", scale=[0.01 + 0.001 * i for i in range(8)],
                 zero_point=[0] * 8, name="w")
    b = mb.const(rng.integers(-400, 400, (8,)), "int32", scale=[0.04 * (0.01 + 0.001 * i) for i in range(8)],
                 zero_point=[0] * 8, name="b")
    h = mb.tensor([1, 8], "int8", scale=0.08, zero_point=-10, name="h")
    mb.op("FULLY_CONNECTED", [x, w, b], [h], "FullyConnectedOptions", fusedActivationFunction=ACT["RELU"])
    w2 = mb.const(rng.integers(-127, 128, (5, 8)), "int8", scale=0.02, zero_point=0, name="w2")
    y = mb.tensor([1, 5], "int8", scale=0.1, zero_point=3, name="y")
    mb.op("FULLY_CONNECTED", [h, w2], [y], "FullyConnectedOptions", fusedActivationFunction=ACT["NONE"])
    mb.output(y)
    return mb.build()


@pytest.fixture()
def two(models_dir, tmp_path):
    tiny = tmp_path / "tiny_model.tflite"
    tiny.write_bytes(tiny_model())
    ad = models_dir / "ad01_int8.tflite"
    xa = random_inputs([1, 640], "int8", N, seed=21)
    xt = random_inputs([1, 16], "int8", N, seed=22)
    ref_a = tflm_run(ad, [xa])[0]
    ref_t = tflm_run(tiny, [xt])[0]
    return ad, tiny, xa, xt, ref_a, ref_t


def _check_outputs(d: Path, ref_a, ref_t):
    got_a = np.frombuffer((d / "ad_out.bin").read_bytes(), np.int8).reshape(ref_a.shape)
    got_t = np.frombuffer((d / "tiny_out.bin").read_bytes(), np.int8).reshape(ref_t.shape)
    np.testing.assert_array_equal(got_a, ref_a)
    np.testing.assert_array_equal(got_t, ref_t)


def _own_reports(*dirs_names):
    """Each directory's report files are its own model's."""
    for d, name in dirs_names:
        assert json.loads((d / "report.json").read_text())["name"] == name
        assert (d / "report.md").is_file() and (d / "memory.svg").is_file()


def test_two_models_one_host_program(two, tmp_path):
    ad, tiny, xa, xt, ref_a, ref_t = two
    d = tmp_path / "host"
    compile_model(ad, d / "ad", name="ad")
    compile_model(tiny, d / "tiny", name="tiny")
    _own_reports((d / "ad", "ad"), (d / "tiny", "tiny"))
    (d / "main.c").write_text(HOST_MAIN)
    (d / "ad_in.bin").write_bytes(xa.tobytes())
    (d / "tiny_in.bin").write_bytes(xt.tobytes())
    # Separate objects, then one link: a clash of external symbols fails the link.
    for src in ("ad/ad.c", "tiny/tiny.c", "main.c"):
        subprocess.run(["cc", *STRICT, "-O1", "-I.", "-c", src], cwd=d, check=True)
    for obj, prefix in (("ad.o", "ad_"), ("tiny.o", "tiny_")):
        exported = global_symbols(d / obj)
        assert exported and all(s.startswith(prefix) for s in exported), exported
    subprocess.run(["cc", "ad.o", "tiny.o", "main.o", "-o", "prog", "-lm"], cwd=d, check=True)
    p = subprocess.run(["./prog"], cwd=d, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    _check_outputs(d, ref_a, ref_t)


@pytest.mark.parametrize("board_name", ["mps2-an386", "riscv-virt"])
def test_two_models_one_firmware_image(two, tmp_path, board_name):
    from eerie_c.toolchain.boards import get_board
    from eerie_c.toolchain.targets import TARGETS
    require_board_tools(board_name)
    ad, tiny, xa, xt, ref_a, ref_t = two
    board = get_board(board_name)
    d = tmp_path / "fw"
    res = compile_model(ad, d, name="ad", board=board.name)
    compile_model(tiny, d / "tiny", name="tiny", target=res.target)   # its own directory
    _own_reports((d, "ad"), (d / "tiny", "tiny"))
    (d / "main.c").write_text(FIRMWARE_MAIN)
    (d / "ad_in.bin").write_bytes(xa.tobytes())
    (d / "tiny_in.bin").write_bytes(xt.tobytes())
    srcs = "main.c runtime/eerie_startup.c runtime/eerie_rt.c ad.c tiny/tiny.c"
    b = subprocess.run(["make", "--no-print-directory", "-B", f"SRCS={srcs}", "ad.elf"], cwd=d,
                       capture_output=True, text=True, timeout=300)
    assert b.returncode == 0, b.stdout + b.stderr
    r = subprocess.run(["make", "--no-print-directory", f"SRCS={srcs}", "run"], cwd=d,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "both models ran" in r.stdout + r.stderr, r.stdout + r.stderr
    nm = TARGETS[res.target].cross + "nm"
    syms = subprocess.run([nm, "ad.elf"], cwd=d, capture_output=True, text=True).stdout
    assert " ad_invoke" in syms and " tiny_invoke" in syms
    _check_outputs(d, ref_a, ref_t)


def global_symbols(obj: Path, nm: str = "nm") -> list[str]:
    """The external symbols an object defines."""
    out = subprocess.run([nm, "-g", "--defined-only", str(obj)], check=True, capture_output=True,
                         text=True).stdout
    return [line.split()[-1] for line in out.splitlines() if line.strip()]


ARCH = {"host": [], "cortex-m4": ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"],
        "riscv32imac": ["-march=rv32imac", "-mabi=ilp32", "-specs=picolibc.specs"]}


@pytest.mark.parametrize("target", sorted(ARCH))
def test_only_name_prefixed_symbols_are_global(tmp_path, target):
    """docs/integration.md: NAME_invoke, NAME_inputK_buffer (inputs in the arena) and
    NAME_reset_state (state) are the only external symbols; everything else is static."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ops"))
    from test_resource_variables import accumulator
    cross = {"host": "", "cortex-m4": "arm-none-eabi-", "riscv32imac": "riscv64-unknown-elf-"}[target]
    cc = cross + "gcc" if cross else "cc"
    require_tools(cc)   # fails, never skips, without it
    m = tmp_path / "acc.tflite"
    m.write_bytes(accumulator("float32"))
    res = compile_model(m, tmp_path / "o", name="acc", target=target, inputs_in_arena=True)
    assert res.report["inputs_in_arena"] and res.report["state_bytes"] > 0
    obj = tmp_path / "o" / "acc.o"
    subprocess.run([cc, *STRICT, "-O2", *ARCH[target], "-c", "acc.c", "-o", obj.name],
                   cwd=obj.parent, check=True)
    syms = global_symbols(obj, cross + "nm")
    assert set(syms) == {"acc_invoke", "acc_input0_buffer", "acc_reset_state"}, syms
