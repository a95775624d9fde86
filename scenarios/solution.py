"""Reference solutions may name what the seed drew: ``{{ f0.file }}`` is the
``file`` the first fault recorded, shell-quoted. Dotted paths reach into lists
and mappings (``{{ f2.processes.0.pid }}``)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import Any

from fixos.core.errors import InvalidEpisode
from fixos.core.models import InjectedFault


class Verbatim(str):
    """A value written into the script as it is, not quoted: shell that an
    exporter wrote itself (``"$(pid_of NAME 2000)"``), never seeded text."""


_PLACEHOLDER = re.compile(r"\{\{\s*f(\d+)\.([\w.]+)\s*\}\}")


def _lookup(value: Any, path: str) -> Any:
    for part in path.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def render(script: str, faults: Sequence[InjectedFault]) -> str:
    def substitute(match: re.Match[str]) -> str:
        index, path = int(match.group(1)), match.group(2)
        try:
            value = _lookup(faults[index].seeded, path)
            return value if isinstance(value, Verbatim) else shlex.quote(str(value))
        except (IndexError, KeyError, ValueError, TypeError):
            raise InvalidEpisode(f"solution names {match.group(0)}, which no fault recorded") from None

    return _PLACEHOLDER.sub(substitute, script)
