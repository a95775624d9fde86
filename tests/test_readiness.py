"""Shells and relays wait on descriptors past 1023, where ``select.select`` gives up
(64 OpenEnv sessions with prepared episodes got there)."""

from __future__ import annotations

import os
import resource
import select
import socket

import pytest

from fixos.core.readiness import readable

HIGH = 2000


class High:
    """A descriptor numbered past select()'s limit, standing for a socket of a busy process."""

    def __init__(self, fd: int) -> None:
        self.fd = os.dup2(fd, HIGH)

    def fileno(self) -> int:
        return self.fd


def test_readable_waits_on_a_descriptor_select_refuses():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= HIGH:
        pytest.skip(f"the hard limit on open files is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, HIGH + 1), hard))
    ours, theirs = socket.socketpair()
    high = High(ours.fileno())
    try:
        with pytest.raises(ValueError, match="out of range"):
            select.select([high], [], [], 0)
        assert not readable(high, 0.05), "nothing sent yet"
        theirs.sendall(b"x")
        assert readable(high, 1.0)
        assert os.read(high.fd, 1) == b"x"
        theirs.close()
        assert readable(high, 1.0), "end of stream is readable too"
    finally:
        os.close(high.fd)
        ours.close()
        theirs.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_server_raises_its_open_files_limit_toward_the_hard_one():
    from fixos.server.app import _allow_open_files

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 1024:
        pytest.skip(f"the hard limit on open files is {hard}")
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
        _allow_open_files()
        raised = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        assert raised == (65536 if hard == resource.RLIM_INFINITY else min(65536, hard)) > 1024
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
