"""What a host's container is called on the engine.

A container's name is also a DNS name on its network: the engine's resolver answers
for it beside the host's aliases (``web``, ``app``, ``db``). Past 63 characters (one
DNS label) the peers of a multi-host world stopped answering each other by alias: a
split world's /status hung at its healthy proof whenever the run id and the agent's
name made the name longer (``fixos-<run>-split_1-s1-adversary_repair_open_site-app``,
68 characters). Names are kept within a label: a long one keeps its beginning and
gains a digest of the whole, so it stays unique and readable.
"""

from __future__ import annotations

import hashlib

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
