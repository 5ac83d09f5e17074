"""eerie-c: compile a trained neural network into one standalone C file for microcontrollers."""
__version__ = "0.1.0"

from .errors import EerieError  # noqa: E402,F401
