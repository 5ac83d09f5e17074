"""The version of eerie-c (in its own module so that any stage can name it without importing
the package, which would import the API)."""
__version__ = "0.1.0"
