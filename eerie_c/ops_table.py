"""`eerie-c ops`: the supported op x dtype matrix, as text or as the README's Markdown table,
read from the kernel registry (never written by hand)."""
from __future__ import annotations

import textwrap


def ops_table(markdown: bool = False) -> str:
    """The supported op x dtype matrix, straight from the kernel registry: TFLite's operators
    first, then the internal kinds that only eerie-c's passes and frontends produce. A cell is
    "yes", or the quantization scheme the dtype key stands for (SCHEMES, e.g. 16x8); an op
    marked * has output dtypes other than its input's, listed below the table."""
    import tflite
    from .kernels import SCHEMES, load_all
    from .tflm_ops import FRONTEND_OPS
    reg = load_all()
    builtin = {n for n in dir(tflite.BuiltinOperator) if n.isupper()}
    dtypes = sorted({d for k in reg.values() for d in k.dtypes})
    in_models = builtin | {k for k in reg if k.startswith("CUSTOM:")}   # custom ops by their code
    ops = sorted([k for k in reg if k in in_models] + list(FRONTEND_OPS))
    internal = sorted(k for k in reg if k not in in_models)

    def cells(kind):
        if kind in FRONTEND_OPS:   # "any", or the one dtype the frontend reads
            v = FRONTEND_OPS[kind]
            return ["any" if v == "any" else ("yes" if d == v else "") for d in dtypes]
        info = reg[kind]
        return [info.schemes.get(d, "yes") if d in info.dtypes else "" for d in dtypes]

    def name(kind):
        return kind + "*" if kind in reg and reg[kind].outputs else kind

    def pairs(k):
        by_out: dict[tuple, list[str]] = {}
        for d in sorted(reg[k].dtypes):
            by_out.setdefault(tuple(sorted(reg[k].outputs.get(d, (d,)))), []).append(d)
        return f"{k}: " + "; ".join(f"{', '.join(i)} -> {', '.join(o)}" for o, i in by_out.items())

    starred = [pairs(k) for k in ops if k in reg and reg[k].outputs]
    used = sorted({s for k in ops if k in reg for s in reg[k].schemes.values()})
    schemes = [f"{s}: {SCHEMES[s]}." for s in used]
    internal_note = ("Internal kinds (made by eerie-c's frontends and passes, never read from a "
                     "model): " + ", ".join(internal) + ". IF / WHILE / CALL_ONCE / VAR_HANDLE "
                     "(\"any\") are taken apart by the frontend into regions of CF_* markers and "
                     "static state, whatever their dtypes.")
    if markdown:
        lines = ["| op | " + " | ".join(dtypes) + " |", "|---|" + "---|" * len(dtypes)]
        lines += [f"| {name(k).replace('*', chr(92) + '*')} | " + " | ".join(cells(k)) + " |"
                  for k in ops]
        lines += [""] + [x for n in schemes for x in (n, "")]
        lines += ["\\* input -> output dtypes:", ""] + [f"- {p}" for p in starred]
        return "\n".join(lines + ["", internal_note])
    width = max(len(name(k)) for k in ops) + 2
    lines = ["op".ljust(width) + " ".join(d.ljust(8) for d in dtypes)]
    lines += [name(k).ljust(width) + " ".join((c or "-").ljust(8) for c in cells(k)) for k in ops]
    notes = [textwrap.fill(n, 100, subsequent_indent="  ") for n in schemes]
    notes += ["* input -> output dtypes:"] + \
        [textwrap.fill(p, 100, initial_indent="  ", subsequent_indent="    ") for p in starred]
    notes.append(textwrap.fill(internal_note, 100))
    return "\n".join([line.rstrip() for line in lines] + [""] + notes)
