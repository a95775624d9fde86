"""Several programs in one ``sh`` script, side by side, their output told apart: one
engine exec where each would cost one (~70 CPU-ms of the engine's apiece). For the
final verdict's restarts of a host's services and the daemons' config tests.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ..core.models import CommandResult
from .base import TIMEOUT_EXIT_CODE


def side_by_side(bodies: Sequence[str], shell: str = "/bin/sh") -> list[str]:
    """The argv of one ``shell`` script (the host's own) that runs each of ``bodies`` (the body
    of a shell function) in a subshell of its own, all side by side, and tags each line
    they print with the body's index, then ``<index> EXIT <code>`` once it ended: one
    engine exec for several programs (an exec costs the engine ~70 CPU-ms). ``Tagged``
    reads its output back. The host's shell is the image's exactly when the
    ``programs_unchanged`` gate passes, and without it no verdict counts."""
    parts = []
    for i, body in enumerate(bodies):
        parts.append(f"run_{i}() {{\n{body}\n}}")
        parts.append(
            f"( o=$(run_{i}); rc=$?; printf '%s\\n' \"$o\" | while IFS= read -r l; do "
            f"[ -n \"$l\" ] && printf '{i} %s\\n' \"$l\"; done; printf '{i} EXIT %d\\n' $rc ) &"
        )
    return [shell, "-c", "\n".join([*parts, "wait"]) + "\n"]


class Tagged:
    """The output of a ``side_by_side`` script as it comes (``feed``: ``run_program``'s
    ``on_output``), and when each body ended, counted from this object's making."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names)
        self.started = time.monotonic()
        self._lines: list[list[str]] = [[] for _ in self.names]
        self._ended: dict[int, tuple[int, float]] = {}
        self._partial = b""

    def feed(self, data: bytes) -> None:
        *whole, self._partial = (self._partial + data).split(b"\n")
        for raw in whole:
            index, _, said = raw.decode("utf-8", "replace").partition(" ")
            if not index.isdigit() or int(index) >= len(self.names):
                continue
            if said.startswith("EXIT ") and said[5:].strip().isdigit():
                self._ended[int(index)] = (int(said[5:]), time.monotonic() - self.started)
            else:
                self._lines[int(index)].append(said)

    def results(self, run: CommandResult) -> list[CommandResult]:
        """One result a body, named as given: its own code and time once it ended; else the
        script's time-out, or its failure (it did not start: a host out of PIDs)."""
        results = []
        for i, name in enumerate(self.names):
            said = "\n".join(self._lines[i])
            if i in self._ended:
                code, took = self._ended[i]
                results.append(CommandResult(name, said, code, took))
            elif run.timed_out:
                results.append(CommandResult(name, said, TIMEOUT_EXIT_CODE, run.duration, timed_out=True))
            else:
                said = said or run.output.strip()[-300:] or "ended without a word"
                results.append(CommandResult(name, said, run.exit_code or 126, run.duration))
        return results
