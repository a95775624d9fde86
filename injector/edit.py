"""Small shell building blocks shared by faults: literal edits and PID-exact spawns."""

from __future__ import annotations

import shlex

from fixos.errors import InvalidEpisode
from shells.base import Shell

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


def spawn_command(command: str, pid: int | None) -> str:
    """The shell line ``spawn_with_pid`` runs: it prints the new process's PID last."""
    launch = f"setsid {command} </dev/null >/dev/null 2>&1 & echo $!"
    if pid is None:
        return launch
    counter = "read -r last < /proc/sys/kernel/ns_last_pid"
    return (
        f"{counter}; if [ $last -ge {pid} ]; then echo PAST $last; false; else "
        f"while [ $last -lt {pid - 1} ]; do : & wait $!; {counter}; done; {launch}; fi"
    )


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
