"""Restart a host's services the way a reboot would: through the host's own init scripts,
started by the host's own ``bash`` through the engine's exec API (a one-off process, never the
agent's session nor the verifier's), all side by side, each decided from evidence rather
than from its script's poll (``restart_script``). The durability phase of the final
verdict (``fixos.episodes.durability``) calls it between its two judgements.

That those scripts and programs are the image's is the ``programs_unchanged`` gate's to
prove, from the host's changed files.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ..core.models import CommandResult
from ..shells.tagged import Tagged, side_by_side
from ..stack.hosts import READY_HINTS, LiveHost
from ..stack.inspector import SERVICE_DAEMONS

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
"""how long a daemon may take to answer once its init script has ended saying it started; one
that said it failed, with none of the service's processes alive, has failed at once (tls_3's
partial repair: nginx cannot load its key, its restart 1.13 -> 0.48 s)."""


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
    """A ``bash`` script (the host's own; the init script runs under its own ``#!``) that stops ``service``
    as a reboot would, starts it with ``/etc/init.d/<service> start`` and waits, polling
    every 50 ms, until the init script has ended and the pid file names a live process
    (and its socket is there), or ``START_SECONDS`` pass. Exit 0 once it answers.

    The stop signals the daemon the way the init script does and polls, instead of
    ``<service> stop``, whose own waits idle a whole second (nginx) or more (MariaDB);
    the start is the init script's, and the judgement waits for it to end: until then the
    daemon's parent is the script, not init, and ``services_official`` compares the chain
    of parents with the healthy host's. (MariaDB's script polls every whole second, the
    largest share of the restarts' time.) Its polls sleep with ``read -t`` on a pipe nobody
    writes (``fixos.stack.boot_wait``'s way): ``sleep`` forked 30 times an episode, ~25 ms
    of the host's CPU; the init script and so its daemon get no such descriptor. Where the
    pipe cannot be made (the agent removed ``/dev/fd``, outside every layer the gates
    read), each poll forks ``sleep`` again: never a poll that does not wait."""
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
    # Its script ended saying it failed, and none of its processes lives: no grace to wait
    # out (a daemon that forks late lives, and its script said 0).
    dead = f"""
      alive=
      for d in /proc/[0-9]*; do
        c=; read -r c 2>/dev/null < "$d/comm"
        case "$names" in *" $c "*) [ -n "$c" ] && alive=1 && break;; esac
      done
      [ -n "$alive" ] && dead=0 || dead=$((dead + 1))
      if [ $dead -ge {GAVE_UP_POLLS} ]; then
        echo "not up: /etc/init.d/{service} start exited $rc and none of its processes lives"; exit 1
      fi"""
    return f"""
{{ exec 9<> <(:); }} 2>/dev/null
nap() {{ read -t {POLL} -u 9 2>/dev/null; [ $? -gt 128 ] || sleep {POLL}; }}
pidof_() {{ p=; read -r p 2>/dev/null < {q(pidfile)}; case "$p" in ''|*[!0-9]*) p=;; esac; }}
pidof_
if [ -n "$p" ]; then
  kill -TERM "$p" 2>/dev/null; i=0
  while kill -0 "$p" 2>/dev/null && [ $i -lt {stop_polls} ]; do nap; i=$((i + 1)); done
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
  nap; i=$((i + 1))
done
rm -f {q(pidfile)} {q(socket) if socket else ""}
logsize=0; {f"[ -f {q(log)} ] && logsize=$(wc -c < {q(log)})" if log else ":"}
/etc/init.d/{q(service)} start </dev/null >/dev/null 2>&1 9<&- &
s=$!; i=0; ended=; rc=; grace={int(GRACE_SECONDS / POLL)}; gone=0; dead=0; seen=
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
    [ -z "$rc" ] && {{ wait "$s"; rc=$?; }}
    if [ "$rc" != 0 ]; then{dead}
    fi
    [ $grace -le 0 ] && break
    grace=$((grace - 1))
  fi
  nap; i=$((i + 1))
done
[ -z "$rc" ] && {{ wait "$s"; rc=$?; }}
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
    each other to start: nginx and php-fpm reach MariaDB per request), one engine exec a
    host (``side_by_side``), each timed from the host's script's start to its decision."""
    jobs = {name: restartable(listed) for name, listed in services.items()}
    jobs = {name: listed for name, listed in jobs.items() if listed}

    def one_host(name: str) -> list[Restart]:
        listed = jobs[name]
        tagged = Tagged([f"restart {service}" for service in listed])
        argv = side_by_side([restart_script(service) for service in listed], shell="/bin/bash")
        run = hosts[name].run_program(argv, timeout=STOP_SECONDS + START_SECONDS + 5, on_output=tagged.feed)
        return [Restart(name, s, result) for s, result in zip(listed, tagged.results(run), strict=True)]

    if not jobs:
        return []
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        return [r for per_host in pool.map(one_host, jobs) for r in per_host]
