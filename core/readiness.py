"""Waiting for a socket or channel to have something to read.

``select.select`` refuses file descriptors from 1024 on, and a process that holds many
episodes passes that: 64 OpenEnv sessions with episodes prepared ahead made every new
shell fail with "filedescriptor out of range in select()". ``poll`` has no such bound.
"""

from __future__ import annotations

import select
from typing import Any

_READABLE = select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR


def readable(stream: Any, timeout: float | None) -> bool:
    """Whether ``stream`` (anything with ``fileno()``: a socket, a paramiko channel) can be
    read without blocking (data, end of stream or an error) within ``timeout`` seconds
    (None: wait as long as it takes)."""
    poller = select.poll()
    poller.register(stream, _READABLE)
    wait = None if timeout is None else max(0, round(timeout * 1000))
    return bool(poller.poll(wait))
