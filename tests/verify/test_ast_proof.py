"""The generated-C proof: each forbidden construct in a hand-written snippet is rejected with
a message naming the construct, the function and the line; real generated code passes."""
from __future__ import annotations

import pytest

from eerie_c.errors import CompilerBug
from eerie_c.verify.ast_proof import prove_c

from c_snippets import assert_rejected, prove_snippet as _prove

# The proof preprocesses with gcc: without it every test here fails (host_cc), never skips.
pytestmark = pytest.mark.usefixtures("host_cc")


def _rejects(tmp_path, body, pattern, fn, needle, entry="entry"):
    return assert_rejected(tmp_path, body, pattern, needle, fn, entry)


# ---- forbidden constructs ----

def test_vla_rejected(tmp_path):
    body = """
int entry(int n) {
    int buf[n];
    buf[0] = 1;
    return buf[0];
}
"""
    _rejects(tmp_path, body, r"'buf' is a variable-length array", "entry", "int buf[n]")


def test_vla_from_const_variable_rejected(tmp_path):
    # `const int` is not an integer constant expression in C: this is a VLA too
    body = """
int entry(void) {
    const int n = 4;
    int buf[n];
    buf[0] = n;
    return buf[0];
}
"""
    _rejects(tmp_path, body, r"variable-length array", "entry", "int buf[n]")


def test_vla_in_cast_rejected(tmp_path):
    body = """
int entry(int *p, int n) {
    return ((int (*)[n])p)[0][0];
}
"""
    _rejects(tmp_path, body, r"variable-length array", "entry", "((int (*)[n])p)")


def test_alloca_rejected(tmp_path):
    body = """#include <alloca.h>
int entry(int n) {
    int8_t *p = alloca(n);
    p[0] = 1;
    return p[0];
}
"""
    _rejects(tmp_path, body, r"calls allocator alloca", "entry", "alloca(n)")


def test_builtin_alloca_rejected(tmp_path):
    body = """
int entry(int n) {
    int8_t *p = __builtin_alloca(n);
    p[0] = 1;
    return p[0];
}
"""
    _rejects(tmp_path, body, r"calls allocator __builtin_alloca", "entry", "__builtin_alloca(n)")


def test_malloc_rejected(tmp_path):
    body = """#include <stdlib.h>
static int helper(void) {
    int *p = (int *)malloc(16);
    return p != 0;
}
int entry(void) { return helper(); }
"""
    _rejects(tmp_path, body, r"calls allocator malloc", "helper", "malloc(16)")


def test_free_rejected(tmp_path):
    body = """#include <stdlib.h>
int entry(int *p) {
    free(p);
    return 0;
}
"""
    _rejects(tmp_path, body, r"calls allocator free", "entry", "free(p)")


def test_direct_recursion_rejected(tmp_path):
    body = """
static int fact(int n) {
    return n <= 1 ? 1 : n * fact(n - 1);
}
int entry(void) { return fact(5); }
"""
    _rejects(tmp_path, body, r"recursion: fact calls itself", "fact", "fact(n - 1)")


def test_indirect_recursion_rejected(tmp_path):
    body = """
static int b(int n);
static int c(int n) { return n ? b(n - 1) : 0; }
static int a(int n) { return c(n); }
static int b(int n) { return a(n); }
int entry(void) { return a(3); }
"""
    msg = _rejects(tmp_path, body, r"indirect recursion: a -> c -> b -> a", "a", "c(n); }")
    assert "a -> c -> b -> a" in msg


def test_function_pointer_declaration_rejected(tmp_path):
    body = """
static int twice(int x) { return 2 * x; }
int entry(int x) {
    int (*f)(int) = 0;
    (void)f;
    return twice(x);
}
"""
    _rejects(tmp_path, body, r"'f' is a function pointer", "entry", "int (*f)(int)")


def test_function_pointer_parameter_rejected(tmp_path):
    body = """
int entry(int (*cb)(int)) {
    return 0;
}
"""
    _rejects(tmp_path, body, r"'cb' is a function pointer", "entry", "int entry(")


def test_function_pointer_table_rejected(tmp_path):
    body = """
static void f0(void) {}
static void (*const table[1])(void) = { f0 };
int entry(void) { return 0; }
"""
    with pytest.raises(CompilerBug, match=r"'table' is a function pointer"):
        _prove(tmp_path, body)


def test_call_through_expression_rejected(tmp_path):
    body = """
static int one(void) { return 1; }
int entry(void) {
    return (*one)();
}
"""
    _rejects(tmp_path, body, r"call through an expression", "entry", "(*one)()")


def test_function_as_value_rejected(tmp_path):
    body = """
static int one(void) { return 1; }
int entry(void) {
    const void *p = (const void *)one;
    return p != 0;
}
"""
    _rejects(tmp_path, body, r"uses function one as a value", "entry", "(const void *)one")


def test_unbounded_while_rejected(tmp_path):
    body = """
int entry(int x) {
    while (x > 1) {
        x = x / 2;
    }
    return x;
}
"""
    _rejects(tmp_path, body, r"while loop has no compile-time maximum trip count", "entry", "while (x")


def test_do_while_rejected(tmp_path):
    body = """
int entry(int x) {
    do {
        x = x - 3;
    } while (x > 0);
    return x;
}
"""
    _rejects(tmp_path, body, r"do-while loop has no compile-time maximum", "entry", "do {")


def test_for_with_runtime_bound_rejected(tmp_path):
    body = """
int entry(const int8_t *x, int n) {
    int i, acc = 0;
    for (i = 0; i < n; ++i) {
        acc += x[i];
    }
    return acc;
}
"""
    _rejects(tmp_path, body, r"bound `n` of 'i' is not a compile-time constant", "entry", "for (i = 0; i < n")


def test_for_without_condition_rejected(tmp_path):
    body = """
int entry(int x) {
    int i;
    for (i = 0; ; ++i) {
        if (i > x) break;
    }
    return i;
}
"""
    _rejects(tmp_path, body, r"not a comparison of the loop variable", "entry", "for (i = 0; ;")


def test_loop_variable_modified_in_body_rejected(tmp_path):
    body = """
int entry(const int8_t *x) {
    int i, acc = 0;
    for (i = 0; i < 16; ++i) {
        acc += x[i];
        if (acc > 100) i = 0;
    }
    return acc;
}
"""
    _rejects(tmp_path, body, r"loop variable 'i' is modified in the loop body", "entry", "i = 0;\n    }")


def test_loop_variable_address_taken_rejected(tmp_path):
    body = """
static void bump(int *p) { *p = 0; }
int entry(void) {
    int i, acc = 0;
    for (i = 0; i < 16; ++i) {
        bump(&i);
        acc += i;
    }
    return acc;
}
"""
    _rejects(tmp_path, body, r"loop variable 'i' is modified", "entry", "&i")


def test_wrong_direction_and_overflow_rejected(tmp_path):
    down = """
int entry(void) {
    int i, acc = 0;
    for (i = 0; i < 16; --i) { acc += 1; }
    return acc;
}
"""
    _rejects(tmp_path, down, r"goes the wrong way", "entry", "for (i")
    narrow = """
int entry(void) {
    int8_t i;
    int acc = 0;
    for (i = 0; i < 200; ++i) { acc += 1; }
    return acc;
}
"""
    _rejects(tmp_path, narrow, r"does not fit the type int8_t", "entry", "for (i")
    unsigned_down = """
int entry(void) {
    unsigned u;
    int acc = 0;
    for (u = 7; u >= 0; --u) { acc += 1; }
    return acc;
}
"""
    _rejects(tmp_path, unsigned_down, r"wrap below its minimum", "entry", "for (u")


def test_goto_rejected(tmp_path):
    body = """
int entry(int x) {
again:
    x = x + 1;
    if (x < 10) goto again;
    return x;
}
"""
    _rejects(tmp_path, body, r"goto again", "entry", "goto again")


def test_unknown_external_and_header_rejected(tmp_path):
    body = """
int mystery(int x);
int entry(int x) { return mystery(x); }
"""
    _rejects(tmp_path, body, r"calls mystery, which is neither defined", "entry", "mystery(x); }")
    with pytest.raises(CompilerBug, match=r"preprocessing .* failed"):
        _prove(tmp_path, '#include <stdio.h>\nint entry(void) { return 0; }\n')


def test_missing_entry_rejected(tmp_path):
    with pytest.raises(CompilerBug, match=r"entry function model_invoke is not defined"):
        _prove(tmp_path, "int entry(void) { return 0; }\n", entry="model_invoke")


# ---- accepted code ----

def test_bounded_shapes_accepted(tmp_path):
    body = """#include <math.h>
#include <float.h>
static float arena[64] __attribute__((aligned(16)));
enum { N = 8 };
#define EERIE_LAYER_BARRIER() __asm__ __volatile__("" ::: "memory")
static inline float act(float v) { return tanhf(v) + expf(-v); }
int entry(const int8_t *x, float *y) {
    int i, j, trip, acc = 0;
    float m = -FLT_MAX;
    for (i = 0; i < N * 2; i += 2) {
        /* triangular: bound from the enclosing loop's variable */
        for (j = i; j >= 0; --j) {
            acc += x[j];
        }
    }
    for (i = 0; i <= 3; i++) {
        const int lo = i - 1 < 0 ? 0 : i - 1;
        const int hi = i + 2 > 4 ? 4 : i + 2;
        for (j = lo; j < hi; ++j) {
            acc += x[j];
        }
    }
    /* model control flow: explicit maximum trip count, stops early on the real condition */
    for (trip = 0; trip < 100 && acc > 1; ++trip) {
        acc /= 2;
    }
    for (int k = 0; k < 64; ++k) {
        m = arena[k] > m ? arena[k] : m;
    }
    do { y[0] = act(m); } while (0);
    memcpy(y + 1, arena, sizeof(float) * 4);
    EERIE_LAYER_BARRIER();
    return acc;
}
"""
    r = _prove(tmp_path, body)
    assert r["ok"] and r["check"] == "c_ast"
    assert r["loops"] == 6
    assert r["max_loop_trips"] == 100
    assert set(r["externals"]) == {"expf", "tanhf", "memcpy"}
    # The same file with the compiler's own macros: the asm barrier is checked and removed.
    c = tmp_path / "snippet.c"
    r2 = prove_c(c, [tmp_path], "entry", defines=["-D__GNUC__=12"])
    assert r2["ok"]


def test_asm_touching_stack_pointer_rejected(tmp_path):
    body = """
int entry(void) {
    __asm__ volatile("sub sp, sp, #64");
    return 0;
}
"""
    with pytest.raises(CompilerBug, match=r"inline assembly"):
        _prove(tmp_path, body)


@pytest.fixture(scope="module")
def generated(tmp_path_factory, models_dir):
    """Compile the shared models once; {name: (c file, out dir)}."""
    from eerie_c.api import compile_model
    out = {}
    for model in ("ad01_int8", "kws_ref_model"):
        path = models_dir / f"{model}.tflite"
        d = tmp_path_factory.mktemp(model)
        compile_model(path, d)
        c = next(d.glob("*.c"))
        out[model] = (c, d)
    return out


@pytest.mark.parametrize("model", ["ad01_int8", "kws_ref_model"])
def test_generated_model_code_accepted(generated, model):
    c, d = generated[model]
    r = prove_c(c, [d], f"{c.stem}_invoke")
    assert r["ok"] and r["functions"] >= 2 and r["loops"] >= 1
    assert r["max_loop_trips"] > 0
