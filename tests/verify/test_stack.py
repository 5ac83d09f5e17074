"""Stack bound from the real toolchain's -fstack-usage / -fcallgraph-info output."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import require_tools
from eerie_c.errors import CompilerBug
from eerie_c.verify.lib_stack_table import MULTILIB_STACK
from eerie_c.toolchain.targets import TARGETS
from eerie_c.verify.lib_stack_table_riscv import MULTILIB_STACK as RV_MULTILIB_STACK
from eerie_c.verify.stack import ARM_EXTERNAL_STACK, parse_ci, stack_bound

STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O2"]
ARM_M4 = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]
RV_CC = "riscv64-unknown-elf-gcc"
# The targets' own -march/-mabi/picolibc flags (issue 18: every target test runs for RISC-V too)
RV32IMAC = TARGETS["riscv32imac"].arch_flags.split()
RV32IMAFC = TARGETS["riscv32imafc"].arch_flags.split()
# Each compiler must be on PATH: a missing one fails the test (require_tools), never skips it.
TOOLCHAINS = [
    pytest.param("gcc", STRICT, id="host"),
    pytest.param("arm-none-eabi-gcc", STRICT + ARM_M4, id="cortex-m4"),
    pytest.param("arm-none-eabi-gcc", STRICT + ["-mcpu=cortex-m0", "-mthumb"], id="cortex-m0"),
    pytest.param(RV_CC, STRICT + RV32IMAC, id="riscv32imac"),
]
# The compilers of the whole-firmware tests: one Arm, one RISC-V
CROSS = [pytest.param("arm-none-eabi-gcc", STRICT + ARM_M4, id="cortex-m4"),
         pytest.param(RV_CC, STRICT + RV32IMAFC, id="riscv32imafc")]


@pytest.fixture(autouse=True)
def _compiler_on_path(request):
    """A test parametrized by compiler fails (never skips) when that compiler is missing."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and "cc" in callspec.params:
        require_tools(callspec.params["cc"])


def _host_x86_64() -> bool:
    import platform
    return platform.machine() in ("x86_64", "AMD64")


def _write(tmp_path: Path, text: str, name: str = "m.c") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


VLA = """
#include <stdint.h>
/* noinline and external linkage keep the frame from being folded into a caller */
__attribute__((noinline)) int32_t sum_vla(const int8_t *x, int n)
{
    volatile int32_t tmp[n];
    int32_t acc = 0;
    int i;
    for (i = 0; i < n; ++i) { tmp[i] = x[i]; }
    for (i = 0; i < n; ++i) { acc += tmp[i]; }
    return acc;
}
int32_t entry(const int8_t *x, int n) { return sum_vla(x, n) + 1; }
"""

ALLOCA = """
#include <stdint.h>
__attribute__((noinline)) int32_t scratch_alloca(const int8_t *x, int n)
{
    volatile int8_t *tmp = __builtin_alloca(n);
    tmp[0] = x[0];
    return tmp[0];
}
int32_t entry(const int8_t *x, int n) { return scratch_alloca(x, n) + 1; }
"""


@pytest.mark.parametrize("cc,flags", TOOLCHAINS)
def test_vla_frame_rejected(tmp_path, cc, flags):
    c = _write(tmp_path, VLA)
    with pytest.raises(CompilerBug, match=r"function sum_vla \(m\.c:4:\d+\) has a dynamic.* stack frame"):
        stack_bound(c, [], cc, flags, "entry")


@pytest.mark.parametrize("cc,flags", TOOLCHAINS)
def test_alloca_frame_rejected(tmp_path, cc, flags):
    c = _write(tmp_path, ALLOCA)
    with pytest.raises(CompilerBug, match=r"function scratch_alloca \(m\.c:\d+:\d+\) has a dynamic"):
        stack_bound(c, [], cc, flags, "entry")


# Two kernels that compile to the same code: gcc's identical code folding keeps one body and
# makes the other an alias, which -fcallgraph-info leaves without a node (verify/folded.py).
FOLDED = """
#include <stdint.h>
__attribute__((noinline)) static int32_t sum_a(const int8_t *x)
{
    volatile int32_t tmp[64];
    int32_t acc = 0;
    int i;
    for (i = 0; i < 64; ++i) { tmp[i] = x[i]; }
    for (i = 0; i < 64; ++i) { acc += tmp[i]; }
    return acc;
}
__attribute__((noinline)) static int32_t sum_b(const int8_t *x)
{
    volatile int32_t tmp[64];
    int32_t acc = 0;
    int i;
    for (i = 0; i < 64; ++i) { tmp[i] = x[i]; }
    for (i = 0; i < 64; ++i) { acc += tmp[i]; }
    return acc;
}
int32_t entry(const int8_t *x) { return sum_a(x) + sum_b(x + 64); }
"""


@pytest.mark.parametrize("cc,flags", TOOLCHAINS)
def test_folded_function_charged_its_body(tmp_path, cc, flags):
    """A call to a folded function is charged the frame of the body it shares (256 bytes of
    locals), not an external allowance (128 bytes on Arm): that would be an unsound bound."""
    r = stack_bound(_write(tmp_path, FOLDED), [], cc, flags, "entry")
    assert r["externals"] == {}
    f = r["functions"]
    body = "sum_a" if "sum_a" in f else "sum_b"
    assert f[body]["depth"] >= 256   # on x86-64 part of it is in the leaf's red zone
    assert r["stack_bound_bytes"] == f["entry"]["frame"] + f[body]["depth"]


def test_call_without_frame_rejected():
    """A call to a function of the file that gcc's call graph has no node for (a fold the
    object does not explain) is never guessed at."""
    from eerie_c.verify.stack import _deepest
    funcs = {"entry": {"frame": 16, "kind": "static", "where": "m.c:3:5"}}
    edges = {"entry": [("/tmp/x/m.c:lost", "m.c:4:5")]}
    with pytest.raises(CompilerBug, match=r"entry calls lost, which has no frame"):
        _deepest(funcs, edges, "entry", lambda n: 128, 0)


# Eight pointer arguments: x86-64 passes six in registers and, with gcc's default
# -mno-accumulate-outgoing-args, pushes the rest around the call (emit/c.py REGISTER_ARGS).
PUSHED = """
__attribute__((noinline)) void take8(int *a, int *b, int *c, int *d, int *e, int *f, int *g, int *h)
{
    *a = *b + *c + *d + *e + *f + *g + *h;
}
static int buf[8];
void entry(void) { take8(buf, buf + 1, buf + 2, buf + 3, buf + 4, buf + 5, buf + 6, buf + 7); }
"""


def test_pushed_arguments_frame_rejected_on_x86_64(tmp_path):
    """The issue-26 mechanism: on x86-64, gcc calls the frame of a function that pushes call
    arguments "dynamic,bounded", and the proof keeps rejecting it. Other hosts pass them in
    registers or a preallocated area, a static frame."""
    require_tools("gcc")
    c = _write(tmp_path, PUSHED)
    if _host_x86_64():
        with pytest.raises(CompilerBug, match=r"function entry \(m\.c:\d+:\d+\) has a dynamic,bounded"):
            stack_bound(c, [], "gcc", STRICT, "entry")
    else:
        assert stack_bound(c, [], "gcc", STRICT, "entry")["functions"]["entry"]["kind"] == "static"


CHAIN = """
#include <stdint.h>
#define NOINLINE __attribute__((noinline))
NOINLINE int32_t leaf(const int8_t *x)
{
    volatile int32_t a[32];
    int i;
    for (i = 0; i < 32; ++i) { a[i] = x[i]; }
    return a[x[0] & 31];
}
NOINLINE int32_t mid(const int8_t *x)
{
    volatile int32_t b[16];
    int i;
    for (i = 0; i < 16; ++i) { b[i] = x[i] + leaf(x + i); }
    return b[x[1] & 15];
}
NOINLINE int32_t small(const int8_t *x)
{
    volatile int32_t c[2];
    c[0] = x[0];
    c[1] = x[1];
    return c[0] + c[1];
}
int32_t entry(const int8_t *x)
{
    volatile int32_t d[8];
    int i;
    for (i = 0; i < 8; ++i) { d[i] = mid(x + i) + small(x); }
    return d[x[2] & 7];
}
"""


@pytest.mark.parametrize("cc,flags", TOOLCHAINS)
def test_bound_covers_hand_computed_chain(tmp_path, cc, flags):
    r = stack_bound(_write(tmp_path, CHAIN), [], cc, flags, "entry")
    f = r["functions"]
    assert r["path"] == ["entry", "mid", "leaf"]
    # Hand-computed: the locals alone along the deepest chain are 4*(8 + 16 + 32) bytes.
    assert r["stack_bound_bytes"] >= 4 * (8 + 16 + 32)
    # ... and the bound is exactly the compiler's frames summed along that chain (plus the
    # x86-64 red zone a leaf may use below its frame).
    rz = r["red_zone_bytes"]
    assert rz == (128 if cc == "gcc" and shutil.which("gcc") and _host_x86_64() else 0)
    assert r["stack_bound_bytes"] == f["entry"]["frame"] + f["mid"]["frame"] + f["leaf"]["frame"] + rz
    assert f["leaf"]["depth"] == f["leaf"]["frame"] + rz
    assert f["entry"]["depth"] == r["stack_bound_bytes"]
    assert set(f["entry"]["calls"]) == {"mid", "small"}
    # a useful bound, not a huge constant
    assert r["stack_bound_bytes"] < 2 * 4 * (8 + 16 + 32) + 128 + rz
    assert r["externals"] == {}


def test_external_callee_allowance_arm(tmp_path, cross_cc):
    src = """
#include <math.h>
__attribute__((noinline)) float act(float v) { volatile float t[4]; t[0] = v; return expf(t[0]); }
float entry(float v) { return act(v) + 1.0f; }
"""
    # With an FPU, expf is charged its depth measured for the hard-float multilib (16 B),
    # not the soft-float maximum over all multilibs (80 B).
    own = MULTILIB_STACK["thumb/v7e-m+fp/hard"]["expf"]
    assert own < ARM_EXTERNAL_STACK["expf"]
    r = stack_bound(_write(tmp_path, src), [], "arm-none-eabi-gcc", STRICT + ARM_M4, "entry")
    assert r["externals"] == {"expf": own}
    assert r["path"] == ["entry", "act", "expf"]
    f = r["functions"]
    assert r["stack_bound_bytes"] == f["entry"]["frame"] + f["act"]["frame"] + own
    # The M0 multilib's expf could not be bounded from its code: the all-multilib figure.
    assert "expf" not in MULTILIB_STACK["thumb/v6-m/nofp"]
    r = stack_bound(_write(tmp_path, src), [], "arm-none-eabi-gcc", STRICT + ["-mcpu=cortex-m0", "-mthumb"], "entry")
    assert r["externals"]["expf"] == ARM_EXTERNAL_STACK["expf"]


EXPF_SRC = """
#include <math.h>
__attribute__((noinline)) float act(float v) { volatile float t[4]; t[0] = v; return expf(t[0]); }
float entry(float v) { return act(v) + 1.0f; }
"""


@pytest.mark.parametrize("flags,multilib,soft", [(RV32IMAFC, "rv32imafc/ilp32f", False),
                                                 (RV32IMAC, "rv32imac/ilp32", True)])
def test_external_callee_allowance_riscv(tmp_path, flags, multilib, soft):
    """picolibc's expf is charged its depth measured for the multilib the flags link (hard
    float: no libgcc calls; soft float: the float additions call __addsf3 too)."""
    require_tools(RV_CC)
    r = stack_bound(_write(tmp_path, EXPF_SRC), [], RV_CC, STRICT + flags, "entry")
    own = RV_MULTILIB_STACK[multilib]
    assert r["externals"]["expf"] == own["expf"] > 0
    assert r["path"] == ["entry", "act", "expf"]
    assert set(r["externals"]) == ({"expf", "__addsf3"} if soft else {"expf"}), r["externals"]
    for name, depth in r["externals"].items():
        assert depth == own[name], name
    f = r["functions"]
    assert r["stack_bound_bytes"] == f["entry"]["frame"] + f["act"]["frame"] + own["expf"]


@pytest.mark.parametrize("cc,flags", TOOLCHAINS[:2] + TOOLCHAINS[3:])
def test_indirect_call_and_recursion_rejected(tmp_path, cc, flags):
    ind = """
typedef int (*fn)(int);
__attribute__((noinline)) int call(fn f, int x) { return f(x) + 1; }
int entry(int x) { return call(0, x); }
"""
    with pytest.raises(CompilerBug, match=r"function call makes an indirect call"):
        stack_bound(_write(tmp_path, ind, "i.c"), [], cc, flags, "entry")
    rec = """
__attribute__((noinline)) int walk(volatile int *p, int n) { return n <= 0 ? p[0] : p[n] + walk(p, n - 1) * 3; }
int entry(volatile int *p) { return walk(p, 5); }
"""
    with pytest.raises(CompilerBug, match=r"recursion through walk"):
        stack_bound(_write(tmp_path, rec, "r.c"), [], cc, flags + ["-fno-optimize-sibling-calls"], "entry")


def test_parse_ci_static_titles():
    text = '''graph: { title: "m.c"
node: { title: "/tmp/x/m.c:l0_conv.constprop.0" label: "l0_conv.constprop.0\\nm.c:3:13\\n40 bytes (static)" }
node: { title: "run" label: "run\\nm.c:9:5\\n8 bytes (dynamic,bounded)" }
node: { title: "memcpy" label: "__builtin_memcpy\\n<built-in>" shape : ellipse }
edge: { sourcename: "run" targetname: "/tmp/x/m.c:l0_conv.constprop.0" label: "m.c:10:5" }
edge: { sourcename: "/tmp/x/m.c:l0_conv.constprop.0" targetname: "memcpy" }
}
'''
    nodes, edges = parse_ci(text)
    assert nodes["/tmp/x/m.c:l0_conv.constprop.0"]["frame"] == 40
    assert nodes["run"]["kind"] == "dynamic,bounded"
    assert nodes["memcpy"] == {"external": True}
    assert edges["run"] == [("/tmp/x/m.c:l0_conv.constprop.0", "m.c:10:5")]


@pytest.fixture(scope="module")
def ad01(tmp_path_factory, models_dir):
    from eerie_c.api import compile_model
    path = models_dir / "ad01_int8.tflite"
    d = tmp_path_factory.mktemp("ad01")
    compile_model(path, d)
    return next(d.glob("*.c")), d


@pytest.mark.parametrize("cc,flags", TOOLCHAINS)
def test_generated_model_bound(ad01, cc, flags):
    c, d = ad01
    r = stack_bound(c, [d], cc, flags + ["-Wvla"], f"{c.stem}_invoke")
    assert r["stack_bound_bytes"] > 0
    assert r["path"][0] == f"{c.stem}_invoke"
    assert all(f["kind"] == "static" for f in r["functions"].values())
    # generated kernels are small: a bound in kilobytes would mean something went wrong
    assert r["stack_bound_bytes"] < 4096


PROGRAM_A = """
#include <stdint.h>
int32_t work(const int8_t *x);
void entry(void);
void tick(void);
volatile int32_t sink;
volatile uint32_t ticks;
void entry(void)
{
    int8_t buf[40];
    for (int i = 0; i < 40; ++i) buf[i] = (int8_t)i;
    sink = work(buf);
}
void tick(void) { ticks = ticks + 1u; }
"""
PROGRAM_B = """
#include <stdint.h>
int32_t work(const int8_t *x);
__attribute__((noinline)) static int32_t deep(const int8_t *x)
{
    volatile int32_t acc[24];
    for (int i = 0; i < 24; ++i) acc[i] = x[i];
    return acc[3] + acc[17];
}
int32_t work(const int8_t *x) { return deep(x) + 1; }
"""


def _program_cis(tmp_path, sources: dict[str, str], flags, cc="arm-none-eabi-gcc"):
    from eerie_c.verify.stack import _compile_ci
    out = []
    for name, text in sources.items():
        c = _write(tmp_path, text, name)
        _compile_ci(c, [], cc, flags, tmp_path)
        out.append(tmp_path / (c.stem + ".ci"))
    return out


def _su_frames(tmp_path) -> dict[str, int]:
    frames = {}
    for su in tmp_path.glob("*.su"):
        for line in su.read_text().splitlines():
            where, size, _ = line.split("\t")
            frames[where.rsplit(":", 1)[-1].split(".")[0]] = int(size)
    return frames


@pytest.mark.parametrize("cc,flags", CROSS)
def test_program_bound_merges_files_and_adds_one_interrupt(tmp_path, cc, flags):
    """Whole-firmware bound: call graphs of several files merged (entry in one file, callee and
    its static helper in another), plus the exception frame and the deepest handler."""
    from eerie_c.verify.stack import program_stack_bound
    cis = _program_cis(tmp_path, {"a.c": PROGRAM_A, "b.c": PROGRAM_B}, flags, cc)
    r = program_stack_bound(cis, "entry", ["tick"], 104)
    f = _su_frames(tmp_path)
    assert r["path"] == ["entry", "work", "deep"]
    thread = sum(f[n.split(".")[0]] for n in r["path"])
    assert r["thread_bytes"] == thread and f["deep"] >= 96   # the 24-word array is counted
    assert r["handler_bytes"] == f["tick"]
    assert r["stack_bound_bytes"] == thread + 104 + f["tick"]


@pytest.mark.parametrize("cc,flags", CROSS)
def test_program_bound_rejects_recursion_across_files(tmp_path, cc, flags):
    from eerie_c.verify.stack import program_stack_bound
    a = "int pong(int n);\nint ping(int n) { return n ? pong(n - 1) : 0; }\nvoid entry(void);\nvolatile int s;\nvoid entry(void) { s = ping(s); }\n"
    b = "int ping(int n);\nint pong(int n) { return n ? ping(n - 1) + 1 : 1; }\n"
    cis = _program_cis(tmp_path, {"a.c": a, "b.c": b}, flags, cc)
    with pytest.raises(CompilerBug, match="recursion"):
        program_stack_bound(cis, "entry", [], 32)
