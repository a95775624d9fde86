"""Checks on the host as a whole: disk, CPU, the daemons that should be alive, paths."""

from __future__ import annotations

import shlex
from typing import Any, Literal

from pydantic import Field

from ..core.models import Outcome
from ..shells.probes import sample_cpu
from .base import CHECKS, Check, CheckParams, Facts, Probe
from .vantage import filesystem_use_command

# Processes that come and go on any host, or belong to the verifier itself.
_TRANSIENT = {"bash", "sh", "sleep", "ps", "awk", "cat", "setsid", "sed", "grep", "perl", "curl"}


@CHECKS.register
class DiskUsage(Check):
    """The filesystem holding ``path`` is at most ``max_percent`` full, as ``df`` shows
    it: in space, or (``metric: inodes``) in inodes, as ``df -i`` shows it."""

    type = "disk_usage"

    class Params(CheckParams):
        path: str = "/var/log"
        max_percent: int = Field(default=95, ge=1, le=100)
        metric: Literal["space", "inodes"] = "space"

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        command = filesystem_use_command(self.params.path, self.params.metric, probe.root)
        out = probe.shell.run(f"(set -o pipefail; {command}) 2>&1", timeout=10)  # not for the whole session
        text = out.output.strip().rstrip("%")
        if out.exit_code != 0 or not text.isdigit():
            return Outcome(False, f"cannot measure {self.params.path}: {out.output.strip()[:200]}")
        pct = int(text)
        what = "full" if self.params.metric == "space" else "of inodes used"
        return Outcome(pct <= self.params.max_percent, f"{self.params.path} is {pct}% {what}")


@CHECKS.register
class NoCpuHog(Check):
    """No process wants more than ``max_percent`` of a core over a half-second sample
    (time on a CPU plus time waiting for one: a hog on a busy machine still shows).
    For the final verdict, only what is busy in a second sample too: a service the
    agent has just (re)started is busy for a moment, a hog all the time."""

    type = "no_cpu_hog"
    alone = True  # HTTP and SQL checks make nginx, php-fpm and MariaDB busy

    class Params(CheckParams):
        max_percent: int = Field(default=30, ge=1, le=100)

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        hogs = self._busy(probe)
        if hogs and probe.patient:
            again = self._busy(probe)
            hogs = {pid: what for pid, what in again.items() if pid in hogs}
        if hogs:
            return Outcome(False, "busy: " + ", ".join(hogs.values()))
        return Outcome(True, f"no process above {self.params.max_percent}% of a core")

    def _busy(self, probe: Probe) -> dict[int, str]:
        return {
            row.pid: f"{row.comm} (PID {row.pid}) at {row.percent}%"
            for row in sample_cpu(probe.shell)
            if row.percent > self.params.max_percent
        }


def _daemons(probe: Probe) -> set[str]:
    """The names of the host's programs, but for what cron runs for a job: Debian's
    php sessionclean (php8.2, sort) at :09 and :39 once ran through a healthy snapshot
    and had ended by its proof ("killed or stopped: php8.2, sessionclean, sort")."""
    table: dict[int, tuple[int, str]] = {}
    local = probe.process_table()
    if local is not None:  # from this machine: no ps in the judge
        table = {p.pid: (p.ppid, p.comm) for p in local}
    else:
        for line in probe.shell.run("ps -eo pid=,ppid=,comm=", timeout=10).output.splitlines():
            parts = line.split(None, 2)
            if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit():
                table[int(parts[0])] = (int(parts[1]), parts[2].strip())

    def cron_job(pid: int) -> bool:  # under cron's per-job child (a cron whose parent is cron)
        for _ in range(16):
            if pid not in table:
                return False
            ppid, name = table[pid]
            if name == "cron" and table.get(ppid, (0, ""))[1] == "cron":
                return True
            pid = ppid
        return False

    # runc:[N:INIT] is an exec into the host (a session, an inspector) caught mid-start.
    names = {n for pid, (_, n) in table.items() if n and not n.startswith("runc:") and not cron_job(pid)}
    return names - _TRANSIENT


@CHECKS.register
class ProcessesIntact(Check):
    """Only culprits were killed: every program that ran both on the healthy host and
    when the agent started still runs (a service the faults took down may stay down
    here; the scored checks judge that)."""

    type = "processes_intact"
    # The other checks' probes start programs in the host: services_official's config
    # test is a `mariadbd --help`, which a listing beside it would record as MariaDB
    # running (split_2's refine did, then the partial repair "stopped" it: 0).
    alone = True

    class Params(CheckParams):
        ignore: list[str] = []

    def snapshot(self, probe: Probe) -> Any:
        return sorted(_daemons(probe) - set(self.params.ignore))

    def refine(self, probe: Probe, baseline: Any) -> Any:
        return sorted(set(baseline) & _daemons(probe))

    def facts(self, facts: Facts, baseline: Any) -> bytes | None:
        return facts.processes()

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        missing = sorted(set(baseline or []) - _daemons(probe))
        if missing:
            return Outcome(False, "killed or stopped: " + ", ".join(missing))
        return Outcome(True, f"all {len(baseline or [])} innocent programs still run")


@CHECKS.register
class PathsExist(Check):
    """These files and directories still exist (the agent freed space without deleting them)."""

    type = "paths_exist"

    class Params(CheckParams):
        paths: list[str] = Field(min_length=1)

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        tests = "; ".join(
            f"[ -e {shlex.quote(probe.path(p))} ] || builtin echo {shlex.quote(p)}" for p in self.params.paths
        )
        missing = probe.shell.run(f"({tests})", timeout=10).output.split()
        if missing:
            return Outcome(False, "missing: " + ", ".join(missing))
        return Outcome(True, f"{len(self.params.paths)} path(s) present")


@CHECKS.register
class NoMemoryHog(Check):
    """No process holds more than ``max_mb`` of resident memory."""

    type = "no_memory_hog"

    class Params(CheckParams):
        max_mb: int = Field(default=150, ge=1)

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        rows = probe.shell.run("ps -eo rss=,pid=,comm=", timeout=10).output.splitlines()
        hogs = []
        for row in rows:
            parts = row.split(None, 2)
            if len(parts) == 3 and parts[0].isdigit() and int(parts[0]) // 1024 > self.params.max_mb:
                hogs.append(f"{parts[2]} (PID {parts[1]}) {int(parts[0]) // 1024} MB")
        if hogs:
            return Outcome(False, "holding memory: " + ", ".join(hogs))
        return Outcome(True, f"no process above {self.params.max_mb} MB")


@CHECKS.register
class PathPermissions(Check):
    """Paths have the expected owner and are not writable by everyone (no `chmod 777` fixes).

    Owners are compared by number: the owner's uid is the one the healthy host's
    /etc/passwd gave it (the verifier's own passwd has no ``mysql``, and the
    agent can edit the host's)."""

    type = "path_permissions"

    class Params(CheckParams):
        paths: list[str] = Field(min_length=1)
        owner: str | None = None

    def snapshot(self, probe: Probe) -> Any:
        if self.params.owner is None:
            return None
        owners = _users(probe)
        if self.params.owner not in owners:
            raise RuntimeError(f"the healthy host has no user {self.params.owner!r}")
        return {"uid": owners[self.params.owner]}

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        uid = None
        if self.params.owner is not None:
            uid = baseline["uid"] if baseline else _users(probe).get(self.params.owner, -1)
        problems = []
        for path in self.params.paths:
            f = probe.host.file(probe.path(path))
            if not f.exists:
                problems.append(f"{path} missing")
                continue
            if uid is not None and f.uid != uid:
                problems.append(f"{path} owned by {_name_of(probe, f.uid)}")
            if f.mode & 0o002:
                problems.append(f"{path} is world-writable ({f.mode:o})")
        if problems:
            return Outcome(False, "; ".join(problems))
        return Outcome(True, f"{len(self.params.paths)} path(s) with sane owner and mode")


def _users(probe: Probe) -> dict[str, int]:
    """user name -> uid, from the host's /etc/passwd read through the engine."""
    passwd = (probe.access.read_file("/etc/passwd") or b"").decode("utf-8", "replace")
    users: dict[str, int] = {}
    for line in passwd.splitlines():
        fields = line.split(":")
        if len(fields) > 2 and fields[2].isdigit():
            users.setdefault(fields[0], int(fields[2]))
    return users


def _name_of(probe: Probe, uid: int) -> str:
    """``uid`` as the host's /etc/passwd names it now (evidence only: judged by number)."""
    names = {number: name for name, number in _users(probe).items()}
    return names.get(uid, f"uid {uid}")
