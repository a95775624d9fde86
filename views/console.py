"""The Console every FixOS command prints through.

On a terminal it is rich's own (its width, colours and live views). Elsewhere (a pipe,
a file, CI logs) rich would assume 80 columns and break long lines, so an episode's
outcome line would span several lines and table rows would fold: there, text lines are
never wrapped and tables get room to keep one row a line. ``COLUMNS`` still decides the
width when set.
"""

from __future__ import annotations

import os
from typing import IO

from rich.console import Console

__all__ = ["NON_TERMINAL_WIDTH", "make_console"]

NON_TERMINAL_WIDTH = 200
"""Columns a table may take when nobody's terminal limits it; text lines ignore it."""


def make_console(*, stderr: bool = False, file: IO[str] | None = None, soft_wrap: bool = False) -> Console:
    """A Console for stdout (or stderr, or ``file``); ``soft_wrap`` also on a terminal."""
    console = Console(stderr=stderr, file=file, soft_wrap=soft_wrap)
    if console.is_terminal:
        return console
    columns = os.environ.get("COLUMNS", "")
    width = None if columns.isdigit() else NON_TERMINAL_WIDTH  # None: rich reads COLUMNS itself
    return Console(stderr=stderr, file=file, soft_wrap=True, width=width)
