from .c import emit_model, render  # noqa: F401
