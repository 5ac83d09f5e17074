"""The C-source proof sees the code that ships: each compile proves the file as the target's
own compiler preprocesses it (its predefined macros: __ARM_FEATURE_DSP, __ARM_FEATURE_MVE,
__thumb2__, __GNUC__, ...), not only its portable branches.  A forbidden construct hidden in a
target-feature branch fails with the function and the line named; the same file passes the
portable configuration alone, which is all that was proved before."""
from __future__ import annotations

import json
import re

import pytest

from conftest import require_tools
from eerie_c.api import compile_model
from eerie_c.errors import CompilerBug
from eerie_c.kernels import REGISTRY, load_all
from eerie_c.toolchain.targets import TARGETS, get_target
from eerie_c.verify.ast_proof import prove_c
from eerie_c.verify.proof_config import PORTABLE, features, target_config

# Fails (never skips) without gcc, arm-none-eabi-gcc and riscv64-unknown-elf-gcc.
pytestmark = pytest.mark.usefixtures("host_cc", "cross_cc")


@pytest.fixture(autouse=True)
def _riscv_cc():
    require_tools("riscv64-unknown-elf-gcc")


# One feature branch per family: a macro only that target's compiler defines.
FAMILIES = {
    "cortex-m4": "defined(__ARM_FEATURE_DSP)",                                  # DSP
    "cortex-m55": "defined(__ARM_FEATURE_MVE)",                                 # MVE
    "cortex-m3": "defined(__thumb2__) && !defined(__ARM_FEATURE_DSP)",          # plain
    "riscv32imac": "defined(__riscv) && !defined(__riscv_flen)",                # RISC-V, soft float
}

HEAD = "#include <stdint.h>\n#include <stdlib.h>\n#include <string.h>\n"

# (construct, C inside the branch, the line the error must name, what it must say)
CONSTRUCTS = {
    "malloc": ("    int8_t *p = (int8_t *)malloc(16);\n    p[0] = x[0];\n    acc += p[0];\n",
               "malloc(16)", r"allocator malloc"),
    "vla": ("    int8_t t[n + 1];\n    t[0] = x[0];\n    acc += t[0];\n",
            "int8_t t[n + 1]", r"variable-length array"),
    "unbounded_loop": ("    while (n > 0) { acc += x[n]; n--; }\n", "while (n > 0)",
                       r"while loop has no compile-time maximum"),
    "asm_loop_without_bound": ('    __asm__ volatile("1:\\n\\t"\n'
                               '                     "subs %[n], %[n], #1\\n\\t"\n'
                               '                     "bne 1b" : [n] "+r"(n) : : "cc");\n',
                               "__asm__ volatile(\"1:", r"assembly loop counted by 'n' is not the first"),
    "asm_sp": ('    __asm__ volatile("sub sp, sp, #64\\n\\tadd sp, sp, #64");\n',
               "__asm__ volatile(\"sub sp", r"inline assembly .*names 'sp'"),
}


def _snippet(cond: str, construct: str) -> str:
    inner = CONSTRUCTS[construct][0]
    return (HEAD + "int entry(const int8_t *x, int n) {\n    int acc = 0;\n"
            f"#if {cond}\n{inner}#endif\n    return acc + x[0] + n;\n}}\n")


@pytest.mark.parametrize("construct", sorted(CONSTRUCTS))
@pytest.mark.parametrize("target", sorted(FAMILIES))
def test_forbidden_construct_in_target_branch_fails(tmp_path, target, construct):
    text = _snippet(FAMILIES[target], construct)
    c = tmp_path / "snippet.c"
    c.write_text(text)
    # the portable branches alone (all the proof saw before) hide it ...
    assert prove_c(c, [tmp_path], "entry", config=PORTABLE)["ok"]
    # ... the target's own configuration does not, and says where
    _, needle, pattern = CONSTRUCTS[construct]
    line = text[:text.index(needle)].count("\n") + 1
    with pytest.raises(CompilerBug) as e:
        prove_c(c, [tmp_path], "entry", config=target_config(get_target(target)))
    msg = str(e.value)
    assert re.search(pattern, msg), msg
    assert f"in function entry (snippet.c:{line})" in msg, msg
    assert f"preprocessed for {target} ({TARGETS[target].cc}" in msg, msg


# which targets' compilers take each family's branch (the M55 has the DSP extension too)
TAKEN_BY = {"cortex-m4": {"cortex-m4", "cortex-m55"}, "cortex-m55": {"cortex-m55"},
            "cortex-m3": {"cortex-m3"}, "riscv32imac": {"riscv", "riscv32imc", "riscv32imac"}}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_branch_is_taken_by_its_targets_only(tmp_path, family):
    """The matrix above is not vacuous: a branch is proved exactly where it is built."""
    c = tmp_path / "snippet.c"
    c.write_text(_snippet(FAMILIES[family], "malloc"))
    for target in ("cortex-m0", "cortex-m3", "cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55",
                   "riscv", "riscv32imc", "riscv32imac", "riscv32imafc"):
        config = target_config(get_target(target))
        taken = target in TAKEN_BY[family] or (family == "cortex-m4" and target in ("cortex-m7", "cortex-m33"))
        if taken:
            with pytest.raises(CompilerBug, match="allocator malloc"):
                prove_c(c, [tmp_path], "entry", config=config)
        else:
            assert prove_c(c, [tmp_path], "entry", config=config)["ok"], target


def test_target_features_come_from_the_target_compiler():
    m4 = features(target_config(get_target("cortex-m4")))
    m55 = features(target_config(get_target("cortex-m55")))
    m3 = features(target_config(get_target("cortex-m3")))
    assert "__ARM_FEATURE_DSP" in m4 and "__ARM_FEATURE_MVE" not in m4
    assert "__ARM_FEATURE_MVE" in m55 and "__ARM_FEATURE_DSP" in m55
    assert "__thumb2__" in m3 and "__ARM_FEATURE_DSP" not in m3
    assert features(PORTABLE) == []


def test_intrinsic_missing_from_stand_in_header_fails(tmp_path):
    """fake_include/arm_mve.h declares exactly what the generated C uses: a kernel that
    starts using another intrinsic fails until it is added (and checked) there."""
    c = tmp_path / "snippet.c"
    text = (HEAD + "#if defined(__ARM_FEATURE_MVE)\n#include <arm_mve.h>\n#endif\n"
            "int entry(const int8_t *x) {\n#if defined(__ARM_FEATURE_MVE)\n"
            "    int8x16_t v = vabsq_s8(vldrbq_s8(x));\n    return vmladavaq_s8(0, v, v);\n"
            "#else\n    return x[0];\n#endif\n}\n")
    c.write_text(text)
    with pytest.raises(CompilerBug, match=r"in function entry \(snippet.c:9\): calls vabsq_s8, "
                                          r"which is neither defined"):
        prove_c(c, [tmp_path], "entry", config=target_config(get_target("cortex-m55")))


def _inject(monkeypatch, kind: str, code: str):
    load_all()
    info = REGISTRY[kind]
    real = info.lower

    def bad_lower(op, g, ctx):
        low = real(op, g, ctx)
        low.body = code + low.body
        return low

    monkeypatch.setattr(info, "lower", bad_lower)


@pytest.mark.parametrize("target,cond", [("cortex-m4", "defined(__ARM_FEATURE_DSP)"),
                                         ("cortex-m55", "defined(__ARM_FEATURE_MVE)"),
                                         ("riscv32imac", "defined(__riscv)")])
def test_kernel_hiding_an_unbounded_loop_in_a_target_branch_fails_the_compile(models_dir, monkeypatch,
                                                                               target, cond):
    """The real pipeline: a kernel lowering that emits a while loop in a target-feature
    branch compiles for the host (the branch is not built there) and fails for the target."""
    _inject(monkeypatch, "FULLY_CONNECTED",
            f"#if {cond}\n{{ int n_ = (int)in0[0]; while (n_ > 0) {{ n_--; }} }}\n#endif\n")
    assert compile_model(models_dir / "ad01_int8.tflite", target="host").report
    with pytest.raises(CompilerBug, match=r"in function l\d+_\w+ \(ad01_int8.c:\d+\): while loop "
                                          r"has no compile-time maximum.*preprocessed for " + target):
        compile_model(models_dir / "ad01_int8.tflite", target=target)


def test_kernel_hiding_stack_asm_under_gnuc_fails_the_compile(models_dir, monkeypatch):
    _inject(monkeypatch, "FULLY_CONNECTED",
            '#if defined(__GNUC__)\n__asm__ volatile("sub sp, sp, #64\\n\\tadd sp, sp, #64");\n#endif\n')
    with pytest.raises(CompilerBug, match=r"in function l\d+_\w+ \(ad01_int8.c:\d+\): inline assembly"):
        compile_model(models_dir / "ad01_int8.tflite", target="cortex-m3")


# cortex-m4: kws's counted assembly loops are eerie_fc_mix's, those of the general convolution
# kernels eerie_conv_pair_s8 and eerie_conv_pair_s8w (helpers/gemm_dsp.c.j2 has both) and
# those of the two unrolled ones kws uses, eerie_conv_pair_s8_g10 and _g16 (gemm_dsp_g.c.j2),
# and the depthwise block functions its 4 depthwise layers share (helpers/dw_pairs.c.j2: one
# block of 5 outputs per row, one function per ring variant: 3); cortex-m55: the Helium conv kernel's loop over
# groups of 4 channels in each of kws's 5 convolutions (kernels/_mve_asm.py: conv_loop_asm)
@pytest.mark.parametrize("target,feature,asm_loops", [
    ("cortex-m4", "__ARM_FEATURE_DSP", 8), ("cortex-m55", "__ARM_FEATURE_MVE", 5),
    ("cortex-m3", "__thumb2__", 0), ("riscv32imafc", "__riscv_flen", 0), ("host", None, 0)])
def test_report_records_each_configuration_proved(models_dir, tmp_path, target, feature, asm_loops):
    compile_model(models_dir / "kws_ref_model.tflite", tmp_path / "o", target=target, name="kws")
    r = json.loads((tmp_path / "o" / "report.json").read_text())
    proof = next(v for v in r["verified"] if v["check"] == "c_source")
    configs = proof["configurations"]
    assert len(configs) == 2 and configs[0].startswith(f"{target} (") and configs[1].startswith("portable")
    per = proof["per_configuration"]
    assert set(per) == set(configs)
    if feature:
        assert feature in per[configs[0]]["features"]
    if feature and TARGETS[target].family == "arm":
        # the target build really has code only its configuration sees (RISC-V: no kernel
        # has a RISC-V branch yet; the configuration is still the target compiler's)
        assert per[configs[0]]["asm_statements"] > 0
    assert per[configs[0]]["asm_loops"] == asm_loops
    assert per[configs[1]]["asm_statements"] == 0
