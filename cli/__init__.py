"""The ``fixos`` command line."""

from .main import entry, main

__all__ = ["entry", "main"]
