"""bench/profile_layers.py and bench/inner_loops.py: the per-layer table (QEMU instructions,
MACs, the kernel's innermost loop from the disassembly). Runs the real path on the bundled
tiny model; no figure is asserted beyond what the code guarantees."""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import inner_loops  # noqa: E402
import profile_layers  # noqa: E402

OBJDUMP = """
00000100 <m_invoke>:
m_invoke():
/x/m.c:50
     100:\tpush\t{r4, lr}
l0_conv():
/x/m.c:10
inlined by /x/m.c:52 (m_invoke)
     102:\tldr\tr3, [r0, #0]
inlined by /x/m.c:52 (m_invoke)
     104:\tsmlad\tr4, r3, r2, r4
inlined by /x/m.c:52 (m_invoke)
     108:\tsmlabb\tr5, r3, r2, r5
inlined by /x/m.c:52 (m_invoke)
     10c:\tsubs\tr1, #1
inlined by /x/m.c:52 (m_invoke)
     10e:\tbne.n\t102 <m_invoke+0x2>
l1_fc():
/x/m.c:20
inlined by /x/m.c:53 (m_invoke)
     110:\tbl\t200 <helper>
m_invoke():
/x/m.c:54
     114:\tpop\t{r4, pc}
     116:\t.word\t0x12345678

00000200 <helper>:
helper():
/x/m.c:30
     200:\tvmladava.s8\tr0, q0, q1
     204:\tle\tlr, 200 <helper>
     208:\tbx\tlr
"""


def test_objdump_reading_and_loops():
    insns = inner_loops.parse_objdump(OBJDUMP)
    assert [i.call_line for i in insns if i.symbol == "m_invoke"] == [50, 52, 52, 52, 52, 52, 53, 54]
    src = "int x;\nvoid m_invoke(void)\n{\n    l0_conv();\n    l1_fc();\n}\n"
    lines = inner_loops.call_lines(src, "m_invoke", ["l0_conv", "l1_fc"])
    assert lines == {"l0_conv": [4], "l1_fc": [5]}
    conv = inner_loops.layer_code(insns, "m_invoke", [52])
    (loop,) = inner_loops.innermost_loops(conv)
    assert (loop.start, loop.end, loop.length, loop.macs) == (0x102, 0x10e, 5, 3)
    fc = inner_loops.layer_code(insns, "m_invoke", [53])   # its bl target is its code too
    assert {i.symbol for i in fc} == {"m_invoke", "helper"}
    (loop,) = inner_loops.innermost_loops(fc)
    assert loop.macs == 16 and loop.length == 2
    assert inner_loops.main_loop([]) is None


def test_profile_tiny_conv_on_m4(capsys):
    assert profile_layers.main([str(REPO / "examples" / "tiny_conv.tflite"), "--markdown"]) == 0
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.startswith("| ")]
    assert rows[0] == "| " + " | ".join(profile_layers.COLUMNS) + " |"
    conv = [r.strip("|").split("|") for r in rows[1:] if "| CONV_2D |" in r]
    assert conv, out
    cells = [c.strip() for c in conv[0]]
    assert int(cells[3].replace(",", "")) > 0            # instructions measured
    assert int(cells[8]) > 0 and float(cells[9]) > 0     # a MAC loop found in its kernel


def test_profile_tiny_conv_on_m55_counts_helium_macs(capsys):
    """On the M55 the conv kernel's loop is Helium code: objdump must decode it as MVE
    (inner_loops.machine_flags), so VMLADAVA is seen doing 16 MACs."""
    assert profile_layers.main([str(REPO / "examples" / "tiny_conv.tflite"), "--board", "mps3-an547",
                                "--markdown"]) == 0
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.startswith("| ")]
    conv = [[c.strip() for c in r.strip("|").split("|")] for r in rows[1:] if "| CONV_2D |" in r]
    assert conv, out
    assert int(conv[0][8]) % 16 == 0 and int(conv[0][8]) >= 16, out
