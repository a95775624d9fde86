"""Wait for the processes a host is still tearing down before judging it.

``kill`` returns as soon as the signal is queued; the process lets go of its
memory, its open (even deleted) files and its ports only when it next runs and
exits. On a busy machine that is tens of milliseconds later, while a verdict
taken right after an agent's last command starts in a few: a correct repair
would be scored by chance. So the final verdict first waits, briefly and only
while something is actually dying, for the kernel to finish.

A process is dying when it has started to exit (``PF_EXITING`` in
/proc/PID/stat, not yet a zombie) or when a fatal signal is on its way: the
kernel turns a signal the process neither handles, ignores nor blocks into a
pending SIGKILL on every thread at the moment ``kill`` is sent. A process
that catches the signal is left alone: whether it exits is up to it.

A process that has a signal pending that it catches and does not block is about
to act on it: nginx's master with the SIGHUP of ``service nginx reload``, php-fpm's
with SIGUSR2. Until it has, its old workers still answer with the old
configuration (CI: tls_1's oracle, `cp` of the good certificate then `reload`, was
judged while nginx still served the expired one). The verdict waits for that too.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..core.errors import ShellError
from ..shells.base import Shell

# One line per fact, each prefixed by its file: grep -H needs no loop in bash
# and reads a process that vanishes mid-way as nothing.
DYING_PROBE = (
    "grep -s -H -E '^(SigPnd|ShdPnd|SigBlk|SigCgt):' /proc/[0-9]*/status; "
    "grep -s -H '' /proc/[0-9]*/stat; true"
)

_PF_EXITING = 0x4
_SIGKILL = 1 << (9 - 1)
_LINE = re.compile(r"^/proc/(\d+)/(status|stat):(.*)$")

SETTLE_LIMIT = 10.0
"""Longest wait: a host that keeps something dying (a loop of kills) is judged anyway."""


def dying(text: str) -> list[int]:
    """PIDs that are exiting, have a SIGKILL pending, or have a signal pending that they
    catch and do not block (about to act on it), from ``DYING_PROBE``'s output."""
    found: set[int] = set()
    masks: dict[int, dict[str, int]] = {}
    for line in text.splitlines():
        match = _LINE.match(line)
        if match is None:
            continue
        pid, kind, rest = int(match[1]), match[2], match[3]
        if kind == "status":
            field, _, mask = rest.partition(":")
            with contextlib.suppress(ValueError):
                masks.setdefault(pid, {})[field] = int(mask.strip(), 16)
            continue
        # The command name may hold spaces and parentheses: fields start after the last ")".
        fields = rest[rest.rfind(")") + 1 :].split()
        if len(fields) < 7 or fields[0] in ("Z", "X", "x"):
            continue
        with contextlib.suppress(ValueError):
            if int(fields[6]) & _PF_EXITING:
                found.add(pid)
    for pid, mask in masks.items():
        pending = mask.get("SigPnd", 0) | mask.get("ShdPnd", 0)
        if pending & _SIGKILL or pending & mask.get("SigCgt", 0) & ~mask.get("SigBlk", 0):
            found.add(pid)
    return sorted(found)


def dying_on(shell: Shell) -> list[int]:
    """What is dying on the host now; nothing when the host cannot say (no grep, no answer)."""
    try:
        out = shell.run(DYING_PROBE, timeout=10)
    except ShellError:
        return []
    return dying(out.output)


def dying_of(probe: Any) -> list[int]:
    """What is dying on ``probe``'s host now: read from this machine where it can (the
    host's processes' own ``/proc`` entries, ``Facts.dying_text``), else by its shell."""
    read = getattr(probe.access, "facts", None)
    facts = read() if read is not None else None
    return dying(facts.dying_text()) if facts is not None else dying_on(probe.shell)


def wait_for_exits(
    looks: Mapping[str, Shell | Callable[[], list[int]]], *, limit: float = SETTLE_LIMIT, poll: float = 0.02
) -> float:
    """Wait until nothing is dying on any host, at most ``limit`` seconds; the time waited.
    ``looks``: per host, its shell, or a function saying what is dying there."""
    started = time.monotonic()
    pending = dict(looks)
    while pending:
        pending = {
            name: look
            for name, look in pending.items()
            if (dying_on(look) if hasattr(look, "run") else look())  # type: ignore[operator, arg-type]
        }
        if not pending or time.monotonic() - started >= limit:
            break
        time.sleep(poll)
    return time.monotonic() - started
