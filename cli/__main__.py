"""``python -m fixos.cli``: the command line without the console script."""

from .main import entry

entry()
