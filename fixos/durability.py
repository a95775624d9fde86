"""The final verdict's second phase: would the repair survive a reboot?

    judge the hosts as the agent left them (a reward of 0.0 is final there)
    -> restart every service the healthy host ran, through the host's own init
       script, as a reboot would (``restart_services``)
    -> judge again, while a hold window watches each service's main process
       (``main_processes`` before and after: same PID, same start time, alive)
    -> a check passes only if it passed in both phases (``durable_verdict``)

A repair that lasts only until the next restart (nginx started by hand from a
private copy of its config, the broken file left on disk) fails the second
phase; a restart loop fighting a watchdog fails the hold. The running score
after each step (``Episode.progress``) skips all of this.

The restarts run in the host through the engine's exec API (a one-off process,
never the agent's session nor the verifier's): what a reboot runs is the host's
own init scripts, with its own ``sh``. That those scripts and programs are the
image's is the ``programs_unchanged`` gate's to prove, from the engine's diff.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from fixos.core.models import CheckResult, CommandResult, Verdict
from fixos.stack.hosts import READY_HINTS, LiveHost
from fixos.stack.inspector import SERVICE_DAEMONS
from fixos.verifier.verify import reward_of

AS_LEFT = "as_left"
AFTER_RESTARTS = "after_restarts"
PHASE_WORDS = {AS_LEFT: "as left", AFTER_RESTARTS: "after the restarts"}

HOLD_SECONDS = 1.0
"""the least time between the two readings of the main processes; the second judgement
runs inside the window, so it costs only what that judgement takes less than this."""
STOP_SECONDS = 10.0
START_SECONDS = 30.0
"""how long a service may take to stop, then to answer once its init script started it:
as long as MariaDB's own script waits for its server (MYSQLD_STARTUP_TIMEOUT, 30 s). A
server that its script would have accepted is up: a flood of clients the agent left
running (hard_4's partial repair) slows a restart past 15 s on a loaded machine, and
that is the scored checks' to judge, not the gates'. A restart that has failed is told
by evidence long before (``GAVE_UP_POLLS``), so only a slow start pays this bound."""
POLL = 0.05
GRACE_SECONDS = 1.0
"""how long a daemon may take to answer once its init script has ended."""

STABLE_CHECK = "steady: each service keeps its main process"
STABLE_TYPE = "services_stable"

LEFTOVERS = {
    "nginx": "nginx",
    "mariadb": "mariadbd mysqld mysqld_safe",
    "php8.2-fpm": "php-fpm8.2",
    "ssh": "sshd",
}
"""process names (``comm``) a reboot would leave none of, per service: a daemon the agent
started by hand under another pid file is gone after a reboot too."""
SOCKETS = {"mariadb": "/run/mysqld/mysqld.sock", "php8.2-fpm": "/run/php/php8.2-fpm.sock"}
"""what a reboot clears from /run besides the pid file: a stale socket would read as ready."""
ERROR_LOGS = {"mariadb": ("/var/log/mysql/error.log", r"\[ERROR\]| ended$")}
"""where a service whose init script outlives a failed start says why, and the lines that
say it gave up. MariaDB's script polls for a server once a second for 30 s after
mysqld_safe has already given up (on a broken configuration mariadbd exits at once,
and mysqld_safe logs "... ended"): once none of its processes lives and its log says
so, the restart has failed, and the verdict need not wait out the poll."""
GAVE_UP_POLLS = 2
"""consecutive polls that must see the service gone and its log saying why."""


POLLING_SCRIPTS = frozenset({"mariadb"})
"""the services whose init script polls its daemon with `sleep 1` once it started it."""

# While the init script still runs and its daemon already answers: wake the script's
# `sleep` (MariaDB's polls the server once a whole second, up to 30 times), so that it
# asks again at once, sees the server, and ends. The script itself is run as it is; only
# its wait is cut short, and it still decides for itself that the server is up.
_WAKE = """
    pidof_
    if [ -n "$p" ] && [ -d "/proc/$p" ] && [ __HINT__ ]; then
      for d in /proc/[0-9]*; do
        c=; read -r c 2>/dev/null < "$d/comm"; [ "$c" = sleep ] || continue
        st=; read -r st 2>/dev/null < "$d/stat"; r=${st##*) }; set -- $r
        [ "$2" = "$s" ] && kill -TERM "${d#/proc/}" 2>/dev/null
      done
    fi"""


def restartable(services: Sequence[str]) -> list[str]:
    """The services of a host that have a pid file to watch (the image's daemons)."""
    return [s for s in services if s in SERVICE_DAEMONS]


def restart_script(service: str) -> str:
    """A POSIX ``sh`` script (the host's own, as a reboot runs it) that stops ``service``
    as a reboot would, starts it with ``/etc/init.d/<service> start`` and waits, polling
    every 50 ms, until the init script has ended and the pid file names a live process
    (and its socket is there), or ``START_SECONDS`` pass. Exit 0 once it answers.

    The stop signals the daemon the way the init script does and polls, instead of
    ``<service> stop``, whose own waits idle a whole second (nginx) or more (MariaDB);
    the start is the init script's, and the judgement waits for it to end: until then the
    daemon's parent is the script, not init, and ``services_official`` compares the chain
    of parents with the healthy host's. (MariaDB's script polls every whole second, the
    largest share of the restarts' time.)"""
    pidfile, _ = SERVICE_DAEMONS[service]
    socket = SOCKETS.get(service, "")
    hint = READY_HINTS.get(service, "-n x")
    q = shlex.quote
    stop_polls, start_polls = int(STOP_SECONDS / POLL), int(START_SECONDS / POLL)
    log, gave_up = ERROR_LOGS.get(service, ("", ""))
    wake = _WAKE.replace("__HINT__", hint) if service in POLLING_SCRIPTS else ""
    # The stop kills every leftover until none is left (reaped): an old mysqld_safe that
    # outlived one pass wrote its "ended" past the log's measured size, and with the new
    # server not yet up, read as this start's failure (logrot_1 under load).
    # While the init script still runs: the service has failed when its processes, seen
    # alive since the start, are gone and its error log, past what it held before, says it
    # gave up. Not before one was seen: the script's own checks come first, with none of
    # them alive, and the old mysqld_safe may write its "ended" a moment after our count.
    failed_early = (
        f"""
    alive=
    for d in /proc/[0-9]*; do
      c=; read -r c 2>/dev/null < "$d/comm"
      case "$names" in *" $c "*) [ -n "$c" ] && alive=1 && seen=1 && break;; esac
    done
    if [ -z "$alive" ] && [ -n "$seen" ] && new=$(tail -c +$((logsize + 1)) {q(log)} 2>/dev/null) \\
       && why=$(printf '%s\\n' "$new" | grep -E {q(gave_up)} | tail -n 1) && [ -n "$why" ]; then
      err=$(printf '%s\\n' "$new" | grep -F '[ERROR]' | head -n 1)  # the first says why
      [ -n "$err" ] && why="${{err#*\\[ERROR\\] }}"
      gone=$((gone + 1))
      if [ $gone -ge {GAVE_UP_POLLS} ]; then
        echo "not up: no {service} process lives, its init script still waits; {log.rsplit("/", 1)[-1]}: $why"
        exit 1
      fi
    else
      gone=0
    fi"""
        if log
        else ""
    )
    return f"""
pidof_() {{ p=; read -r p 2>/dev/null < {q(pidfile)}; case "$p" in ''|*[!0-9]*) p=;; esac; }}
pidof_
if [ -n "$p" ]; then
  kill -TERM "$p" 2>/dev/null; i=0
  while kill -0 "$p" 2>/dev/null && [ $i -lt {stop_polls} ]; do sleep {POLL}; i=$((i + 1)); done
  kill -KILL "$p" 2>/dev/null
fi
names=" {LEFTOVERS.get(service, "")} "
i=0
while [ $i -lt {stop_polls} ]; do
  left=
  for d in /proc/[0-9]*; do
    c=; read -r c 2>/dev/null < "$d/comm"
    case "$names" in *" $c "*) [ -n "$c" ] && left=1 && kill -KILL "${{d#/proc/}}" 2>/dev/null;; esac
  done
  [ -z "$left" ] && break
  sleep {POLL}; i=$((i + 1))
done
rm -f {q(pidfile)} {q(socket) if socket else ""}
logsize=0; {f"[ -f {q(log)} ] && logsize=$(wc -c < {q(log)})" if log else ":"}
/etc/init.d/{q(service)} start </dev/null >/dev/null 2>&1 &
s=$!; i=0; ended=; grace={int(GRACE_SECONDS / POLL)}; gone=0; seen=
while [ $i -lt {start_polls} ]; do
  if [ -z "$ended" ]; then
    st=; read -r st 2>/dev/null < "/proc/$s/stat"
    case "$st" in ''|*') Z '*) ended=1;; esac
  fi
  if [ -z "$ended" ]; then{failed_early or " :"}{wake}
  fi
  if [ -n "$ended" ]; then
    pidof_
    if [ -n "$p" ] && [ -d "/proc/$p" ] && [ {hint} ]; then echo "up (pid $p)"; exit 0; fi
    [ $grace -le 0 ] && break
    grace=$((grace - 1))
  fi
  sleep {POLL}; i=$((i + 1))
done
wait "$s"; rc=$?
echo "not up: /etc/init.d/{service} start exited $rc and no live daemon answers"; exit 1
"""


@dataclass(frozen=True)
class Restart:
    """How one service's restart went."""

    host: str
    service: str
    result: CommandResult

    @property
    def line(self) -> str:
        out = self.result.output.strip().splitlines()
        said = out[-1][:160] if out else f"exit {self.result.exit_code}"
        took = f" in {self.result.duration:.2f}s"
        return said + took if self.result.ok else f"failed{took}: {said}"


def restart_services(hosts: Mapping[str, LiveHost], services: Mapping[str, Sequence[str]]) -> list[Restart]:
    """Restart every listed service of every host, all side by side (they do not need
    each other to start: nginx and php-fpm reach MariaDB per request)."""
    jobs = [(name, s) for name, listed in services.items() for s in restartable(listed)]

    def one(job: tuple[str, str]) -> Restart:
        name, service = job
        argv = ["/bin/sh", "-c", restart_script(service)]
        return Restart(name, service, hosts[name].run_program(argv, timeout=STOP_SECONDS + START_SECONDS + 5))

    if not jobs:
        return []
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        return list(pool.map(one, jobs))


_START_TIMES = (
    'for p in __PIDS__; do s=; read -r s 2>/dev/null < "/proc/$p/stat" || continue; '
    'r=${s##*) }; set -- $r; echo "$p ${20}"; done; true'
)


def main_processes(host: LiveHost, services: Sequence[str]) -> dict[str, str]:
    """Per service, ``PID@start-time`` of the process its pid file names, or ``""`` when
    none lives. The pid files are read from outside (no program in the host involved);
    the start times come from the host's /proc, read inside its root from this machine
    where the engine is local, else by the host's ``sh`` run through the engine (a
    replaced ``sh`` fails the programs gate); they tell a process from a later one given
    the same PID."""
    files = {s: SERVICE_DAEMONS[s][0] for s in restartable(services)}
    raw = host.read_files(sorted(set(files.values())))
    pids = {}
    for service, path in files.items():
        text = (raw.get(path) or b"").decode("ascii", "replace").strip()
        pids[service] = text if text.isdigit() else ""
    wanted = sorted({p for p in pids.values() if p})
    started: dict[str, str] = {}
    if wanted and host.reads_locally:  # the host's own /proc, read inside its root from here
        stats = host.read_files([f"/proc/{p}/stat" for p in wanted])
        for pid in wanted:
            fields = (stats.get(f"/proc/{pid}/stat") or b"").decode("ascii", "replace").rsplit(")", 1)
            start = fields[1].split()[19] if len(fields) == 2 and len(fields[1].split()) > 19 else ""
            if start.isdigit():
                started[pid] = start
    elif wanted:
        script = _START_TIMES.replace("__PIDS__", " ".join(wanted))
        for line in host.run_program(["/bin/sh", "-c", script], timeout=10).output.splitlines():
            pid, _, start = line.partition(" ")
            if pid in wanted and start.isdigit():
                started[pid] = start
    return {s: f"{p}@{started[p]}" if p in started else "" for s, p in pids.items()}


def stability(
    before: Mapping[str, Mapping[str, str]],
    after: Mapping[str, Mapping[str, str]],
    held: float,
    said: Mapping[str, str] | None = None,
) -> CheckResult:
    """The gate: every service's main process, seen at the start of the hold window, is
    the one seen at its end, and alive; a service that comes up inside the window was
    started by something other than its init script (which ran before it). A service
    down at both ends is not judged here: whether it must run is the scenario's checks'
    (its partial credit) and ``services_official``'s."""
    problems, down = [], []
    for host, seen in before.items():
        where = f"{host}/" if len(before) > 1 else ""
        for service, first in seen.items():
            last = after.get(host, {}).get(service, "")
            if not first and not last:
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
    failed_in = AFTER_RESTARTS if problems else ""
    return CheckResult(STABLE_CHECK, STABLE_TYPE, not problems, False, 1.0, detail, failed_in)


def both_phases(first: Verdict, second: Verdict, extra: Sequence[CheckResult] = ()) -> Verdict:
    """Each check passes only if it passed as left and after the restarts; its detail
    says in which phase it failed (``failed_in``: as_left, after_restarts or both)."""
    later = {c.name: c for c in second.checks}
    combined = []
    for a in first.checks:
        b = later.get(a.name, a)
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
    judge: Callable[[], Verdict],
    hosts: Mapping[str, LiveHost],
    services: Mapping[str, Sequence[str]],
    *,
    hold: float = HOLD_SECONDS,
    times: PhaseTimes | None = None,
) -> Verdict:
    """The final verdict: ``judge()`` as left, the restarts, ``judge()`` again inside the hold
    window; only the first when it gives 0.0 (``settled_as_left``). ``services``: per host,
    the services its healthy self ran."""
    times = times if times is not None else PhaseTimes()
    started = time.monotonic()
    first = judge()
    times.as_left = time.monotonic() - started
    if first.reward == 0.0:
        return settled_as_left(first)
    started = time.monotonic()
    restarts = restart_services(hosts, services)
    times.restarts = time.monotonic() - started
    started = time.monotonic()
    watched = {name: restartable(listed) for name, listed in services.items()}

    def processes() -> dict[str, dict[str, str]]:
        return {name: main_processes(hosts[name], s) for name, s in watched.items()}

    window = time.monotonic()
    # The first reading opens the window; it runs beside the second judgement.
    with ThreadPoolExecutor(max_workers=1) as reader:
        first_reading = reader.submit(processes)
        second = judge()
        before = first_reading.result()
    left = hold - (time.monotonic() - window)
    if left > 0:
        time.sleep(left)
    after = processes()
    held = time.monotonic() - window
    times.after_restarts = time.monotonic() - started
    said = {f"{r.host}/{r.service}": r.line for r in restarts}
    verdict = both_phases(first, second, [stability(before, after, held, said)])
    verdict.restarts.update(said)
    return verdict
