"""The ``fixos`` command line."""

from fixos.cli.main import main

__all__ = ["main"]
