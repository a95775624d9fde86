"""Steady-state gates every scenario inherits (``fixos.scenarios.steady``): the
programs, the logs and the pages are the healthy host's.

Each records the healthy host at ``snapshot``, drops at ``refine`` what the
scenario's faults disturbed (the symptoms, which the scenario's own checks
score) and at ``evaluate`` fails on anything else that differs from healthy.
Baselines are plain JSON: the exporter writes them into a task's spec.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from typing import Any

from pydantic import Field

from ..core.models import Outcome
from .base import CHECKS, Check, CheckParams, Facts, Probe
from .http import get_page

SHOWN = 8
"""how many offending paths a verdict names before it says how many more."""


def named(paths: list[str], limit: int = SHOWN) -> str:
    """``a, b, c (+N more)``: evidence that stays one readable line."""
    more = len(paths) - limit
    return ", ".join(paths[:limit]) + (f" (+{more} more)" if more > 0 else "")


def file_changes(added: list[str], deleted: list[str], changed: list[str]) -> str:
    """``added: a; deleted: b; changed: c``, each part only when it names something ("" if none)."""
    parts = (("added", added), ("deleted", deleted), ("changed", changed))
    return "; ".join(f"{what}: {named(paths)}" for what, paths in parts if paths)


# Where programs, the libraries they load and the init scripts live; merged-/usr
# Debian links /bin, /sbin and /lib* into /usr, but a link can be replaced too.
_PROGRAM_PATHS = re.compile(
    r"^(/usr|/bin|/sbin|/lib[^/]*|/etc/init\.d|/etc/ld\.so\.preload|/etc/ld\.so\.conf[^/]*)(/|$)"
)


def _watched(changes: dict[str, str]) -> dict[str, str]:
    return {path: kind for path, kind in changes.items() if _PROGRAM_PATHS.match(path)}


@CHECKS.register
class ProgramsUnchanged(Check):
    """No program, library, loader setting or init script differs from the image,
    beyond what the healthy host and the faults changed, as the engine's
    ``docker diff`` lists it: a forged ``service``, ``ps`` or ``bash`` and an
    ``ld.so.preload`` fail here, whatever the host's own tools say.

    A directory reads changed whenever something below it did: one is judged
    only when nothing below it is listed (its own owner or mode changed).
    """

    type = "programs_unchanged"

    def _changes(self, probe: Probe) -> dict[str, str] | None:
        changes = getattr(probe.access, "changes", None)
        return None if changes is None else _watched(changes())

    def snapshot(self, probe: Probe) -> Any:
        return self._changes(probe)

    def refine(self, probe: Probe, baseline: Any) -> Any:
        now = self._changes(probe)
        if baseline is None or now is None:
            return baseline
        return {**now, **baseline}

    def facts(self, facts: Facts, baseline: Any) -> bytes | None:
        # Its outcome follows from which entries the host's upper layer holds and their
        # types (a whiteout is a deletion); a path outside the program trees only makes it
        # look again.
        return facts.files(["/"], contents=False)

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        now = self._changes(probe)
        if now is None or baseline is None:
            # The exported verifier runs inside the host and has no engine to ask.
            return Outcome(True, "not judged: this verifier has no view of the container engine")
        listed = sorted(now)
        unexplained = []
        for path in listed:
            if path in baseline:
                continue
            if now[path] == "C" and any(other.startswith(path + "/") for other in listed):
                continue  # a directory with a changed child: the child is judged
            unexplained.append(
                f"{'added' if now[path] == 'A' else 'deleted' if now[path] == 'D' else 'changed'} {path}"
            )
        if unexplained:
            return Outcome(False, "programs differ from the image: " + named(unexplained))
        return Outcome(True, "programs, libraries, loader and init scripts as on the healthy host")


class LogsParams(CheckParams):
    paths: list[str] = [
        "/var/log/nginx/access.log",
        "/var/log/nginx/error.log",
        "/var/log/nginx/shop.access.log",
        "/var/log/nginx/shop.error.log",
        "/var/log/mysql/error.log",
        "/var/log/php8.2-fpm.log",
    ]
    root: str = ""
    """where the host's filesystem is seen from (empty: the host's own shell)."""


@CHECKS.register
class LogsKept(Check):
    """The logs the site writes still exist as files: freeing space means emptying
    or rotating a log, not deleting it. A log the faults deleted is the
    scenario's to judge."""

    type = "logs_kept"
    # A config test (`nginx -t`, another check) reopens and so recreates a deleted log.
    alone = True
    Params = LogsParams

    def _present(self, probe: Probe) -> list[str]:
        root = probe.root + self.params.root  # the vantage point's view of the host
        tests = "; ".join(
            f"[ -f {shlex.quote(root + p)} ] && builtin echo {shlex.quote(p)}" for p in self.params.paths
        )
        out = probe.shell.run(tests + "; true", timeout=10).output
        return [p for p in out.splitlines() if p in self.params.paths]

    def snapshot(self, probe: Probe) -> Any:
        return self._present(probe)

    def refine(self, probe: Probe, baseline: Any) -> Any:
        now = set(self._present(probe))
        return [p for p in baseline if p in now]

    def facts(self, facts: Facts, baseline: Any) -> bytes | None:
        # whether each log is there, as a file: its entry (type, mode, owners) and those above
        return facts.files((), contents=False, entries=self.params.paths)

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        now = set(self._present(probe))
        missing = [p for p in baseline if p not in now]
        if missing:
            return Outcome(False, "deleted: " + named(missing))
        return Outcome(True, f"all {len(baseline)} logs present")


def _page(probe: Probe, port: int, path: str) -> str:
    """``STATUS SHA256`` of the page as served from outside, or ``0 why`` when nothing answered."""
    resp = get_page(probe, port, path)
    if resp.status == 0:
        return f"0 {resp.error}"
    return f"{resp.status} {hashlib.sha256(resp.body).hexdigest()}"


@CHECKS.register
class PagesUnchanged(Check):
    """Every page the healthy host served is served the same, byte for byte, from outside."""

    type = "pages_unchanged"

    class Params(CheckParams):
        paths: list[str] = Field(default=["/", "/status", "/style.css"], min_length=1)
        port: int = 80

    def snapshot(self, probe: Probe) -> Any:
        return {path: _page(probe, self.params.port, path) for path in self.params.paths}

    def refine(self, probe: Probe, baseline: Any) -> Any:
        return {path: seen for path, seen in baseline.items() if _page(probe, self.params.port, path) == seen}

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        differ = []
        for path, healthy in baseline.items():
            now = _page(probe, self.params.port, path)
            if now != healthy:
                status = now.split(" ", 1)[0]
                differ.append(
                    f"{path} ({'no answer' if status == '0' else status + ', not the healthy page'})"
                )
        if differ:
            return Outcome(False, "pages differ from the healthy host's: " + named(differ))
        left = [p for p in self.params.paths if p not in baseline]
        judged = f"{len(baseline)} page(s) as the healthy host served them"
        return Outcome(
            True, judged + (f"; {named(left)} left to the scenario (the faults changed them)" if left else "")
        )
