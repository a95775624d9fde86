"""Nothing runs on the host that the healthy host did not run.

A repair that works while something the agent started keeps running (a loop that
forks without pause, a sleeper holding a file, a second master under ``setsid``, a
watchdog of its own) passes every check that only asks whether the services answer.
This gate lists the host's processes from the looking side (its own ``ps`` and
``find``, never the host's) and gives each a *shape*: its executable as the kernel
names it, its command line with runs of digits folded, and the same for each of its
ancestors up to PID 1. Every shape must be one the healthy host had, or one present
once the faults were in (the faults' own processes are the scenario's checks' to
judge); anything else fails, named in one line. Of the processes init adopted (the
daemons), none may run more copies than the healthy host ran.

Left out, each for a reason:

- sessions entered from outside the host (their parent is outside its PID
  namespace: the engine's exec, the judge's sessions, the agent's ``docker exec``),
  with all they started: the final verdict closes the agent's sessions first, so
  what it left running is adopted by init and judged; and the harness's session
  the host's boot opened (init's child: ``fixos.shells.boot``) while it is open, by
  its PID: it ends before any agent comes;
- an open SSH connection's processes (an external agent still logged in): a loop
  under a connection that stays open is not seen; once the connection ends, it is;
- what cron runs for a job (the healthy host's own jobs; a new cron line fails
  ``config_unchanged``), and what an init script runs while it runs (the durability
  phase's restarts; the scripts are the image's: ``programs_unchanged``);
- a child of the same program as its parent (a daemon's workers, a shell's
  subshells): its parent is judged;
- zombies, which run nothing.

No counts beyond init's children: php-fpm's workers come and go with the load.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ..core.models import Outcome
from .base import CHECKS, Check, CheckParams, Facts, Probe

_WALK = (
    "ps -e -ww -o pid=,ppid=,stat=,args= 2>/dev/null; echo '--'; "
    "find /proc -mindepth 2 -maxdepth 2 -name exe -printf '%h %l\\n' 2>/dev/null; true"
)
"""every process with its parent, state and command line; then each one's executable."""

AGAIN_SECONDS = 0.2
"""between the two looks of a failing judgement: longer than an exit or a fork-exec takes."""
RECORD_AGAIN_SECONDS = 0.1
"""between the two looks at the faults' processes: longer than what a loop among them runs
between its sleeps takes (hard_4's job: a refused client, 10-30 ms), shorter than its sleep
(0.2 s), so that each look that misses the loop's ``sleep`` is followed by one that sees it."""
CRON = "/usr/sbin/cron"
SSHD = "/usr/sbin/sshd"
_INIT_SCRIPT = re.compile(r"^/bin/(sh|bash) /etc/init\.d/[A-Za-z0-9_.+-]+ [a-z-]+$")
"""an init script run by its interpreter (MariaDB's is bash's): the scripts are the image's."""
_SHELLS = ("/usr/bin/dash", "/usr/bin/bash", "/bin/dash", "/bin/bash")
_MAX_DEPTH = 16


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    state: str
    args: str
    exe: str


def _walk(probe: Probe) -> dict[int, Proc]:
    table = probe.process_table()
    if table is not None:  # from this machine: no ps, no find in the judge
        # args as a ps listing parses: leading blanks (an empty argv[0]) are the column's
        procs = {p.pid: Proc(p.pid, p.ppid, p.state, p.args.lstrip(), p.exe) for p in table}
        if 1 not in procs:
            raise RuntimeError("could not list the host's processes: no init in its PID namespace")
        return procs
    out = probe.shell.run(_WALK, timeout=15).output
    listing, _, exes = out.partition("\n--\n")
    exe_of: dict[int, str] = {}
    for line in exes.splitlines():
        where, _, target = line.partition(" ")
        pid = where.rsplit("/", 1)[-1]
        if pid.isdigit():
            exe_of[int(pid)] = target.strip()
    procs = {}
    for line in listing.splitlines():
        parts = line.split(None, 3)
        if len(parts) >= 3 and parts[0].isdigit() and parts[1].isdigit():
            pid = int(parts[0])
            args = parts[3] if len(parts) == 4 else ""
            procs[pid] = Proc(pid, int(parts[1]), parts[2], args, exe_of.get(pid, ""))
    if 1 not in procs:  # a listing without the host's init is none: fail, never pass empty
        raise RuntimeError(f"could not list the host's processes: {out.strip()[:120]!r}")
    return procs


def _shape(proc: Proc) -> str:
    return f"{proc.exe or '?'} {re.sub(r'[0-9]+', 'N', proc.args)}"


def _entered_from(proc: Proc, procs: dict[int, Proc], boot: frozenset[int] = frozenset()) -> int | None:
    """The session entered from outside that ``proc`` runs under (its PID), None if none;
    -1 when it runs under an SSH connection, a cron job or an init script (left out).
    ``boot``: the PIDs of the harness's sessions the host's boot opened, open now (init's
    children: ``fixos.shells.boot``), which count as entered from outside; they end before
    any agent comes, and a shell of their shape found later is judged as any program is."""
    seen, here = 0, proc
    while here.pid != 1 and seen < _MAX_DEPTH:
        if here.ppid == 0 or here.pid in boot:
            return here.pid
        parent = procs.get(here.ppid)
        if parent is None:
            return None  # its parent ended meanwhile: judged as it is
        if here.exe in (CRON, SSHD) and parent.exe == here.exe and parent.ppid == 1:
            return -1  # cron's child for one job, sshd's for one connection
        if here.exe in _SHELLS and _INIT_SCRIPT.match(here.args):
            return -1
        here, seen = parent, seen + 1
    return None


def _worker(proc: Proc, procs: dict[int, Proc]) -> bool:
    """A child of the same program as its parent (a daemon's worker, a shell's subshell):
    the parent is judged for it. php-fpm's workers come and go with requests (ondemand),
    nginx's old ones linger after a reload; no program of the host can make a daemon
    fork (hosts lack ``CAP_SYS_PTRACE``)."""
    parent = procs.get(proc.ppid)
    return parent is not None and parent.pid != 1 and bool(proc.exe) and proc.exe == parent.exe


def shapes(probe: Probe, *, recording: bool = False) -> tuple[dict[str, Proc], Counter[str]]:
    """Each judged process's shape (own, then its ancestors' up to PID 1) with one process
    of that shape; and how many processes of each shape init adopted.

    ``recording`` (the healthy host, the faults): also the shapes these processes would
    have once init adopted them, because an ancestor ended: every shorter chain, and for
    the processes of a session entered from outside, the chain up to that session (the
    faults' processes, started from the harness's session, whose watchdog loop the repair
    kills while its ``sleep`` still runs)."""
    procs = _walk(probe)
    boot = getattr(probe.access, "boot_sessions", None)  # a LiveHost's (``fixos.stack.hosts``)
    boot = frozenset(boot) if isinstance(boot, set | frozenset) else frozenset()
    found: dict[str, Proc] = {}
    adopted: Counter[str] = Counter()
    for proc in procs.values():
        if proc.pid == 1 or proc.state.startswith("Z") or _worker(proc, procs):
            continue
        root = _entered_from(proc, procs, boot)
        if root == -1 or (root is not None and (not recording or root == proc.pid)):
            continue
        stop = (0, 1) if root is None else (0, 1, root)
        chain, here = [_shape(proc)], proc
        while here.ppid not in stop and here.ppid in procs and len(chain) < _MAX_DEPTH:
            here = procs[here.ppid]
            chain.append(_shape(here))
        for length in range(1 if recording else len(chain), len(chain) + 1):
            found.setdefault(" < ".join(chain[:length]), proc)
        if proc.ppid == 1 or (root is not None and proc.ppid == root):
            adopted[" < ".join(chain)] += 1
    return found, adopted


def _record(probe: Probe) -> dict[str, Any]:
    found, adopted = shapes(probe, recording=True)
    return {"shapes": sorted(found), "adopted": dict(adopted)}


def _merged(one: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """Two looks' records as one: every shape either saw, the larger count of each."""
    adopted = dict(one["adopted"])
    for key, n in other["adopted"].items():
        adopted[key] = max(n, adopted.get(key, 0))
    return {"shapes": sorted(set(one["shapes"]) | set(other["shapes"])), "adopted": adopted}


@CHECKS.register
class NothingNewRunning(Check):
    """No process runs whose shape the healthy host (or the faults) did not have, and no
    daemon runs in more copies than it did."""

    type = "nothing_new_running"
    exported = False
    # Beside it, the other checks' commands (find, the mariadb client, the daemons' config
    # tests) would be recorded as the healthy host's processes.
    alone = True

    class Params(CheckParams):
        pass

    def snapshot(self, probe: Probe) -> Any:
        if not probe.root:
            return None  # the exported verifier: the task's own runner leaves its processes in the host
        return _record(probe)

    def facts(self, facts: Facts, baseline: Any) -> bytes | None:
        return facts.processes()

    def refine(self, probe: Probe, baseline: Any) -> Any:
        if baseline is None:
            return None
        now = _record(probe)
        if set(now["shapes"]) - set(baseline["shapes"]):
            # The faults' processes: a loop among them runs its sleep most of the time, not
            # always (hard_4's job, retrying a refused connection: in 2 of 100 looks on a quiet
            # machine neither of its retrying loops was in ``sleep 0.2``). Missed here, that
            # sleep would fail this gate for a repair that leaves the job running, which is the
            # scenario's check's to judge. Only hosts where the faults run something pay it.
            time.sleep(RECORD_AGAIN_SECONDS)
            now = _merged(now, _record(probe))
        return _merged(baseline, now)

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        if baseline is None:
            return Outcome(True, "not judged: this verifier runs inside the host, beside the task's runner")
        new, more, kinds = self._differences(probe, baseline)
        if new or more:
            # Looked at once more, only what is there both times counts: a process caught
            # exiting (an old nginx worker after a reload, its executable already gone) or
            # between its fork and its exec is no work left running; a loop is, as is a
            # program that hops from PID to PID under one shape.
            time.sleep(AGAIN_SECONDS)
            again, more_again, kinds = self._differences(probe, baseline)
            new = {key: proc for key, proc in new.items() if key in again}
            more = [m for m in more if m in more_again]
        problems = [f"pid {p.pid} {p.exe or '?'} ({p.args[:60]})" for p in list(new.values())[:3]]
        if len(new) > 3:
            problems.append(f"and {len(new) - 3} more")
        if problems:
            return Outcome(False, "left running: " + ", ".join(problems + more))
        if more:
            return Outcome(False, "more copies than the healthy host ran: " + ", ".join(more))
        return Outcome(True, f"{kinds} kinds of process, all the healthy host's")

    @staticmethod
    def _differences(probe: Probe, baseline: Any) -> tuple[dict[str, Proc], list[str], int]:
        """The processes of a shape not in ``baseline``; the daemons in more copies; how many
        shapes were seen."""
        found, adopted = shapes(probe)
        known = set(baseline["shapes"])
        new = {key: proc for key, proc in sorted(found.items()) if key not in known}
        more = [
            f"{n} of {key.split(' ', 1)[-1][:60]!r} (healthy: {baseline['adopted'][key]})"
            for key, n in sorted(adopted.items())
            if key in baseline["adopted"] and n > baseline["adopted"][key]
        ]
        return new, more, len(found)
