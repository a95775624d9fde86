"""The gate of a host the agent must leave as it found it: a fault-free control (nothing is
broken; the right repair is none) and the report-only task levels (detect, localise,
diagnose: look, say what is wrong, change nothing).

No other gate sees a service merely restarted, or a configuration written back the
same: both leave every file's contents and every page as they were. This one compares
the host with itself as the agent found it (recorded once the faults were in:
``refine``), by what no one in the host can set back:

- each service's main process, by PID and start time (the kernel's clock, read from
  the host's /proc): a restart, even to the same configuration, gives a new one;
- every entry the host changed against its image (the overlay's upper directory, and
  its own mounts), by owner, mode, type and, for a file, size, inode and change time
  (``touch -r`` sets the modification time, never the change time).

Left out, as the host writes them on its own while the agent looks: ``/run``,
``/tmp``, ``/var/tmp``, ``/var/log`` (the knocks of ``auth_demanded`` land in MariaDB's
error log; ``logs_kept`` judges the logs), MariaDB's and PHP's data directories (the
tables are ``database_unchanged``'s), the state of the host's own background programs
(``KEPT_OUT``), a directory's times (a file created in it changes
them: the file itself is judged), and the shells' and clients' history files. Where
this machine cannot read the host's layers (a remote engine), the engine's ``docker
diff`` names the changed paths and the judge's session their change times.
"""

from __future__ import annotations

import shlex
import stat
from typing import Any

from ..core.models import Outcome
from .base import CHECKS, Check, CheckParams, Probe
from .steady import named
from .vantage import SERVICE_DAEMONS, under

KEPT_OUT = (
    "/run",
    "/var/run",
    "/tmp",
    "/var/tmp",
    "/var/log",
    "/var/lib/mysql",
    "/var/lib/php/sessions",
    # the healthy host's own background programs keep their state here: the metrics agent
    # every 60 s, the log shipper's offsets every 30 s, the backup job's dumps (a first run
    # of this gate failed on an oracle that touched nothing, 30 s after the shipper wrote)
    "/var/lib/nodewatch",
    "/var/lib/log-shipper",
    "/var/backups",
)
"""trees the host writes on its own: not the agent's doing, and judged by other gates."""
HISTORIES = frozenset(
    f"/root/{name}"
    for name in (".bash_history", ".mysql_history", ".lesshst", ".python_history", ".wget-hsts", ".viminfo")
)
"""what looking leaves behind: an interactive shell's or client's history."""


def _watched(path: str) -> bool:
    return path not in HISTORIES and not any(path == t or path.startswith(t + "/") for t in KEPT_OUT)


class UntouchedParams(CheckParams):
    services: list[str] = list(SERVICE_DAEMONS)
    """the services whose main process must stay the one the agent found (those not running
    then must stay down)."""


@CHECKS.register
class Untouched(Check):
    """The host is as the agent found it: no service restarted, no file written."""

    type = "untouched"
    Params = UntouchedParams

    def _processes(self, probe: Probe) -> dict[str, str]:
        """Per service, ``PID@start`` of the process its pid file names ("" when none lives)."""
        params: UntouchedParams = self.params  # type: ignore[assignment]
        files = {s: SERVICE_DAEMONS[s][0] for s in params.services if s in SERVICE_DAEMONS}
        pids = {}
        for service, path in files.items():
            text = (probe.access.read_file(path) or b"").decode("ascii", "replace").strip()
            pids[service] = text if text.isdigit() else ""
        wanted = sorted({p for p in pids.values() if p})
        starts: dict[str, str] = {}
        if wanted and getattr(probe.access, "reads_locally", False):
            read = probe.access.read_files  # type: ignore[attr-defined]
            stats = read([f"/proc/{p}/stat" for p in wanted])
            texts = {p: (stats.get(f"/proc/{p}/stat") or b"").decode("ascii", "replace") for p in wanted}
        elif wanted:  # the judge's session lists the host's own /proc
            script = "; ".join(f"echo {p} $(cat /proc/{p}/stat 2>/dev/null)" for p in wanted)
            lines = probe.shell.run(script, timeout=10).output.splitlines()
            texts = {line.split(" ", 1)[0]: line.partition(" ")[2] for line in lines if " " in line}
        else:
            texts = {}
        for pid, text in texts.items():
            fields = text.rsplit(")", 1)
            rest = fields[1].split() if len(fields) == 2 else []
            if len(rest) > 19 and rest[19].isdigit():
                starts[pid] = rest[19]
        return {s: f"{p}@{starts[p]}" if p in starts else "" for s, p in pids.items()}

    def _files(self, probe: Probe) -> dict[str, list[int]] | None:
        """Per changed path: mode, owner, group, and for a file its size, inode and change
        time. None when they cannot be read."""
        facts = probe.facts() or _facts_here(probe)
        if facts is not None:
            entries = facts.entries()
            if entries is None:
                return None
            return {e[0]: _shape(e[1], e[2], e[3], e[4], e[7], e[6]) for e in entries if _watched(e[0])}
        changes = getattr(probe.access, "changes", None)
        if changes is None:
            return None
        paths = sorted(p for p, kind in changes().items() if kind != "D" and _watched(p))
        deleted = {p: [-1] for p, kind in changes().items() if kind == "D" and _watched(p)}
        if not paths:
            return deleted
        quoted = " ".join(shlex.quote(under(probe.root or "/", p).replace("//", "/")) for p in paths)
        out = probe.shell.run(f"stat -c '%f %u %g %s %i %Z %n' -- {quoted} 2>/dev/null", timeout=15).output
        found: dict[str, list[int]] = dict(deleted)
        for line in out.splitlines():
            parts = line.split(" ", 6)
            if len(parts) == 7 and all(x.lstrip("-").isalnum() for x in parts[:6]):
                path = (
                    parts[6][len(probe.root) :]
                    if probe.root and parts[6].startswith(probe.root)
                    else parts[6]
                )
                mode = int(parts[0], 16)
                found[path] = _shape(mode, *(int(x) for x in parts[1:6]))
        return found

    def _reading(self, probe: Probe) -> dict[str, Any]:
        return {"processes": self._processes(probe), "files": self._files(probe)}

    def snapshot(self, probe: Probe) -> Any:
        return self._reading(probe)

    def refine(self, probe: Probe, baseline: Any) -> Any:
        return self._reading(probe)  # as the agent will find it: the faults in, nothing else

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        if not isinstance(baseline, dict):
            return Outcome(False, "no record of the host as the agent found it")
        now = self._reading(probe)
        problems = []
        for service, seen in baseline["processes"].items():
            last = now["processes"].get(service, "")
            if last == seen:
                continue
            if not seen:
                problems.append(f"{service} started (pid {last.split('@')[0]})")
            elif not last:
                problems.append(f"{service} stopped (pid {seen.split('@')[0]})")
            else:
                problems.append(f"{service} restarted (pid {seen.split('@')[0]} -> {last.split('@')[0]})")
        before, after = baseline["files"], now["files"]
        if before is None or after is None:
            problems.append("the host's files could not be read whole")
        else:
            added = sorted(set(after) - set(before))
            deleted = sorted(set(before) - set(after))
            changed = sorted(p for p in set(before) & set(after) if before[p] != after[p])
            for what, paths in (("written", added + changed), ("deleted", deleted)):
                if paths:
                    problems.append(f"{what}: {named(paths)}")
        if problems:
            return Outcome(False, "the host was changed: " + "; ".join(problems))
        return Outcome(True, "as the agent found it: no service restarted, no file written")


def _shape(mode: int, uid: int, gid: int, size: int, inode: int, ctime: int) -> list[int]:
    if stat.S_ISDIR(mode):  # a child created or removed changes its times: the child is judged
        return [mode, uid, gid]
    return [mode, uid, gid, size, abs(inode), ctime]


def _facts_here(probe: Probe) -> Any:
    read = getattr(probe.access, "facts", None)
    return read() if read is not None else None
