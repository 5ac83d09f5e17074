"""The one exception type users see.

Anything raised as EerieError is a problem with the user's input (unsupported op, malformed
file, budget exceeded); the CLI prints its message as one line and exits with status 2.
Any other exception is a compiler bug.
"""


class EerieError(Exception):
    pass


class CompilerBug(Exception):
    """An internal invariant failed (a verifier between stages caught it)."""
