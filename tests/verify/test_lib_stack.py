"""lib_stack.py: library functions' stack depth read from their machine code, per multilib.
The reader on hand-written disassembly (every kind of stack decrement, calls, tail calls, and
the code it refuses to bound), and the stored table against a fresh measurement."""
from __future__ import annotations

import shutil

import pytest

from eerie_c.verify.lib_stack import depths, measure, parse
from eerie_c.verify.lib_stack_table import MULTILIB_STACK
from eerie_c.verify.stack import ARM_EXTERNAL_STACK

DIS = """
00008000 <leaf>:
    8000:\t4770      \tbx\tlr
00008010 <outer>:
    8010:\tb5f0      \tpush\t{r4, r5, r6, r7, lr}
    8012:\ted2d 8b04 \tvpush\t{d8-d9}
    8016:\tb082      \tsub\tsp, #8
    8018:\tf000 f800 \tbl\t8040 <mid>
    801c:\td001      \tbeq.n\t8022 <outer+0x12>
    801e:\tf000 b800 \tb.w\t8000 <leaf>
    8022:\tbdf0      \tpop\t{r4, r5, r6, r7, pc}
    8024:\t3f800000 \t.word\t0x3f800000
00008040 <mid>:
    8040:\te92d 4ff0 \tstmdb\tsp!, {r4, r5, r6, r7, r8, r9, sl, fp, lr}
    8044:\tf84d ed04 \tstr.w\tlr, [sp, #-4]!
    8048:\tf5ad 7d00 \tsub.w\tsp, sp, #512
    804c:\tb112      \tcbz\tr2, 8054 <mid+0x14>
    804e:\tf000 f800 \tbl\t8000 <leaf>
    8052:\tbd00      \tpop\t{pc}
00008060 <alloca_like>:
    8060:\tb580      \tpush\t{r7, lr}
    8062:\tebad 0d03 \tsub.w\tsp, sp, r3
00008070 <indirect>:
    8070:\tb510      \tpush\t{r4, lr}
    8072:\t4798      \tblx\tr3
00008080 <calls_unknown>:
    8080:\tb510      \tpush\t{r4, lr}
    8082:\tf7ff fff5 \tbl\t8070 <indirect>
00008090 <rec>:
    8090:\tb510      \tpush\t{r4, lr}
    8092:\tf7ff fffd \tbl\t8090 <rec>
"""


def test_reader_on_handwritten_disassembly():
    funcs = parse(DIS)
    assert funcs["outer"] == (20 + 16 + 8, {"mid", "leaf"})   # the beq inside outer is no call
    assert funcs["mid"] == (36 + 4 + 512, {"leaf"})
    assert funcs["alloca_like"] is None and funcs["indirect"] is None
    d = depths(funcs)
    assert d["leaf"] == 0 and d["mid"] == 552 and d["outer"] == 44 + 552
    # sp set from a register, an indirect call, a caller of either, recursion: no figure
    assert not {"alloca_like", "indirect", "calls_unknown", "rec"} & set(d)


def test_stored_table_matches_a_fresh_measurement():
    if shutil.which("arm-none-eabi-gcc") is None or shutil.which("arm-none-eabi-objdump") is None:
        pytest.fail("needs arm-none-eabi-gcc and arm-none-eabi-objdump (.ci/setup installs them)")
    # the same link as the generator's (every name at once: which library objects come in,
    # and so which same-named local functions are merged, depends on it)
    got = measure("arm-none-eabi-gcc", ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard",
                                        "-mfpu=fpv4-sp-d16"], sorted(ARM_EXTERNAL_STACK))
    table = MULTILIB_STACK["thumb/v7e-m+fp/hard"]
    assert got == table
    # with an FPU these are well under the all-multilib (soft-float) figures
    assert table["expf"] < ARM_EXTERNAL_STACK["expf"] and table["tanhf"] < ARM_EXTERNAL_STACK["tanhf"]
