"""Seeded values written into shell scripts: quoted, unless the harness wrote them as shell."""

from __future__ import annotations

import shlex
from typing import Any


class Verbatim(str):
    """A value written into a script as it is, not quoted: shell that an exporter
    wrote itself (``"$(pid_of NAME 2000)"``), never seeded text."""


def word(value: Any) -> str:
    """``value`` as one shell word: quoted, or as it is when it is ``Verbatim``."""
    return value if isinstance(value, Verbatim) else shlex.quote(str(value))


def words(values: Any) -> str:
    """Several values as shell words separated by spaces."""
    return " ".join(word(v) for v in values)
