"""A persistent bash session over one connection to a unix socket whose server runs the
command line it is sent first, then hands it the connection (the judge's ``judge-serve``
behind socat: ``images/inspector``).

It replaces a ``docker exec`` per session where this machine reaches the server's socket
(the judge's, through ``/proc/<pid>/root``): opening one costs a fork in the judge, ~4 ms,
instead of the engine's ~70 CPU-ms. The stream is the program's own: no framing, stderr
joined to stdout by the server.
"""

from __future__ import annotations

import contextlib
import shlex
import socket
import time
from collections.abc import Sequence
from typing import Any

from ..core.errors import ShellError
from ..core.readiness import readable
from .session import SESSION_COMMAND, SocketSession

CONNECT_TIMEOUT = 5.0
SIDE_TIMEOUT = 30.0
"""how long a command beside the session may run (a kill of a session's children)."""


def command_line(prefix: Sequence[str], argv: Sequence[str], *, env: dict[str, str], cwd: str) -> bytes:
    """The first line sent: ``argv`` under ``prefix``, with exactly ``env``, in ``cwd``."""
    words = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    run = shlex.join([*prefix, *argv])
    return f"cd {shlex.quote(cwd)} 2>/dev/null; exec env -i {words} {run}\n".encode()


def connect(path: str, timeout: float = CONNECT_TIMEOUT) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        raise
    sock.settimeout(None)
    return sock


class UnixShell(SocketSession):
    """``UnixShell(path, prefix=...)``: ``prefix`` as for ``ExecShell`` (the judge's way into a
    host's namespaces), so the PIDs a session reports are the ones its side commands signal."""

    def __init__(self, path: str, *, prefix: Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._path = path
        self._prefix = list(prefix)
        self._open(restore=False)

    @property
    def where(self) -> str:
        return f"unix socket {self._path}"

    def _start(self) -> None:
        try:
            self._sock = connect(self._path)
            self._sock.sendall(
                command_line(self._prefix, SESSION_COMMAND.split(), env=self._env, cwd=self._cwd)
            )
        except OSError as exc:
            self._stop()
            raise ShellError(f"cannot open a shell on {self.where}: {exc}") from exc

    def _read(self, wait: float) -> bytes | None:
        return self._receive(wait)

    def _side(self, script: str) -> None:
        deadline = time.monotonic() + SIDE_TIMEOUT
        with connect(self._path) as side:
            side.sendall(command_line(self._prefix, ["sh", "-c", script], env=self._env, cwd=self._cwd))
            side.shutdown(socket.SHUT_WR)
            while (left := deadline - time.monotonic()) > 0:
                if readable(side, left) and not side.recv(65536):
                    return
        raise OSError(f"a command beside the session did not end in {SIDE_TIMEOUT:g}s")

    def _ended_code(self) -> int:
        # The socket carries no exit status; a judge's session that ended is a broken
        # judgement whatever its code (``fixos.episodes.inspection``).
        return -1

    def _stop(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_WR)
            sock.close()
