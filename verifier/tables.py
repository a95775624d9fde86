"""Checks that a repair kept what the host held: a table's rows, and its cron jobs."""

from __future__ import annotations

import shlex
from typing import Any

from ..core.models import Outcome
from .base import CHECKS, Check, CheckParams, Probe

# Every place Debian's cron reads a job from, fast or slow.
CRON_PLACES = ["/etc/crontab", "/etc/cron.d", "/var/spool/cron/crontabs"]


def _table_state(probe: Probe, table: str) -> tuple[str, str] | str:
    """(row count, content checksum) of ``table``, or the server's error."""
    query = f"SELECT COUNT(*) FROM {table}; CHECKSUM TABLE {table} EXTENDED"
    out = probe.sql(query, connect_timeout=None)
    lines = out.output.strip().splitlines()
    if out.exit_code != 0 or len(lines) != 2:
        return out.output.strip()[-200:] or f"mariadb exited {out.exit_code}"
    return lines[0].strip(), lines[1].partition("\t")[2].strip()


@CHECKS.register
class TableIntact(Check):
    """``table`` answers queries and holds every row it held on the healthy host:
    the same row count and the same CHECKSUM TABLE ... EXTENDED (computed from
    the rows, so a table emptied or rebuilt from fewer rows differs)."""

    type = "table_intact"

    class Params(CheckParams):
        table: str

    def snapshot(self, probe: Probe) -> Any:
        state = _table_state(probe, self.params.table)
        if isinstance(state, str):
            raise RuntimeError(f"cannot read {self.params.table} on the healthy host: {state}")
        return list(state)

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        state = _table_state(probe, self.params.table)
        if isinstance(state, str):
            return Outcome(False, f"{self.params.table} cannot be read: {state}")
        rows, checksum = state
        seen = f"{self.params.table}: {rows} rows, checksum {checksum}"
        if [rows, checksum] != baseline:
            return Outcome(False, f"{seen}; the healthy host had {baseline[0]} rows, checksum {baseline[1]}")
        return Outcome(True, seen)


def _cron_jobs(probe: Probe) -> list[str]:
    """Every active line (not blank, not a comment, not a variable) of every
    crontab cron reads, as ``path: line``, from the looking side's own tools."""
    places = " ".join(shlex.quote(probe.path(p)) for p in CRON_PLACES)
    out = probe.shell.run(
        f"find {places} -maxdepth 1 -type f ! -name '.*' -print0 2>/dev/null | "
        "xargs -0 -r awk '!/^[[:space:]]*(#|$)/ && !/^[[:space:]]*[A-Za-z_]+[[:space:]]*=/ "
        '{ print FILENAME ": " $0 }\'',
        timeout=15,
    ).output
    root = probe.path("/")[:-1]
    return sorted(line[len(root) :] if root and line.startswith(root) else line for line in out.splitlines())


@CHECKS.register
class CronJobsUnchanged(Check):
    """Cron runs the healthy host's jobs and nothing else: a job added since
    (wherever cron reads it) is still scheduled, and a healthy job removed is a
    lost job. Commenting a job out counts as removing it."""

    type = "cron_jobs_unchanged"

    def snapshot(self, probe: Probe) -> Any:
        return _cron_jobs(probe)

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        now = _cron_jobs(probe)
        added = [j for j in now if j not in baseline]
        lost = [j for j in baseline if j not in now]
        problems = [f"scheduled since: {'; '.join(added)[:300]}"] if added else []
        problems += [f"healthy jobs gone: {'; '.join(lost)[:300]}"] if lost else []
        return Outcome(not problems, "; ".join(problems) or f"{len(now)} healthy cron jobs, nothing added")
