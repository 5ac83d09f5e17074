"""The jinja2 environment every C template is rendered with (templates/), and the filters that
print numbers and model-supplied text into C. Below every stage that prints C (kernels, emit,
toolchain), so that none of them imports another to render.

Deterministic by construction: numbers are printed by fixed rules.
"""
from __future__ import annotations

import math
import re

import jinja2
import numpy as np

from .resources import resource_dir


def c_comment(text: str) -> str:
    """Model-supplied text made safe inside a /* */ comment (printable ASCII, no terminator)."""
    s = "".join(ch if 32 <= ord(ch) < 127 else "?" for ch in text.split(";")[0])
    s = s.replace("*/", "* /").replace("/*", "/ *")[:100]
    return re.sub(r"\?(?=\?)", "? ", s)   # no "??": C99 trigraphs (??/ is a backslash)


_ENV = None


def env() -> jinja2.Environment:
    global _ENV
    if _ENV is None:
        _ENV = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(resource_dir("templates"))),
            undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
            trim_blocks=True, lstrip_blocks=True, autoescape=False)
        _ENV.filters["cfloat"] = c_float
        _ENV.filters["ccomment"] = c_comment   # model-supplied text inside /* */
    return _ENV


def render(template: str, **ctx) -> str:
    return env().get_template(template).render(**ctx)


def c_float(v) -> str:
    v = float(np.float32(v))
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    s = "%.9g" % v
    if "e" not in s and "." not in s and "n" not in s:
        s += ".0"
    return s + "f"
