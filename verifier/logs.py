"""Checks on log rotation: the host's logrotate configuration rotates a log before
it fills its filesystem, and a log that had grown was rotated, its lines kept.

The configuration is judged by the inspector's own logrotate (images/inspector),
never the host's: in debug mode (``-d``: it reads, reports and rotates nothing,
runs no script) over a copy of the host's /etc/logrotate.conf and
/etc/logrotate.d in the inspector's /tmp, their /var/log paths moved to a
mirror of the host's /var/log made of empty files, where the judged log is a
sparse file as big as its filesystem, last rotated years ago. So the verdict is
logrotate's own reading of the host's files: a syntax error, a wrong path, a
size threshold no log on that filesystem reaches all leave the log unrotated.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from pydantic import Field

from ..core.models import Outcome
from .base import CHECKS, Check, CheckParams, Probe

# $R: where the host's files are; $LOG: the judged log; prints logrotate's debug output
# with the scratch directory's prefix taken out, so paths read as the host's.
_DRY_RUN = r"""
S=$(mktemp -d "${TMPDIR:-/tmp}/logrotate.XXXXXX") || exit 1
mkdir -p "$S/etc/logrotate.d" "$S/var/log"
cp -p "$R/etc/logrotate.conf" "$S/etc/" 2>/dev/null
# logrotate ignores a file not owned by root (it keeps mode, which it also judges).
for f in "$R"/etc/logrotate.d/*; do
  [ -f "$f" ] && [ "$(stat -c %u "$f")" = 0 ] && cp -p "$f" "$S/etc/logrotate.d/" 2>/dev/null
done
for f in "$S/etc/logrotate.conf" "$S"/etc/logrotate.d/*; do
  [ -f "$f" ] && sed -i "s#/etc/logrotate\.d#$S/etc/logrotate.d#g; s#/var/log#$S/var/log#g" "$f"
done
(cd "$R/var/log" && find . -type d | head -n 500) | while IFS= read -r d; do mkdir -p "$S/var/log/$d"; done
(cd "$R/var/log" && find . -type f | head -n 2000) | while IFS= read -r f; do : > "$S/var/log/$f"; done
mkdir -p "$S$(dirname "$LOG")"
truncate -s "$(stat -f -c '%S * %b' "$R/var/log" | awk '{print $1 * $3}')" "$S$LOG"
printf 'logrotate state -- version 2\n"%s" 2020-1-1-0:0:0\n' "$S$LOG" > "$S/state"
logrotate -d -s "$S/state" "$S/etc/logrotate.conf" 2>&1 | sed "s#$S##g"
rm -rf "$S"
"""


def _verdict(output: str, log: str) -> str:
    """logrotate's word on ``log``: the line after it was considered, or ''."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == f"considering log {log}":
            for after in lines[i + 1 :]:
                if re.search(
                    r"needs rotating|does not need|skipping|^considering|^rotating pattern", after.strip()
                ):
                    return after.strip()
    return ""


def _unknown_names(probe: Probe) -> set[str]:
    """The users and groups the host has: logrotate here knows only the inspector's own."""
    out = probe.shell.run(f"cut -d: -f1 {probe.path('/etc/passwd')} {probe.path('/etc/group')}", timeout=10)
    return set(out.output.split())


@CHECKS.register
class LogrotateRotates(Check):
    """The host's logrotate configuration reads without errors and rotates ``log``
    once it is as big as its filesystem (last rotated long ago)."""

    type = "logrotate_rotates"

    class Params(CheckParams):
        log: str = "/var/log/nginx/shop.access.log"

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        root = probe.path("/").rstrip("/")
        env = f"R={shlex.quote(root)} LOG={shlex.quote(self.params.log)}"
        out = probe.shell.run(f"{env} bash -c {shlex.quote(_DRY_RUN)}", timeout=30).output
        known = _unknown_names(probe)
        errors = [
            line
            for line in out.splitlines()
            if line.startswith("error:")
            # a user or group the host has (the inspector's /etc/passwd lacks mysql, say)
            and not any(f"unknown {kind} '{name}'" in line for kind in ("user", "group") for name in known)
        ]
        verdict = _verdict(out, self.params.log)
        if errors:
            return Outcome(False, "logrotate: " + "; ".join(e[len("error: ") :] for e in errors[:3]))
        if "needs rotating" not in verdict:
            return Outcome(
                False, f"logrotate would not rotate {self.params.log}: {verdict or 'no rule for it'}"
            )
        return Outcome(
            True, f"logrotate reads the config and rotates {self.params.log} before it fills the disk"
        )


@CHECKS.register
class LogRotated(Check):
    """``log`` is at most ``max_mb`` and the lines it held when the agent started are in
    a rotated copy beside it (``log.1``, ``log.1.gz``, ``log-DATE``...): rotated, not
    emptied or deleted."""

    type = "log_rotated"

    class Params(CheckParams):
        log: str = "/var/log/nginx/shop.access.log"
        max_mb: int = Field(default=4, ge=1)

    def _first_line(self, probe: Probe) -> str:
        return probe.shell.run(f"head -n 1 {shlex.quote(probe.path(self.params.log))}", timeout=10).output

    def refine(self, probe: Probe, baseline: Any) -> Any:
        return self._first_line(probe).strip()

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        path = shlex.quote(probe.path(self.params.log))
        size = probe.shell.run(f"stat -c %s {path}", timeout=10).output.strip()
        if not size.isdigit():
            return Outcome(False, f"{self.params.log} is gone")
        if int(size) > self.params.max_mb * 1024 * 1024:
            return Outcome(False, f"{self.params.log} is still {int(size) // 1048576} MB")
        if not baseline:
            return Outcome(True, f"{self.params.log} is {size} bytes")
        heads = probe.shell.run(
            f'for f in {path}?* {path}-*; do [ -f "$f" ] || continue; '
            'case "$f" in *.gz) zcat -- "$f" 2>/dev/null | head -n 1;; *) head -n 1 -- "$f";; esac; done',
            timeout=30,
        ).output
        if baseline not in (line.strip() for line in heads.splitlines()):
            return Outcome(
                False, f"{self.params.log} is {size} bytes but no rotated copy holds its old lines"
            )
        return Outcome(True, f"{self.params.log} rotated: {size} bytes, its old lines in a rotated copy")
