"""Inline assembly in the generated C, for the C-source proof.

pycparser cannot parse GNU `__asm__` statements, and the stack bound cannot see what their
instructions do, so each statement is read here (template, operands) before parsing and
replaced by a marker call the AST checks see:

    __eerie_asm(K, (out0 = 0), (out1 = 0), in0, ...)          /* straight-line assembly */
    __eerie_asm_loop(K, (counter = 0), (out1 = 0), ..., in0)  /* the one accepted loop form */

Outputs appear as assignments, so the loop proof treats them as written (an asm that writes
a `for` loop's counter makes that loop unprovable), inputs as values.  K indexes
the statement's record; a rule the template breaks is recorded there and raised by the AST
check (AsmChecks.check_asm_call), so the error names the function and the source line.

Template rules (every configuration, every target):
* nothing that moves or reads the stack pointer, saves/restores registers on the stack or
  writes the program counter: sp, r13, pc, r15, rsp, esp, push/pop, vpush/vpop, ldm/stm,
  vldm/vstm, msr (it can switch the stack), svc and the like; nothing that may wait
  forever (wfi, wfe) or repeat by itself (x86 rep prefixes);
* no branch of any kind (b<cc>, bl, blx, bx, cbz, cbnz, tbb, tbh, MVE low-overhead loops
  le/letp/wls/dls and branch-future, x86 j*/call/ret/loop), no label and no assembler
  directive (`.word` and friends could hide any instruction) -- except the counted loop:

      1:                            the template's first statement, its only label
          ...                       straight-line body that never names %[n]
          subs %[n], %[n], #1       the last two statements
          bne  1b

  where [n] is an output operand with constraint "+r" bound to a plain C variable N, and the
  statement is the first statement of the then-branch of `if (N > A && N <= B)` (any order
  within a `&&` chain; `>=`, `<` and flipped forms too) with A >= 0 and B compile-time
  constants.  The body then runs N times, 1 <= N <= B: subs/bne stops when the counter
  register reaches 0, and N >= 1 rules out the 2^32-trip wrap from 0;
* `asm goto` is rejected (it jumps to C labels, which the loop proof cannot see).

RISC-V: the same rules with RISC-V's words (sp/x2, ra/x1, every branch and jump including
compressed and pseudo forms, ecall/ebreak/xRET, CSR access, fences). No kernel emits RISC-V
assembly yet (the kernels' inline assembly sits under Arm feature macros, which a RISC-V
configuration does not define), and the counted-loop form above is Arm's subs/bne only: a
RISC-V loop in inline assembly is rejected until a kernel needs one.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from pycparser import c_ast

from ..errors import CompilerBug
from .c_intervals import INT_RANGES, type_name
from .loop_bounds import _and_chain, _modifies

MARKER = "__eerie_asm"
LOOP_MARKER = "__eerie_asm_loop"

_ASM_RE = re.compile(r"\b(?:__asm__|__asm|asm)\b\s*((?:(?:__volatile__|__volatile|volatile|goto|inline)\s*)*)\(")
# Words that touch the stack or the program counter, switch stacks, trap, wait for an event
# that may never come (wfi/wfe) or loop in one instruction (x86 rep prefixes).
_DENY = re.compile(r"\b(sp|r13|pc|r15|rsp|esp|rbp|ebp|push\w*|pop\w*|vpush|vpop|stm\w*|ldm\w*|"
                   r"vstm\w*|vldm\w*|msr|svc|swi|bkpt|udf|wfi|wfe|cps\w*|int|syscall|sysenter|"
                   r"leave|enter|hlt|rep|repe|repz|repne|repnz|"
                   # RISC-V: stack pointer and return address, traps, returns from traps, CSRs
                   r"x1|x2|ra|ecall|ebreak|c\.ebreak|mret|sret|uret|dret|csr\w*|fence\w*)\b", re.I)
_COND = r"(?:eq|ne|cs|hs|cc|lo|mi|pl|vs|vc|hi|ls|ge|lt|gt|le|al)"
_BRANCH = re.compile(rf"^(?:b(?:l|lx|x|xj)?{_COND}?|cbn?z|tb[bh]|le|letp|lctp|wls|wlstp|dls|dlstp|"
                     rf"bf|bfx|bfl|bflx|bfcsel|eret|rfe\w*|j\w*|call\w*|ret\w*|iret\w*|loop\w*|"
                     # RISC-V branches and jumps beyond the Arm-shaped ones above (beq, bne,
                     # blt, bge, bgt, ble, j*, call, ret): unsigned, against zero, tail calls,
                     # compressed forms
                     rf"b(?:lt|ge|gt|le)u|b(?:eq|ne|lt|ge|gt|le)z|tail|c\.(?:j\w*|beqz|bnez))"
                     rf"(?:\.[nw])?$", re.I)
_LABEL = re.compile(r"^\s*([A-Za-z_.$][\w.$]*|\d+)\s*:(?!:)")
_OPERAND = re.compile(r'^\s*(?:\[\s*(\w+)\s*\])?\s*((?:"(?:[^"\\]|\\.)*"\s*)+)\((.*)\)\s*$', re.S)
_STR = re.compile(r'"((?:[^"\\]|\\.)*)"')


@dataclass
class AsmStmt:
    """One inline-assembly statement of the preprocessed text."""
    template: str
    line: int                                  # preprocessed line, for messages before parsing
    outputs: list = field(default_factory=list)   # [(name, constraint, C expression)]
    inputs: list = field(default_factory=list)
    error: str | None = None                   # the rule it breaks, raised by the AST check
    counter: str | None = None                 # C variable N of a counted loop


def _unescape(s: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), s)


def _outside_strings(s: str, start: int = 0, opens: str = "([", closes: str = ")]"):
    """Yield (index, char, depth) for each character of `s` from `start` that is not inside
    a string or character literal; depth counts the open brackets before the character."""
    depth, i, in_str = 0, start, None
    while i < len(s):
        ch = s[i]
        if in_str:
            if ch == "\\":
                i += 1
            elif ch == in_str:
                in_str = None
        elif ch in "\"'":
            in_str = ch
        else:
            if ch in closes:
                depth -= 1
            yield i, ch, depth
            if ch in opens:
                depth += 1
        i += 1


def _split_top(s: str, sep: str) -> list[str]:
    """Split `s` at `sep` outside strings, parentheses and brackets."""
    out, start = [], 0
    for i, ch, depth in _outside_strings(s):
        if ch == sep and depth == 0:
            out.append(s[start:i])
            start = i + 1
    out.append(s[start:])
    return out


def _operands(section: str) -> list | None:
    if not section.strip():
        return []
    out = []
    for part in _split_top(section, ","):
        m = _OPERAND.match(part)
        if m is None:
            return None
        out.append((m.group(1), "".join(_STR.findall(m.group(2))), m.group(3).strip()))
    return out


def _statements(template: str) -> list[str]:
    return [s.strip() for s in re.split(r"[\n;]", template) if s.strip()]


def classify(stmt: AsmStmt, qualifiers: str) -> None:
    """Set stmt.error (or stmt.counter for the counted-loop form) from the template rules."""
    t = stmt.template
    if "goto" in qualifiers.split():
        stmt.error = "`asm goto` jumps to C labels"
        return
    m = _DENY.search(t)
    if m:
        stmt.error = (f"names {m.group(0)!r}: it may move or read the stack pointer, use the stack, "
                      f"write the program counter, trap, wait or repeat")
        return
    stmts = _statements(t)
    labels = [s for s in stmts if _LABEL.match(s)]
    branches = []
    for s in stmts:
        body = _LABEL.sub("", s).strip()
        word = body.split(None, 1)[0] if body else ""
        if word.startswith("."):
            stmt.error = f"assembler directive {word!r} (it could emit any instruction)"
            return
        if word and _BRANCH.match(word):
            branches.append(body)
    if not labels and not branches:
        return
    counter, why = _counted_loop(stmt, stmts)
    if counter is None:
        what = f"branch {branches[0]!r}" if branches else f"label {labels[0]!r}"
        stmt.error = (f"{what}: a loop in assembly is accepted only in the counted form "
                      f"`1:` ... `subs %[n], %[n], #1` / `bne 1b` ({why})")
    else:
        stmt.counter = counter


def _counted_loop(stmt: AsmStmt, stmts: list[str]):
    """(the C counter variable, None) if `stmts` is the counted-loop form, else (None, why not)."""
    first = _LABEL.match(stmts[0]) if stmts else None
    if first is None or first.group(1) != "1":
        return None, "the template must start with label `1:`"
    rest = [_LABEL.sub("", stmts[0]).strip()] + stmts[1:]
    rest = [s for s in rest if s]
    if any(_LABEL.match(s) for s in rest):
        return None, "`1:` must be its only label"
    if len(rest) < 2 or not re.fullmatch(r"bne(?:\.[nw])?\s+1b", rest[-1]):
        return None, "the last instruction must be `bne 1b`"
    m = re.fullmatch(r"subs(?:\.[nw])?\s+%\[(\w+)\]\s*,\s*%\[(\w+)\]\s*,\s*#1", rest[-2])
    if m is None or m.group(1) != m.group(2):
        return None, "`bne 1b` must follow `subs %[n], %[n], #1`"
    name = m.group(1)
    names = [o[0] for o in stmt.outputs + stmt.inputs]
    idx = names.index(name) if name in names else -1
    if idx < 0 or idx >= len(stmt.outputs):
        return None, f"[{name}] must be an output operand"
    _, cons, expr = stmt.outputs[idx]
    if cons not in ("+r", "+l") or not re.fullmatch(r"[A-Za-z_]\w*", expr):
        return None, f"[{name}] must be a \"+r\" operand bound to a plain variable"
    ref = re.compile(rf"%[A-Za-z]?(?:\[{name}\]|{idx}(?!\d))")
    for s in rest[:-2]:
        if _BRANCH.match(s.split(None, 1)[0]):
            return None, f"the loop body has another branch {s!r}"
        if ref.search(s):
            return None, f"the loop body names the counter [{name}]"
    for _, cons, _ in stmt.inputs:
        if cons.strip() in (str(idx), f"[{name}]"):
            return None, f"an input is tied to the counter [{name}]"
    return expr, None


def scan_asm(text: str) -> tuple[str, list[AsmStmt]]:
    """Replace each inline-assembly statement of the preprocessed `text` by its marker call
    (keeping the line count, so later coordinates stay right); -> (text, statements)."""
    if MARKER in text:
        raise CompilerBug(f"C proof: the name {MARKER} is reserved for the verifier's inline-assembly markers")
    out, pos, stmts = [], 0, []
    while True:
        m = _ASM_RE.search(text, pos)
        if m is None:
            out.append(text[pos:])
            return "".join(out), stmts
        # the statement ends at the parenthesis that closes the one _ASM_RE matched
        i = len(text)    # unterminated: the C parser reports it
        for j, ch, depth in _outside_strings(text, m.end(), "(", ")"):
            if depth < 0:
                i = j + 1
                break
        body = text[m.end():i - 1]
        sections = _split_top(body, ":")
        line = text.count("\n", 0, m.start()) + 1
        stmt = AsmStmt("".join(_unescape(s) for s in _STR.findall(sections[0])), line)
        outs = _operands(sections[1]) if len(sections) > 1 else []
        ins = _operands(sections[2]) if len(sections) > 2 else []
        if outs is None or ins is None or not re.fullmatch(r'\s*(?:"(?:[^"\\]|\\.)*"\s*)*', sections[0]):
            stmt.error = "its operands could not be read"
        else:
            stmt.outputs, stmt.inputs = outs, ins
            classify(stmt, m.group(1))
        args = [str(len(stmts))] + [f"(({e}) = 0)" for _, _, e in stmt.outputs] + [f"({e})" for _, _, e in stmt.inputs]
        if stmt.counter is not None:
            k = [o[2] for o in stmt.outputs].index(stmt.counter)
            args.insert(1, args.pop(1 + k))   # the counter first, then the rest
        name = LOOP_MARKER if stmt.counter is not None and stmt.error is None else MARKER
        out.append(text[pos:m.start()])
        out.append(f"{name}({', '.join(args)})" + "\n" * text.count("\n", m.start(), i))
        stmts.append(stmt)
        pos = i


def _short(template: str) -> str:
    t = " / ".join(_statements(template))
    return repr(t if len(t) <= 72 else t[:69] + "...")


class AsmChecks:
    """The AST side of the inline-assembly rules, a mixin of c_checker.CSourceChecker.

    The host class provides `bug(node, msg)`, `ev` (an IntervalEval), `lookup_local(name)`,
    `asm` (the AsmStmt list of the file), `addr_taken` (names whose address the current
    function takes), `asm_guards` (filled here) and the counters `asm_statements`,
    `asm_loops` and `max_trips`."""

    def note_asm_guard(self, n: c_ast.If, env) -> None:
        """If `n` guards a counted assembly loop (its first statement), record the bound."""
        first = n.iftrue
        if isinstance(first, c_ast.Compound):
            first = (first.block_items or [None])[0]
        if not (isinstance(first, c_ast.FuncCall) and isinstance(first.name, c_ast.ID)
                and first.name.name == LOOP_MARKER and first.args and len(first.args.exprs) > 1):
            return
        ref = first.args.exprs[1]
        if not (isinstance(ref, c_ast.Assignment) and isinstance(ref.lvalue, c_ast.ID)):
            return
        var = ref.lvalue.name
        # nothing may change N between the test and the asm: not the condition, not the
        # other operand expressions, not a pointer to it
        if var in self.addr_taken or _modifies(n.cond, var) is not None \
                or any(_modifies(a, var) is not None for a in first.args.exprs[2:]):
            return
        lo, hi = None, None
        flip = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
        for c in _and_chain(n.cond):
            if not (isinstance(c, c_ast.BinaryOp) and c.op in flip):
                continue
            if isinstance(c.left, c_ast.ID) and c.left.name == var:
                op, other = c.op, c.right
            elif isinstance(c.right, c_ast.ID) and c.right.name == var:
                op, other = flip[c.op], c.left
            else:
                continue
            r = self.ev.interval(other, env)
            if r is None or r[0] < 0:
                continue
            if op in (">", ">="):
                lo = max(lo or 0, r[0] + (op == ">"))
            else:
                hi = min(hi if hi is not None else r[1], r[1] - (op == "<"))
        if lo is not None and lo >= 1 and hi is not None:
            self.asm_guards[id(first)] = (var, hi)

    def check_asm_call(self, n: c_ast.FuncCall) -> None:
        """A marker call: raise the rule its template broke, or check a counted loop's guard."""
        k = self.ev.const(n.args.exprs[0]) if n.args and n.args.exprs else None
        if k is None or not 0 <= k < len(self.asm):
            self.bug(n, f"{n.name.name} is reserved for the verifier's inline-assembly markers")
        stmt = self.asm[k]
        self.asm_statements += 1
        if stmt.error is not None:
            self.bug(n, f"inline assembly {_short(stmt.template)}: {stmt.error}; not verifiable")
        if stmt.counter is None:
            return
        guard = self.asm_guards.get(id(n))
        d = self.lookup_local(stmt.counter)
        tn = type_name(d) if d is not None else None
        if guard is None or guard[0] != stmt.counter:
            self.bug(n, f"inline assembly loop counted by {stmt.counter!r} is not the first statement "
                        f"of `if ({stmt.counter} > 0 && {stmt.counter} <= CONSTANT)`, so its trip count "
                        f"has no compile-time bound")
        if tn not in INT_RANGES or INT_RANGES[tn][1] > 2 ** 32 - 1 or INT_RANGES[tn][0] < -2 ** 31:
            self.bug(n, f"inline assembly loop counter {stmt.counter!r} is not a local variable of a "
                        f"32-bit or narrower integer type")
        self.asm_loops += 1
        self.max_trips = max(self.max_trips, guard[1])
