"""Inline assembly under the C-source proof (eerie_c/verify/asm_check.py): straight-line
templates without stack or branch instructions pass; a loop in assembly passes only in the
one counted form, under a test that bounds its counter by a constant; every other branch,
label or directive fails with the function and the line named."""
from __future__ import annotations

from functools import partial

import re

import pytest

from eerie_c.errors import CompilerBug
from eerie_c.toolchain.targets import get_target
from eerie_c.verify.ast_proof import prove_c
from eerie_c.verify.proof_config import target_config

from c_snippets import assert_rejected, prove_snippet

# The proof preprocesses with gcc: without it every test here fails (host_cc), never skips.
pytestmark = pytest.mark.usefixtures("host_cc")

HEAD = "#include <stdint.h>\n"
LOOP = ('__asm__ volatile("1:\\n\\t"\n'
        '        "add %[a], %[a], %[x]\\n\\t"\n'
        '        "subs %[n], %[n], #1\\n\\t"\n'
        '        "bne 1b" : [a] "+r"(acc), [n] "+r"(n) : [x] "r"(x) : "cc");')


_prove = partial(prove_snippet, head=HEAD)
_rejects = partial(assert_rejected, head=HEAD)


def _fn(guard: str, stmt: str = LOOP, pre: str = "") -> str:
    return (f"int32_t entry(int32_t x, int n) {{\n    int32_t acc = 0;\n{pre}"
            f"    {guard} {{\n        {stmt}\n    }}\n    return acc;\n}}\n")


def test_counted_loop_under_a_constant_guard_is_accepted(tmp_path):
    r = _prove(tmp_path, _fn("if (n > 0 && n <= 1000)"))
    assert r["asm_statements"] == 1 and r["asm_loops"] == 1 and r["max_loop_trips"] == 1000


@pytest.mark.parametrize("guard", ["if (1 <= n && 999 >= n)", "if (n < 1001 && n >= 1 && x != 0)"])
def test_guard_forms(tmp_path, guard):
    r = _prove(tmp_path, _fn(guard))
    assert r["asm_loops"] == 1 and r["max_loop_trips"] in (999, 1000)


@pytest.mark.parametrize("guard,why", [
    ("if (n > 0)", "no upper bound"),
    ("if (n <= 1000)", "no lower bound: n = 0 wraps to 2^32 trips"),
    ("if (n >= 0 && n <= 1000)", "n may be 0"),
    ("if (n > 0 && n <= x)", "bound is not a constant"),
    ("if (n > 0 || n <= 1000)", "not a conjunction"),
    ("if (n > 0 && n <= 1000 && (n = x) != 0)", "the condition changes n"),
    ("for (;;) if (n > 0 && n <= 1000)", "unbounded for loop around it"),
])
def test_counted_loop_without_a_bound_is_rejected(tmp_path, guard, why):
    body = _fn(guard)
    if guard.startswith("for"):
        with pytest.raises(CompilerBug):
            _prove(tmp_path, body)
        return
    _rejects(tmp_path, body, r"inline assembly loop counted by 'n' is not the first statement",
             "__asm__")


def test_counted_loop_not_first_in_the_guarded_block_is_rejected(tmp_path):
    body = _fn("if (n > 0 && n <= 1000)", "n = n * 1000;\n        " + LOOP)
    _rejects(tmp_path, body, r"not the first statement", "__asm__")


def test_counted_loop_whose_counter_has_its_address_taken_is_rejected(tmp_path):
    body = _fn("if (n > 0 && n <= 1000)", pre="    int *p = &n;\n    (void)p;\n")
    _rejects(tmp_path, body, r"not the first statement", "__asm__")


def test_counted_loop_counter_must_be_an_integer_local(tmp_path):
    body = ("float n;\nint32_t entry(int32_t x) {\n    int32_t acc = 0;\n"
            "    if (n > 0 && n <= 1000) {\n        " + LOOP + "\n    }\n    return acc;\n}\n")
    _rejects(tmp_path, body, r"counter 'n' is not a local variable of a 32-bit or narrower", "__asm__")


@pytest.mark.parametrize("template,why", [
    ('"1:\\n\\tsubs %[n], %[n], #1\\n\\tbne 1b" : [n] "=r"(n)', r'must be a "\+r" operand'),
    ('"1:\\n\\tsubs %[n], %[n], #2\\n\\tbne 1b" : [n] "+r"(n)', r"must follow `subs"),
    ('"1:\\n\\tmov %[n], #5\\n\\tsubs %[n], %[n], #1\\n\\tbne 1b" : [n] "+r"(n)', r"body names the counter"),
    ('"1:\\n\\tadds %0, %0, #1\\n\\tsubs %[n], %[n], #1\\n\\tbne 1b" : [n] "+r"(n)', r"body names the counter"),
    ('"1:\\n\\tsubs %[n], %[n], #1\\n\\tbne 1b\\n\\tnop" : [n] "+r"(n)', r"last instruction must be `bne 1b`"),
    ('"2:\\n\\tsubs %[n], %[n], #1\\n\\tbne 2b" : [n] "+r"(n)', r"must start with label `1:`"),
    ('"1:\\n\\tbeq 1b\\n\\tsubs %[n], %[n], #1\\n\\tbne 1b" : [n] "+r"(n)', r"another branch"),
    ('"1:\\n\\tsubs %[n], %[n], #1\\n\\tbne 1b" : [n] "+r"(n) : [m] "[n]"(x)', r"tied to the counter"),
])
def test_malformed_counted_loop_is_rejected(tmp_path, template, why):
    body = _fn("if (n > 0 && n <= 1000)", f"__asm__ volatile({template});")
    _rejects(tmp_path, body, why, "__asm__")


@pytest.mark.parametrize("insn", ["b 2f\\n2:", "bl helper", "bx lr", "blx r3", "cbz %0, 2f\\n2:",
                                  "cbnz %0, 2f\\n2:", "pop {r4, pc}", "ldr pc, [%0]", "beq 2f\\n2:",
                                  "bne.w 2f\\n2:", "le lr, 2b", "wls lr, %0, 2f\\n2:", "tbb [pc, %0]",
                                  "mov pc, lr", "jmp 2f\\n2:", "ret", "call helper"])
def test_any_other_branch_is_rejected(tmp_path, insn):
    body = ("int32_t entry(int32_t x) {\n    int32_t acc = x;\n"
            f'    __asm__ volatile("{insn}" : "+r"(acc));\n    return acc;\n}}\n')
    _rejects(tmp_path, body, r"inline assembly .*(branch|label|names '(pc|pop)')", "__asm__")


@pytest.mark.parametrize("insn,what", [("vpush {d8}", "vpush"), ("push {r4}", "push"),
                                       ("mov %0, sp", "sp"), ("msr msp, %0", "msr"),
                                       ("svc #0", "svc"), ("ldmia %0!, {r4, r5}", "ldmia"),
                                       ("wfi", "wfi"), ("rep stosb", "rep")])
def test_stack_and_trap_instructions_are_rejected(tmp_path, insn, what):
    body = ("int32_t entry(int32_t x) {\n    int32_t acc = x;\n"
            f'    __asm__ volatile("{insn}" : "+r"(acc));\n    return acc;\n}}\n')
    _rejects(tmp_path, body, rf"names '{what}'", "__asm__")


@pytest.mark.parametrize("insn", [".word 0xe12fff1e", ".inst 0x4770", ".rept 4"])
def test_directives_are_rejected(tmp_path, insn):
    body = f'int entry(void) {{\n    __asm__ volatile("{insn}");\n    return 0;\n}}\n'
    _rejects(tmp_path, body, r"assembler directive", "__asm__")


def test_asm_goto_is_rejected(tmp_path):
    body = 'int entry(void) {\n    __asm__ goto("" : : : : out);\nout:\n    return 0;\n}\n'
    _rejects(tmp_path, body, r"asm goto", "__asm__")


def test_label_inside_a_macro_expansion_is_seen(tmp_path):
    """The template is read in full: a `:` in it (a label) does not end the template."""
    body = ('#define LOOP_BODY "nop\\n\\t" "3: sub %0, %0, #1\\n\\t" "bgt 3b"\n'
            'int32_t entry(int32_t x) {\n    int32_t acc = x;\n'
            '    __asm__ volatile(LOOP_BODY : "+r"(acc));\n    return acc;\n}\n')
    _rejects(tmp_path, body, r"inline assembly .*(label|branch)", "__asm__ volatile(LOOP")


def test_asm_writing_a_for_loop_counter_is_rejected(tmp_path):
    body = ("int32_t entry(int32_t x) {\n    int32_t acc = 0;\n    int i;\n"
            "    for (i = 0; i < 10; ++i) {\n"
            '        __asm__ volatile("mov %0, #0" : "=r"(i));\n        acc += x;\n    }\n'
            "    return acc;\n}\n")
    _rejects(tmp_path, body, r"loop variable 'i' is modified in the loop body", "__asm__")


def test_marker_names_are_reserved(tmp_path):
    body = "void __eerie_asm(int k);\nint entry(void) {\n    __eerie_asm(0);\n    return 0;\n}\n"
    with pytest.raises(CompilerBug, match="reserved"):
        _prove(tmp_path, body)


def test_line_numbers_after_a_multi_line_asm_are_right(tmp_path):
    body = ("int32_t entry(int32_t x) {\n    int32_t acc = x;\n"
            '    __asm__ volatile("add %0, %0, #1\\n\\t"\n'
            '                     "add %0, %0, #1"\n'
            '                     : "+r"(acc));\n'
            "    while (acc) { acc--; }\n    return acc;\n}\n")
    _rejects(tmp_path, body, r"while loop", "while (acc)")


def _counted_loops(c: str) -> int:
    """Counted assembly loops (`bne 1b`) in generated C: those written out, plus, for a macro
    whose body holds one (helpers/dsp_fc_fix.c.j2), one per use of the macro."""
    text = c.replace("\\\n", " ")     # macro bodies on one line
    defs = re.findall(r"^#define (\w+)\(.*bne\s+1b.*$", text, re.M)
    plain = sum(1 for line in text.splitlines()
                if re.search(r"\bbne\s+1b", line) and not line.startswith("#define"))
    return plain + sum(len(re.findall(rf"\b{m}\(", text)) - 1 for m in defs)   # - the #define


def test_generated_dsp_assembly_loop_is_proved(models_dir, tmp_path):
    """The FULLY_CONNECTED DSP kernels' assembly loops (helpers/fc_dsp*.c.j2; ad01 uses
    several weight formats, each with its own loop) are in the accepted form, proved
    under cortex-m4's own macros: the prover finds every loop the file contains."""
    from eerie_c.api import compile_model
    res = compile_model(models_dir / "ad01_int8.tflite", tmp_path / "o", target="cortex-m4", name="m")
    n_loops = _counted_loops(res.files["m.c"])
    assert n_loops >= 4   # the formats' loops and the packed formats' correction-list loops
    r = prove_c(tmp_path / "o" / "m.c", [tmp_path / "o"], "m_invoke",
                config=target_config(get_target("cortex-m4")))
    assert r["asm_loops"] == n_loops and r["asm_statements"] >= 3 * n_loops
