"""`eerie-c check`: can this PyTorch program be compiled, and if not, which lines must change?

steps.py runs the steps in order (export, graph breaks, lowering, a whole compile in
memory); export.py, eager.py and lower.py each collect one kind of problem; findings.py
classifies them (with the fix for each kind); report.py holds the result and its text.
"""
from .steps import check, load_target  # noqa: F401
from .report import FIXES, TITLES, CheckResult, Finding  # noqa: F401
