"""Evidence that a page is held by the network, read from outside the hosts while it is asked.

A page that does not answer is waited for (``fixos.verifier.http``: 5 s, then 10 s more in a
final verdict), because a loaded machine can hold a healthy page that long. A page whose
request waits on a packet the network holds or lost is not helped by waiting, and on the
bridge between an episode's hosts a packet arrives within a millisecond or not at all. So
while a page is asked, each host's connections are read from this machine as its kernel's
TCP sees them (``fixos.stack.sockdiag.connections``): a connection of a server of the hosts
(nginx's, PHP's, MariaDB's workers) whose SYN has had no answer for ``HELD_SECONDS``, or whose
data TCP had to send again and that has had no ACK that long, since the ask began, holds the
page: the page has failed, and is not asked again.

What it does not see, and leaves to the time-outs: a process that stops answering (its kernel
still acknowledges), a UNIX socket, a host read through a remote engine.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ..core.models import Connection

HELD_SECONDS = 0.5
"""how long a SYN, or data sent again, must have waited unanswered for the network to be said to
hold it. On this bridge a SYN was answered within 0.9 ms at most over 1,000 connects from app to
db beside 100 busy loops (load 72), and 200 page asks at load 29 sent no segment again (of
6,400): 0.5 s is over 500 times the slowest. TCP's own first time-out for a SYN is 1 s."""

SYN_SENT = 2


def _reader(access: Any) -> Any:
    """What reads a host's connections from this machine (its ``facts()``), None where nothing can."""
    facts = getattr(access, "facts", None)
    found = facts() if facts is not None else None
    return found if found is not None and hasattr(found, "servers_holding") else None


def stall_ms(c: Connection) -> int | None:
    """How long ``c`` has had a packet in flight unanswered, in ms: a SYN by its kernel's
    retransmission timer (its first time-out is 1 s, RFC 6298), data that TCP had to send again
    since no data was sent and no ACK came; None when nothing waits so, or when the SYN was
    sent again twice already (2 s or more: a watch looks often enough to see a SYN of its own
    ask before that)."""
    if c.unacked < 1:
        return None
    if c.state == SYN_SENT:
        return (c.timer_ms, 1000 + c.timer_ms)[c.retransmits] if c.retransmits < 2 else None
    return min(c.since_sent_ms, c.since_ack_ms) if c.retransmits >= 1 else None


CLOCKS_MS = 50
"""slack between the kernel's timers (jiffies) and this process's clock."""


class NetworkWatch:
    """Asked while a page is asked: a connection of the hosts' servers that the network holds
    and that began waiting after the ask began (one stuck since an earlier request waits
    longer than the ask has run). Reads nothing before the first look, so a page that answers
    within ``HELD_SECONDS`` costs nothing; watches nothing where no host is read from here."""

    def __init__(self, world: Mapping[str, Any]) -> None:
        self._world = world
        self._readers: dict[str, Any] | None = None
        self.started = time.monotonic()
        self._next = self.started + HELD_SECONDS

    def due(self) -> bool:
        """Whether it is time to look: from ``HELD_SECONDS`` on every 0.1 s, then every fifth of
        the time asked so far, at most 1 s apart (so that a SYN of the ask is seen before it is
        sent a second time); each look walks the kernel's connection table once a host (~1.5 ms)."""
        now = time.monotonic()
        if now < self._next:
            return False
        if self._readers is None:
            self._readers = {n: r for n, access in self._world.items() if (r := _reader(access)) is not None}
        self._next = now + min(1.0, max(0.1, (now - self.started) / 5))
        return bool(self._readers)

    def held(self) -> str | None:
        """Why the page is held by the network, or None while nothing shows it."""
        asked_ms = (time.monotonic() - self.started) * 1000 + CLOCKS_MS
        for name, reader in (self._readers or {}).items():
            waits = {c.inode: (c, stall_ms(c)) for c in reader.connections() or []}
            stuck = {
                i: c
                for i, (c, ms) in waits.items()
                if ms is not None and HELD_SECONDS * 1000 <= ms <= asked_ms
            }
            # only a server's (nginx's, PHP's, MariaDB's workers): a check's own connect from
            # a host (a port probe, the harness's), an agent's client, are no page's request
            servers = reader.servers_holding(set(stuck)) if stuck else {}
            for inode, comm in sorted(servers.items()):
                c = stuck[inode]
                what = "its SYN" if c.state == SYN_SENT else f"{c.unacked} packet(s) sent again"
                return (
                    f"held by the network: {name}'s {comm}, {c.local} -> {c.remote}, has had {what}"
                    f" unanswered over {HELD_SECONDS:g} s (since the page was asked)"
                )
        return None
