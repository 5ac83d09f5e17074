"""Keep torch quiet while eerie-c loads and decomposes a program, and say in one line what
went wrong.

torch reports problems on stderr by itself: a FutureWarning on every `torch.export.load`, a
logged traceback from the fake-tensor code before a shape error is raised, a warning with the
real deserialization error before `torch.export.load` raises a generic "check the warnings
above". The contract is one line on stderr for bad input, so around those calls every
handler of torch's loggers is replaced by one that only records, and Python warnings are
ignored. The recorded exception is then what the error message names. EERIE_C_DEBUG=1 lets
torch speak as usual.
"""
from __future__ import annotations

import logging
import os
import re
import warnings
from contextlib import contextmanager


class _Recorder(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)

    def last_exception(self) -> BaseException | None:
        """The exception of the last record that carried one (torch.export.load logs the real
        deserialization error this way before raising its own)."""
        for r in reversed(self.records):
            if r.exc_info and r.exc_info[1] is not None:
                return r.exc_info[1]
        return None


def _torch_loggers() -> list[logging.Logger]:
    names = ["torch", "torch.export", "torch._export", "torch._subclasses", "torch._dynamo",
             "torch.fx", "torch._functorch", "torch.fx.experimental.symbolic_shapes",
             "torch._subclasses.fake_tensor"]
    for n, lg in list(logging.root.manager.loggerDict.items()):
        if isinstance(lg, logging.Logger) and (n == "torch" or n.startswith("torch.")) and lg.handlers:
            names.append(n)
    return [logging.getLogger(n) for n in dict.fromkeys(names)]


@contextmanager
def quiet_torch():
    """Yields a recorder whose last_exception() is the error torch logged, if any."""
    rec = _Recorder()
    if os.environ.get("EERIE_C_DEBUG"):
        yield rec
        return
    saved = []
    for lg in _torch_loggers():
        saved.append((lg, lg.handlers[:], lg.propagate))
        # Records still reach this logger's level check; what passes is kept, not printed.
        lg.handlers = [rec]
        lg.propagate = False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield rec
    finally:
        for lg, handlers, propagate in saved:
            lg.handlers = handlers
            lg.propagate = propagate


def one_line(text: str, limit: int = 200) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[:limit] + "..."


def describe(e: BaseException) -> str:
    """A torch exception as a short phrase: the node a deserialization failed at and its cause
    instead of the whole repr of the node."""
    text = str(e)
    m = re.match(r"Failed deserializing node Node\(target='([^']*)'", text)
    cause = e.__cause__ or e.__context__
    if m:
        what = f"node {m.group(1)}"
        if isinstance(cause, KeyError):
            return f"{what} uses {one_line(repr(cause.args[0]) if cause.args else '?', 60)}, which no earlier node defines"
        if cause is not None:
            return f"{what}: {type(cause).__name__}: {one_line(cause)}"
        return f"cannot read {what}"
    # "... While executing %x : [...] = call_function[...](args = ...)": the op is enough.
    text = re.split(r"\s*While executing ", text)[0]
    m = re.search(r"call_function\[target=([^\]]+)\]", str(e))
    at = f" (at {m.group(1)})" if m else ""
    return f"{type(e).__name__}: {one_line(text)}{at}"
