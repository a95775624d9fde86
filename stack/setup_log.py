"""The set-up log: where the tools' own output goes while FixOS sets itself up.

Set-up prints only ``[setup]`` lines; what pip, apt-get, debootstrap and the image
builds print goes to one file, ``FIXOS_SETUP_LOG`` (default ``results/setup.log``
under the working directory: the repository when ``make`` runs, where the shell
steps of ``scripts/setup-log.sh`` write the same file). Each step appends under a
header line naming it; a failing step raises :class:`SetupFailed`, whose message
names the step and the log and whose ``tail`` holds the last lines that step wrote.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from ..core.errors import SetupFailed

__all__ = ["DEFAULT_PATH", "SETUP_LOG_ENV", "TAIL_LINES", "SetupLog"]

SETUP_LOG_ENV = "FIXOS_SETUP_LOG"
DEFAULT_PATH = Path("results") / "setup.log"
TAIL_LINES = 20
ROTATE_BYTES = 4 << 20
"""past this the old log becomes ``setup.log.1`` (as scripts/setup-log.sh does)."""
NOISE = "is ignored: it is neither a file nor a directory"
"""pip's warning per package when the machine's pip configuration names missing folders:
kept in the log, left out of a failure's tail."""


class SetupLog:
    """One set-up log, opened only while a step writes to it (nothing is created before)."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path or os.environ.get(SETUP_LOG_ENV) or DEFAULT_PATH).resolve()

    @contextmanager
    def step(self, name: str, what: str) -> Iterator[TextIO]:
        """The log, appended to under a header naming the step; a :class:`SetupFailed`
        raised inside gets the lines written since the header as its tail."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists() and self.path.stat().st_size > ROTATE_BYTES:
            self.path.replace(self.path.with_name(self.path.name + ".1"))
        with self.path.open("a", encoding="utf-8", errors="replace") as out:
            start = out.tell()
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            out.write(f"=== {stamp} {name}: {what}\n")
            out.flush()
            try:
                yield out
            except SetupFailed as failed:
                out.flush()
                failed.tail = self.tail(start)
                raise

    def failed(self, step: str, problem: str) -> SetupFailed:
        """The error for a step that went wrong, naming this log (its tail is filled in by
        :meth:`step` when raised inside it)."""
        return SetupFailed(step, problem, str(self.path))

    def tail(self, start: int = 0, lines: int = TAIL_LINES) -> list[str]:
        """The last ``lines`` lines written from byte ``start`` on, pip's per-package noise left out."""
        with self.path.open("rb") as log:
            log.seek(start)
            text = log.read().decode("utf-8", errors="replace")
        kept = [line for line in text.splitlines() if NOISE not in line]
        return kept[-lines:]
