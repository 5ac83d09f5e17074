"""Soundness of the C-source proof's name handling and of the stack bound's external
callees: block scopes (an inner declaration never stands for the loop variable), loop
counters whose address is taken, enum constants shadowed by locals, compiler builtins,
and allocators that only the compiled code shows."""
from __future__ import annotations


import pytest

from eerie_c.errors import CompilerBug
from eerie_c.verify.stack import program_stack_bound, stack_bound

from c_snippets import assert_rejected as _rejects, prove_snippet as _prove
from conftest import require_tools

# gcc preprocesses for the proof: without it every test here fails (host_cc), never skips.
pytestmark = pytest.mark.usefixtures("host_cc")


# ---- block scopes ----

def test_inner_redeclaration_does_not_hide_the_loop_variables_type(tmp_path):
    """(audit repro shadow.c) `int8_t i` counts to 200 after a block declared `int i`: it
    wraps at 127, so the loop never ends."""
    body = """
int entry(const int8_t *x) {
    int8_t i;
    int acc = 0;
    {
        int i = 3;
        acc += i;
    }
    for (i = 0; i < 200; ++i) {
        acc += x[0];
    }
    return acc;
}
"""
    _rejects(tmp_path, body, r"does not fit the type int8_t of 'i'", "for (i = 0")


def test_for_declaration_is_scoped_to_its_loop(tmp_path):
    body = """
int entry(const int8_t *x) {
    int acc = 0;
    int8_t i = 0;
    for (int i = 0; i < 200; ++i) {
        acc += x[0];
    }
    for (i = 0; i < 100; ++i) {
        acc += x[1];
    }
    for (i = 0; i < 200; ++i) {
        acc += x[2];
    }
    return acc;
}
"""
    _rejects(tmp_path, body, r"does not fit the type int8_t of 'i'", "for (i = 0; i < 200")


def test_sibling_blocks_and_outer_variables_resolve_correctly(tmp_path):
    body = """
int entry(const int8_t *x) {
    int acc = 0;
    int i;
    {
        int8_t i;
        for (i = 0; i < 100; ++i) {
            acc += x[0];
        }
    }
    for (i = 0; i < 1000; ++i) {
        acc += x[1];
    }
    return acc;
}
"""
    r = _prove(tmp_path, body)
    assert r["loops"] == 2 and r["max_loop_trips"] == 1000


def test_local_shadowing_an_enum_constant_is_rejected(tmp_path):
    """Bounds and array sizes read enum constants by name: a local of the same name would
    make `i < N` or `a[N]` mean something else."""
    body = """
enum { N = 10 };
int entry(int n) {
    int acc = 0, i;
    int N = n;
    for (i = 0; i < N; ++i) {
        acc += i;
    }
    return acc;
}
"""
    _rejects(tmp_path, body, r"local 'N' has the name of an enum constant", "int N = n")


def test_parameter_shadowing_an_enum_constant_is_rejected(tmp_path):
    body = "enum { N = 10 };\nint entry(int N) {\n    int8_t a[N];\n    a[0] = 0;\n    return a[0];\n}\n"
    _rejects(tmp_path, body, r"parameter 'N' has the name of an enum constant", "int entry(int N)")


# ---- loop counters whose address is taken ----

def test_loop_counter_with_address_taken_before_the_loop_is_rejected(tmp_path):
    """(audit repro alias.c) `*p = 0` in the body resets i through a pointer."""
    body = """
int entry(const int8_t *x) {
    int i;
    int acc = 0;
    int *p = &i;
    for (i = 0; i < 10; ++i) {
        acc += x[0];
        *p = 0;
    }
    return acc;
}
"""
    _rejects(tmp_path, body, r"the address of loop variable 'i' is taken in this function", "for (i = 0")


def test_loop_counter_with_address_taken_after_the_loop_is_rejected(tmp_path):
    body = """
static int *keep;
int entry(const int8_t *x) {
    int i, acc = 0;
    for (i = 0; i < 10; ++i) {
        acc += x[0];
        if (keep) { *keep = 0; }
    }
    keep = &i;
    return acc;
}
"""
    _rejects(tmp_path, body, r"the address of loop variable 'i' is taken", "for (i = 0")


def test_other_variables_addresses_do_not_matter(tmp_path):
    body = """
int entry(const int8_t *x) {
    int i, acc = 0;
    int32_t v;
    for (i = 0; i < 10; ++i) {
        memcpy(&v, x + i, 4);
        acc += v;
    }
    return acc;
}
"""
    assert _prove(tmp_path, body)["loops"] == 1


# ---- compiler builtins ----

@pytest.mark.parametrize("call", ["__builtin_stack_save()", "__builtin_frame_address(0)",
                                  "__builtin_return_address(0)", "__builtin_alloca(16)",
                                  "__builtin_alloca_with_align(16, 64)", "__builtin_trap()",
                                  "__builtin_apply_args()", "__builtin_unreachable()"])
def test_builtins_outside_the_allow_list_are_rejected(tmp_path, call):
    body = f"int entry(void) {{\n    void *p = (void *){call};\n    return p != 0;\n}}\n"
    _rejects(tmp_path, body, r"(outside the allow-list|allocator)", call)


def test_allowed_builtins_pass(tmp_path):
    body = ("int entry(int32_t x) {\n    if (__builtin_expect(x == 0, 0)) {\n        return 32;\n"
            "    }\n    return __builtin_clz((uint32_t)x) + __builtin_clrsb(x);\n}\n")
    assert _prove(tmp_path, body)["ok"]


# ---- stack bound: allocators in the compiled code ----

MALLOC = """
#include <stdlib.h>
#include <stdint.h>
int8_t *sink;
int32_t entry(const int8_t *x, int n) {
    sink = (int8_t *)malloc((unsigned)n);
    sink[0] = x[0];
    return sink[0];
}
"""


@pytest.mark.parametrize("cc,flags", [
    ("gcc", ["-std=c99", "-O2"]),
    ("arm-none-eabi-gcc", ["-std=c99", "-O2", "-mcpu=cortex-m4", "-mthumb"]),
    ("riscv64-unknown-elf-gcc", ["-std=c99", "-O2", "-march=rv32imac", "-mabi=ilp32", "-specs=picolibc.specs"]),
])
def test_stack_bound_rejects_an_external_allocator(tmp_path, cc, flags):
    """The call graph gcc wrote has malloc as an external callee: rejected, not charged an
    allowance (it used to be charged 128 B and accepted)."""
    require_tools(cc)   # fails, never skips, without it
    c = tmp_path / "m.c"
    c.write_text(MALLOC)
    with pytest.raises(CompilerBug, match=r"function entry calls malloc .*allocator or forbidden"):
        stack_bound(c, [tmp_path], cc, flags, "entry")


def test_stack_bound_rejects_a_forbidden_external(tmp_path):
    c = tmp_path / "m.c"
    c.write_text("typedef long jmp_buf[64];\njmp_buf env;\nint setjmp(long *e);\n"
                 "int entry(void) { return setjmp(env); }\n")
    with pytest.raises(CompilerBug, match=r"calls setjmp"):
        stack_bound(c, [tmp_path], "gcc", ["-std=c99", "-O2"], "entry")


def test_firmware_stack_bound_rejects_an_allocator(tmp_path):
    ci = tmp_path / "main.ci"
    ci.write_text('graph: { title: "main.c"\n'
                  'node: { title: "Reset_Handler" label: "Reset_Handler\\nmain.c:3:6\\n8 bytes (static)" }\n'
                  'node: { title: "SysTick_Handler" label: "SysTick_Handler\\nmain.c:9:6\\n0 bytes (static)" }\n'
                  'node: { title: "malloc" label: "malloc\\n<built-in>" shape : ellipse }\n'
                  'edge: { sourcename: "Reset_Handler" targetname: "malloc" label: "main.c:5:5" }\n}\n')
    with pytest.raises(CompilerBug, match=r"Reset_Handler calls malloc \(main.c:5:5\)"):
        program_stack_bound([ci], "Reset_Handler", ["SysTick_Handler"], 32)
