"""The harness's wait for a host's boot: bash builtins polled every 50 ms, and MariaDB's
init script woken once its server is up.

Debian's ``/etc/init.d/mariadb start`` starts the server, then sleeps a whole second
before it first asks whether the server answers, and the boot's other scripts wait
behind it: most of a second of every boot spent asleep with the server long up. Once
the server's socket is there, the wait ends that ``sleep`` (the one child of that init
script), as the final verdict's restarts do (``fixos.episodes.restarts``): the script
then asks at once, and sleeps again if the server does not answer yet. Nothing else is
touched; the host boots as it would, only sooner.
"""

from __future__ import annotations

POLL_SECONDS = 0.05

_WAKE_MARIADB = """
  if [ -z "$woke" ] && [ -S /run/mysqld/mysqld.sock ]; then
    for d in /proc/[0-9]*; do
      c=; read -r c 2>/dev/null < "$d/comm"; [ "$c" = sleep ] || continue
      st=; read -r st 2>/dev/null < "$d/stat"; r=${st##*) }; set -- $r
      a=(); mapfile -d '' -t a 2>/dev/null < "/proc/$2/cmdline"
      [ "${a[1]}" = /etc/init.d/mariadb ] && kill -TERM "${d#/proc/}" 2>/dev/null && woke=1
    done
  fi"""


def boot_wait(hints: str, seconds: float, mariadb: bool) -> str:
    """A bash command that returns once ``hints`` (``[ -S ... ] && ...``) hold or ``seconds``
    pass; ``mariadb``: the host starts MariaDB at boot, whose init script is woken.
    ``read -t`` on a pipe nobody writes is a sleep without a fork."""
    wake = _WAKE_MARIADB if mariadb else ""
    polls = int(seconds / POLL_SECONDS)
    return (
        f"exec 9<> <(:); woke=; for ((i = 0; i < {polls}; i++)); do {hints} && break;{wake}\n"
        f"  read -t {POLL_SECONDS} -u 9; done; exec 9<&-"
    )
