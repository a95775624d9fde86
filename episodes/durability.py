"""The final verdict's second phase: would the repair survive a reboot?

    judge the hosts as the agent left them (a reward of 0.0 is final there)
    -> restart every service the healthy host ran, through the host's own init
       script, as a reboot would (``restart_services``)
    -> judge again, while a hold window watches each service's main process
       (``main_processes`` before and after: same PID, same start time, alive,
       ``HOLD_SECONDS`` old by the kernel's clock); only this judgement waits out
       the checks' own hold periods (a page that must stay up for 5 s)
    -> a check passes only if it passed in both phases (``durable_verdict``)

A repair that lasts only until the next restart (nginx started by hand from a
private copy of its config, the broken file left on disk) fails the second
phase; a restart loop fighting a watchdog fails the hold. The running score
after each step (``Episode.progress``) skips all of this.

The restarts are ``fixos.episodes.restarts``'s: the host's own init scripts, as a reboot runs
them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ..core.models import CheckResult, Verdict
from ..stack.hosts import LiveHost
from ..stack.inspector import SERVICE_DAEMONS
from ..verifier.verify import reward_of
from .restarts import restart_services, restartable

AS_LEFT = "as_left"
AFTER_RESTARTS = "after_restarts"
PHASE_WORDS = {AS_LEFT: "as left", AFTER_RESTARTS: "after the restarts"}
NOT_ASKED_AGAIN = "not asked again after the restarts (it counts only if it passes both)"
STABLE_CHECK = "steady: each service keeps its main process"
STABLE_TYPE = "services_stable"

HOLD_SECONDS = 1.0
"""how long each service's main process must have lived at the last reading, counted from
its start by the kernel's clock, the same process as at the first. It is the last line
behind the gates that see a cause (a loop the agent left running is a process the healthy
host did not run: ``nothing_new_running``; a cron line: ``config_unchanged``): it sees the
effect, a daemon replaced or dead soon after it started, whatever did it, within the
periods such loops use (the adversary ``restart_loop`` runs every 0.2 s). Counted from
each start, the window overlaps the slower restarts and the second judgement, and costs
only what they take less than this (``hold_left``)."""

_START_TIMES = (
    'for p in __PIDS__; do s=; read -r s 2>/dev/null < "/proc/$p/stat" || continue; '
    'r=${s##*) }; set -- $r; echo "$p ${20}"; done; u=; read -r u _ < /proc/uptime; echo "uptime $u"'
)
TICKS = os.sysconf("SC_CLK_TCK")
"""the unit of a start time in /proc/<pid>/stat (USER_HZ: the same on every Linux of one
architecture, so a remote engine's hosts count in it too)."""


@dataclass(frozen=True)
class Reading:
    """The main processes of a host's services at one moment, and that moment on the same
    clock as their start times (the kernel's, since boot: nothing in a host can set it)."""

    processes: dict[str, str]
    """per service, ``PID@start-time`` (clock ticks since boot), ``""`` when none lives."""
    uptime: float | None
    """seconds since boot when this was read; None when it could not be read."""

    def age(self, service: str) -> float:
        """How long the service's main process had lived when this was read (0.0 when none
        lives or the clock is unknown: its window then opens at this reading)."""
        start = self.processes.get(service, "").partition("@")[2]
        if not start.isdigit() or self.uptime is None:
            return 0.0
        return max(0.0, self.uptime - int(start) / TICKS)


def main_processes(host: LiveHost, services: Sequence[str]) -> Reading:
    """Per service, ``PID@start-time`` of the process its pid file names, or ``""`` when
    none lives, and the host's uptime. The pid files are read from outside (no program in
    the host involved); the start times come from the host's /proc, read inside its root
    from this machine where the engine is local, else by the host's ``sh`` run through the
    engine (a replaced ``sh`` fails the programs gate); they tell a process from a later
    one given the same PID, and how long it has lived."""
    files = {s: SERVICE_DAEMONS[s][0] for s in restartable(services)}
    raw = host.read_files(sorted(set(files.values())))
    pids = {}
    for service, path in files.items():
        text = (raw.get(path) or b"").decode("ascii", "replace").strip()
        pids[service] = text if text.isdigit() else ""
    wanted = sorted({p for p in pids.values() if p})
    started: dict[str, str] = {}
    uptime = ""
    if wanted and host.reads_locally:  # the host's own /proc, read inside its root from here
        stats = host.read_files([f"/proc/{p}/stat" for p in wanted] + ["/proc/uptime"])
        uptime = (stats.get("/proc/uptime") or b"").decode("ascii", "replace").partition(" ")[0]
        for pid in wanted:
            fields = (stats.get(f"/proc/{pid}/stat") or b"").decode("ascii", "replace").rsplit(")", 1)
            start = fields[1].split()[19] if len(fields) == 2 and len(fields[1].split()) > 19 else ""
            if start.isdigit():
                started[pid] = start
    elif wanted:
        script = _START_TIMES.replace("__PIDS__", " ".join(wanted))
        for line in host.run_program(["/bin/sh", "-c", script], timeout=10).output.splitlines():
            pid, _, start = line.partition(" ")
            if pid == "uptime":
                uptime = start
            elif pid in wanted and start.isdigit():
                started[pid] = start
    try:
        clock: float | None = float(uptime)
    except ValueError:
        clock = None
    return Reading({s: f"{p}@{started[p]}" if p in started else "" for s, p in pids.items()}, clock)


def hold_left(readings: Mapping[str, Reading], hold: float, since: float) -> float:
    """Seconds still to wait so that every service's main process has lived ``hold`` seconds
    by the next reading, ``since`` seconds after ``readings``. A process started by a
    restart began its window when it started, not when the last restart of the verdict
    ended: the hold overlaps the slower restarts and the second judgement instead of
    following them. A service with no main process (or no known clock) is watched from
    the reading on, for the whole hold: whatever starts it then is not its init script."""
    ages = [reading.age(service) for reading in readings.values() for service in reading.processes]
    return max((hold - age - since for age in ages), default=0.0)


def held_for(before: Mapping[str, Reading], after: Mapping[str, Reading], between: float) -> float:
    """How long the hold watched: the least age, at the last reading, of a main process seen
    at both (``between`` where the clock is unknown), and ``between`` the readings for a
    service that was down at the first (watched from there on)."""
    spans = []
    for name, first in before.items():
        last = after.get(name, Reading({}, None))
        for service, seen in first.processes.items():
            if not seen:
                spans.append(between)
            elif seen == last.processes.get(service):
                spans.append(last.age(service) if last.uptime is not None else between)
    return min(spans, default=between)


def stability(
    before: Mapping[str, Mapping[str, str]],
    after: Mapping[str, Mapping[str, str]],
    held: float,
    said: Mapping[str, str] | None = None,
    acted_on: Mapping[str, set[str]] | None = None,
) -> CheckResult:
    """The gate: every service's main process, seen at the start of the hold window, is
    the one seen at its end, and alive; a service that comes up inside the window was
    started by something other than its init script (which ran before it). A service
    down at both ends is not judged here: whether it must run is the scenario's checks'
    (its partial credit) and ``services_official``'s. So is a service that a fault keeping
    acting keeps down (``acted_on``: a watchdog's, a cron job's): whether it died inside the
    window would depend on when the fault's next round fell, not on the repair (a partial
    repair of such a world scored 0.33 on one seed, 0.0 on another)."""
    problems, down, left = [], [], []
    for host, seen in before.items():
        where = f"{host}/" if len(before) > 1 else ""
        for service, first in seen.items():
            last = after.get(host, {}).get(service, "")
            if service in (acted_on or {}).get(host, set()):
                if first != last or not first:
                    left.append(f"{where}{service}")
            elif not first and not last:
                down.append(f"{where}{service}")
            elif not first:
                restart = (said or {}).get(f"{host}/{service}")
                problems.append(
                    f"{where}{service} came up within {held:.1f}s, not from its init script "
                    f"(pid {last.split('@')[0]})" + (f"; its restart: {restart}" if restart else "")
                )
            elif not last:
                problems.append(f"{where}{service} (pid {first.split('@')[0]}) died within {held:.1f}s")
            elif last != first:
                problems.append(
                    f"{where}{service} main process replaced within {held:.1f}s "
                    f"(pid {first.split('@')[0]} -> {last.split('@')[0]})"
                )
    kept = sum(len(s) for s in before.values()) - len(down)
    detail = "; ".join(problems) or f"{kept} service(s) kept their main process for {held:.1f}s"
    if down and not problems:
        detail += f"; not running after the restarts (left to the other checks): {', '.join(down)}"
    if left and not problems:
        detail += f"; a fault keeps acting on (left to the scenario's checks): {', '.join(left)}"
    failed_in = AFTER_RESTARTS if problems else ""
    return CheckResult(STABLE_CHECK, STABLE_TYPE, not problems, False, 1.0, detail, failed_in)


def both_phases(first: Verdict, second: Verdict, extra: Sequence[CheckResult] = ()) -> Verdict:
    """Each check passes only if it passed as left and after the restarts; its detail
    says in which phase it failed (``failed_in``: as_left, after_restarts or both)."""
    later = {c.name: c for c in second.checks}
    combined = []
    for a in first.checks:
        if a.name not in later:  # failed as left: decided, not asked again
            detail = f"{PHASE_WORDS[AS_LEFT]}: {a.detail}; {NOT_ASKED_AGAIN}"
            combined.append(CheckResult(a.name, a.type, False, a.scored, a.weight, detail, AS_LEFT))
            continue
        b = later[a.name]
        failed = [phase for phase, c in ((AS_LEFT, a), (AFTER_RESTARTS, b)) if not c.passed]
        if not failed:
            combined.append(b)
            continue
        detail = "; ".join(f"{PHASE_WORDS[p]}: {(a if p == AS_LEFT else b).detail}" for p in failed)
        combined.append(
            CheckResult(
                a.name, a.type, False, a.scored, a.weight, detail, "both" if len(failed) == 2 else failed[0]
            )
        )
    combined.extend(extra)
    return Verdict(
        reward_of(combined), combined, phases={AS_LEFT: first.checks, AFTER_RESTARTS: second.checks}
    )


@dataclass
class PhaseTimes:
    """Where the final verdict's time went, in seconds."""

    as_left: float = 0.0
    restarts: float = 0.0
    after_restarts: float = 0.0
    """the second judgement and the hold window around it."""


def settled_as_left(first: Verdict) -> Verdict:
    """The final verdict of hosts whose reward is 0.0 as left. A check passes only if it
    passes in both phases, so no restart can raise a reward of 0: restarting every service
    (MariaDB's script waits up to 30 s on a configuration that still fails) and judging
    again would cost a failing episode more than a passing one, for the same reward. Most
    episodes of a trainer fail. The gate of the hold says it was not judged."""
    checks = [
        *first.checks,
        CheckResult(
            STABLE_CHECK,
            STABLE_TYPE,
            True,
            False,
            1.0,
            "not judged: the reward was 0.0 as left, and no restart raises it",
        ),
    ]
    return Verdict(0.0, checks, phases={AS_LEFT: first.checks})


def durable_verdict(
    judge: Callable[[bool, frozenset[str]], Verdict],
    hosts: Mapping[str, LiveHost],
    services: Mapping[str, Sequence[str]],
    *,
    hold: float = HOLD_SECONDS,
    times: PhaseTimes | None = None,
    acted_on: Mapping[str, set[str]] | None = None,
) -> Verdict:
    """The final verdict: ``judge(False, {})`` as left, the restarts, ``judge(True, decided)``
    again inside the hold window; only the first when it gives 0.0 (``settled_as_left``).
    ``services``: per host, the services its healthy self ran.

    ``decided``: the names of the checks that failed as left. A check counts only if it
    passes in both phases, so asking those again cannot change the reward, and would cost a
    failing episode more than a passing one: a page left hanging on an address nobody
    answers (net_hard_4's partial repair) waited out the app's time-out a second time,
    6.6 s against the oracle's 2.5. (Gates failed as left are not among them: the reward
    is then 0.0, final as left.)

    ``judge(holding, decided)``: ``holding`` says whether the checks wait out their own hold
    periods (``http_page``'s ``hold_seconds``: the page must still answer that long after).
    Only the last judgement does: "stays up" speaks of what comes after, and what would take
    a page down within seconds of the first judgement (a killer loop, a re-breaker) is still
    there after the restarts, which restart services only, or was a process the healthy host
    did not run, which ``nothing_new_running`` fails as left. Holding in both cost a passing
    episode of medium_6 10 s of its 11 s verify, and cron_1 16 of 17."""
    times = times if times is not None else PhaseTimes()
    started = time.monotonic()
    first = judge(False, frozenset())
    times.as_left = time.monotonic() - started
    if first.reward == 0.0:
        return settled_as_left(first)
    started = time.monotonic()
    restarts = restart_services(hosts, services)
    times.restarts = time.monotonic() - started
    started = time.monotonic()
    watched = {name: restartable(listed) for name, listed in services.items()}

    def processes() -> tuple[dict[str, Reading], float]:
        readings = {name: main_processes(hosts[name], s) for name, s in watched.items()}
        return readings, time.monotonic()

    # The first reading opens the window; it runs beside the second judgement.
    with ThreadPoolExecutor(max_workers=1) as reader:
        first_reading = reader.submit(processes)
        second = judge(True, frozenset(c.name for c in first.checks if not c.passed))
        before, read_at = first_reading.result()
    left = hold_left(before, hold, time.monotonic() - read_at)
    if left > 0:
        time.sleep(left)
    after, ended = processes()
    held = held_for(before, after, ended - read_at)
    times.after_restarts = time.monotonic() - started
    said = {f"{r.host}/{r.service}": r.line for r in restarts}
    first_seen = {name: r.processes for name, r in before.items()}
    last_seen = {name: r.processes for name, r in after.items()}
    verdict = both_phases(first, second, [stability(first_seen, last_seen, held, said, acted_on)])
    verdict.restarts.update(said)
    return verdict
