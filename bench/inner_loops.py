"""Each layer's innermost loops, read from the firmware's disassembly (arm-none-eabi-objdump).

The firmware is built with -g (which does not change the generated code) so that objdump -l
--inlines names, for every instruction of NAME_invoke, the line of NAME_invoke it was inlined
from: the layer functions (lK_...) are `static inline`, so their code lives inside
NAME_invoke, attributed to the line of their call. Out-of-line kernels a layer calls
(eerie_fc_mix, eerie_conv_pair_s8, ...: `bl` from its code) count as the layer's too.

A loop is a backward branch (b<cond>, b, le/letp on Helium) and the instructions from its
target to the branch. The innermost loops (containing no other) are where a kernel spends
its time; for each the table gives its length and the multiply-accumulates one iteration does,
counted from the MAC instructions in it (MACS below).
"""
from __future__ import annotations

import bisect
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

# Multiply-accumulates per instruction. Scalar DSP (ARMv7E-M): SMLAD & co. do two 16x16
# products, SMLABB & co. one. MVE (Helium) on 8/16/32-bit lanes of a 128-bit vector: 16/8/4.
MACS = {"smlad": 2, "smladx": 2, "smuad": 2, "smuadx": 2, "smlald": 2, "smlaldx": 2,
        "smlsd": 2, "smlsdx": 2,
        "smlabb": 1, "smlabt": 1, "smlatb": 1, "smlatt": 1, "smlawb": 1, "smlawt": 1,
        "smulbb": 1, "smulbt": 1, "smultb": 1, "smultt": 1,
        "mla": 1, "mls": 1, "mul": 1, "muls": 1, "smlal": 1,
        "vmla.f32": 1, "vfma.f32": 1, "vmls.f32": 1}
_MVE_LANES = {"8": 16, "16": 8, "32": 4}
# (objdump prints VMLADAVA.S8 as its alias vmlava.s8; VMUL.I32 of two vectors is the multiply
# half of the depthwise kernel's multiply-accumulate, MVE having no vector-by-vector VMLA)
_MVE_MAC = re.compile(r"^v(?:mladava?x?|mlava?|mla|mlas|fma|mul)\.[sui]?(?:f)?(8|16|32)$")

_INSN = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$")
_SYMBOL = re.compile(r"^([0-9a-f]+) <([^>]+)>:$")
_INLINED = re.compile(r"^inlined by .*:(\d+)(?: \(discriminator \d+\))? \((\w+)\)$")
_SOURCE = re.compile(r"^/?\S*:(\d+)(?: \(discriminator \d+\))?$")
_TARGET = re.compile(r"\b([0-9a-f]+) <")


@dataclass
class Insn:
    addr: int
    op: str            # mnemonic without condition-width suffix handling: "smlad", "bne.n"
    args: str
    symbol: str        # the ELF function it is in
    call_line: int | None = None   # line of NAME_invoke this code was inlined from

    @property
    def macs(self) -> int:
        op = self.op.split(".")[0] if not self.op.startswith("v") else self.op
        if op in MACS:
            return MACS[op]
        m = _MVE_MAC.match(self.op)
        if m and "q" in self.args:
            return _MVE_LANES[m.group(1)]
        return MACS.get(self.op, 0)

    @property
    def branch_target(self) -> int | None:
        base = self.op.split(".")[0]
        if base in ("b", "le", "letp") or (base.startswith("b") and len(base) == 3
                                          and base not in ("bic", "bfc", "bfi", "blx")):
            m = _TARGET.search(self.args)
            return int(m.group(1), 16) if m else None
        return None


@dataclass
class Loop:
    start: int
    end: int
    insns: list[Insn] = field(default_factory=list)

    @property
    def length(self) -> int:
        return len(self.insns)

    @property
    def macs(self) -> int:
        return sum(i.macs for i in self.insns)


def disassemble(elf: Path, objdump: str = "arm-none-eabi-objdump") -> list[Insn]:
    """Every instruction of the ELF's code with its function and, inside the entry
    function, the call line it was inlined from (objdump -d -l --inlines)."""
    out = subprocess.run([objdump, "-d", "-l", "--inlines", "--no-show-raw-insn",
                          *machine_flags(elf, objdump), str(elf)],
                         capture_output=True, text=True, check=True).stdout
    return parse_objdump(out)


def machine_flags(elf: Path, objdump: str = "arm-none-eabi-objdump") -> list[str]:
    """objdump's architecture option for a Helium (MVE) ELF: without it binutils 2.40 decodes
    MVE instructions as coprocessor ones (ldc, cdp, stc), so no VMLADAVA would be counted."""
    readelf = objdump.replace("objdump", "readelf")
    if readelf == objdump:
        return []
    attrs = subprocess.run([readelf, "-A", str(elf)], capture_output=True, text=True).stdout
    return ["-marmv8.1-m.main"] if "Tag_MVE_arch: MVE" in attrs else []


def parse_objdump(out: str) -> list[Insn]:
    """disassemble's reading of `objdump -d -l --inlines --no-show-raw-insn` output."""
    insns: list[Insn] = []
    symbol, call_line, src_line = "", None, None
    for line in out.splitlines():
        m = _SYMBOL.match(line)
        if m:
            symbol, call_line, src_line = m.group(2), None, None
            continue
        m = _INLINED.match(line)
        if m:
            if m.group(2) == symbol:
                call_line = int(m.group(1))
            continue
        m = _SOURCE.match(line)
        if m:
            src_line = int(m.group(1))
            continue
        m = _INSN.match(line)
        if m and symbol and not m.group(2).startswith("."):
            # inlined code: the line of the call it was inlined from; the function's own
            # code (a call to a layer gcc did not inline): its own line
            insns.append(Insn(int(m.group(1), 16), m.group(2), m.group(3), symbol,
                              call_line if call_line is not None else src_line))
            call_line = None   # objdump repeats the inline chain before every instruction
    return insns


def call_lines(c_source: str, entry: str, functions: list[str]) -> dict[str, list[int]]:
    """Line numbers (1-based) of the calls to each of `functions` inside `entry`'s body."""
    lines = c_source.splitlines()
    start = next(i for i, ln in enumerate(lines) if re.match(rf"^\w.*\b{entry}\s*\(", ln) and not ln.rstrip().endswith(";"))
    want = {f: re.compile(rf"\b{re.escape(f)}\s*\(") for f in functions}
    found: dict[str, list[int]] = {f: [] for f in functions}
    for i in range(start + 1, len(lines)):
        if lines[i].startswith("}"):
            break
        for f, pat in want.items():
            if pat.search(lines[i]):
                found[f].append(i + 1)
    return found


def layer_code(insns: list[Insn], entry: str, lines: list[int]) -> list[Insn]:
    """The instructions of one layer: NAME_invoke's code inlined from its call lines, plus the
    functions it calls (transitively; not the entry itself)."""
    by_symbol: dict[str, list[Insn]] = {}
    for i in insns:
        by_symbol.setdefault(i.symbol, []).append(i)
    own = [i for i in insns if i.symbol == entry and i.call_line in lines]
    seen: set[str] = set()
    todo = [own]
    out = list(own)
    while todo:
        for i in todo.pop():
            if i.op.split(".")[0] == "bl":
                m = re.search(r"<([^>+]+)>", i.args)
                callee = m.group(1) if m else None
                if callee and callee != entry and callee not in seen and callee in by_symbol:
                    seen.add(callee)
                    out.extend(by_symbol[callee])
                    todo.append(by_symbol[callee])
    return out


def innermost_loops(code: list[Insn]) -> list[Loop]:
    """Loops closed by a backward branch in `code` whose every instruction is the layer's
    own (gcc interleaves the blocks of inlined layers: a backward jump into another layer's
    code is block placement, not a loop of this one), keeping those that contain no other."""
    by_addr = sorted(code, key=lambda i: i.addr)
    addrs = [i.addr for i in by_addr]
    mine = set(addrs)
    spans = []
    for i in code:
        t = i.branch_target
        if t is not None and t <= i.addr and t in mine:
            lo, hi = bisect.bisect_left(addrs, t), bisect.bisect_right(addrs, i.addr)
            body = by_addr[lo:hi]
            # contiguous: no instruction of other code between (addresses of the
            # ELF's instructions are dense, so a gap in ours is someone else's code)
            if all(b.addr - a.addr <= 4 for a, b in zip(body, body[1:])):
                spans.append((t, i.addr, body))
    inner = [s for s in spans
             if not any(o is not s and s[0] <= o[0] and o[1] <= s[1] and o[:2] != s[:2] for o in spans)]
    return [Loop(a, b, body) for a, b, body in inner]


def main_loop(loops: list[Loop]) -> Loop | None:
    """The loop a kernel's time goes to: the one with the most MACs per iteration (fewest
    instructions per MAC on a tie); without MACs, the longest."""
    with_macs = [lp for lp in loops if lp.macs]
    if with_macs:
        return max(with_macs, key=lambda lp: (lp.macs, -lp.length / lp.macs))
    return max(loops, key=lambda lp: lp.length, default=None)
