"""Small shell building blocks shared by faults: literal edits and PID-exact spawns."""

from __future__ import annotations

import re
import shlex

from ..core.errors import InvalidEpisode
from ..shells.base import Shell

# perl is in every Debian (perl-base); \Q..\E makes the search literal, and the
# END block reports a miss without truncating the file as an early exit would.
_REPLACE = "perl -0777 -i -pe '$n += s/\\Q$ENV{FIXOS_OLD}\\E/$ENV{FIXOS_NEW}/; END { exit($n ? 0 : 3) }'"


def replace_command(path: str, old: str, new: str) -> str:
    """A shell command replacing the first literal ``old`` in ``path`` with ``new``."""
    return f"FIXOS_OLD={shlex.quote(old)} FIXOS_NEW={shlex.quote(new)} {_REPLACE} {shlex.quote(path)}"


def replace_in_file(shell: Shell, path: str, old: str, new: str) -> None:
    result = shell.run(replace_command(path, old, new), timeout=10)
    if result.exit_code != 0:
        raise InvalidEpisode(f"cannot edit {path}: {old!r} not found ({result.output.strip()})")


def install_script(shell: Shell, path: str, body: str) -> None:
    """Write an executable script, the way a colleague once dropped it on the box."""
    quoted = shlex.quote(path)
    shell.run(
        f"mkdir -p $(dirname {quoted}) && cat > {quoted} <<'FIXOS_EOF'\n{body}FIXOS_EOF\nchmod 755 {quoted}"
    )


def spawn_command(command: str, pid: int | None, *, strict: bool = True) -> str:
    """The shell line ``spawn_with_pid`` runs: it prints the new process's PID last.

    Strict, a pin the counter has already passed fails and starts nothing (FixOS
    then calls the episode invalid). Not strict, as a replay with no one to
    report to wants it, the program starts anyway, at whatever PID comes next.
    """
    launch = f"setsid {command} </dev/null >/dev/null 2>&1 & echo $!"
    if pid is None:
        return launch
    counter = "read -r last < /proc/sys/kernel/ns_last_pid"
    climb = f"while [ $last -lt {pid - 1} ]; do : & wait $!; {counter}; done"
    if not strict:
        return f"{counter}; {climb}; {launch}"
    return f"{counter}; if [ $last -ge {pid} ]; then echo PAST $last; false; else {climb}; {launch}; fi"


_SPAWN = re.compile(
    r"(?:read -r last < /proc/sys/kernel/ns_last_pid; (?:if \[ \$last -ge (?P<pid>\d+) \]; "
    r"then echo PAST \$last; false; else )?while .*?; done; )?"
    r"setsid (?P<command>\S+) </dev/null >/dev/null 2>&1 & echo \$!(?:; fi)?"
)


def parse_spawn(line: str) -> tuple[str, int | None] | None:
    """``(command, pid)`` of a line ``spawn_command`` wrote, strict or not; else None."""
    match = _SPAWN.fullmatch(line)
    if not match:
        return None
    climb = re.search(r"while \[ \$last -lt (\d+) \]", line)
    return match.group("command"), int(climb.group(1)) + 1 if climb else None


def spawn_with_pid(shell: Shell, command: str, pid: int | None) -> int:
    """Start ``command`` detached (its own session); with ``pid``, as exactly that PID.

    A fresh PID namespace hands out PIDs in order, so forking throw-away
    children until the counter sits just below ``pid`` makes the next fork get it.
    """
    result = shell.run(spawn_command(command, pid), timeout=10 if pid is None else 60)
    words = result.output.split()
    if result.exit_code != 0 or not words or not words[-1].isdigit():
        raise InvalidEpisode(f"cannot start {command!r} as PID {pid}: {result.output.strip()[-200:]}")
    got = int(words[-1])
    if pid is not None and got != pid:
        raise InvalidEpisode(f"wanted PID {pid} for {command!r} but another process took it (got {got})")
    return got
