"""What a host's container is called on the engine.

A container's name is also a DNS name on its network: the engine's resolver answers
for it beside the host's aliases (``web``, ``app``, ``db``). Past 63 characters (one
DNS label) the peers of a multi-host world stopped answering each other by alias: a
split world's /status hung at its healthy proof whenever the run id and the agent's
name made the name longer (``fixos-<run>-split_1-s1-adversary_repair_open_site-app``,
68 characters). Names are kept within a label: a long one keeps its beginning and
gains a digest of the whole, so it stays unique and readable.

Who owns a container is a label too: this process, named so that PID reuse cannot
pass for it (``owner_label``), so that the next command can sweep what a dead run left.
"""

from __future__ import annotations

import hashlib
import os
import socket

MAX_NAME = 63
"""one DNS label."""


def container_name(episode_id: str, host: str) -> str:
    """``fixos-<episode>-<host>``, shortened to at most ``MAX_NAME`` characters."""
    name = f"fixos-{episode_id}-{host}"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    keep = MAX_NAME - len(f"fixos--{digest}-{host}")
    return f"fixos-{episode_id[:keep]}-{digest}-{host}"


def _start_time(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "0"


def owner_label() -> str:
    """This process, in a form that survives PID reuse."""
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_start_time(pid)}"


def owner_alive(label: str) -> bool:
    host, _, rest = label.partition(":")
    pid, _, started = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another machine's run: not ours to judge
    return os.path.exists(f"/proc/{pid}") and _start_time(int(pid)) == started
