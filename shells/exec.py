"""A persistent bash session over one ``docker exec``.

Docker-py facts this module relies on (and keeps in one place):
- ``exec_create(stdin=True)`` + ``exec_start(socket=True)`` hands back the raw
  connection; writing to it is not a supported API, so we write to the
  underlying socket (``._sock``) the way docker-py's own tests do.
- Without a TTY every chunk comes framed: an 8-byte header
  ``struct.unpack(">BxxxL")`` = (stream, length), stream 1 stdout, 2 stderr.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from collections.abc import Sequence
from typing import Any

from ..core.errors import ShellError
from .session import SESSION_COMMAND, SocketSession

END_SECONDS = 10.0
"""how long a closed session's shell may take to exit (it exits at the end of its input)."""


class ExecShell(SocketSession):
    """``ExecShell(api, container_id)``: ``api`` is a ``docker.APIClient``. ``prefix``: argv
    that the session and every side command run under (the judge's way into a host's
    namespaces, ``fixos.stack.judge``), so the PIDs a session reports are the ones its
    side commands signal."""

    def __init__(self, api: Any, container_id: str, *, prefix: Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._api = api
        self._container = container_id
        self._prefix = list(prefix)
        self._raw: Any = None
        self._frames = bytearray()
        self._open(restore=False)

    @property
    def where(self) -> str:
        return f"container {self._container[:12]}"

    def _start(self) -> None:
        self._exec_id = self._api.exec_create(
            self._container,
            [*self._prefix, *SESSION_COMMAND.split()],
            stdin=True,
            tty=False,
            environment=self._env,
            workdir=self._cwd,
        )["Id"]
        self._raw = self._api.exec_start(self._exec_id, socket=True)
        self._sock = getattr(self._raw, "_sock", self._raw)
        self._frames.clear()

    def _read(self, wait: float) -> bytes | None:
        chunk = self._receive(wait)
        if not chunk:
            return chunk
        self._frames += chunk
        out = bytearray()
        while len(self._frames) >= 8:
            _stream, size = struct.unpack(">BxxxL", self._frames[:8])
            if len(self._frames) < 8 + size:
                break
            out += self._frames[8 : 8 + size]
            del self._frames[: 8 + size]
        return bytes(out)

    def _side(self, script: str) -> None:
        exec_id = self._api.exec_create(self._container, [*self._prefix, "sh", "-c", script])["Id"]
        self._api.exec_start(exec_id)

    def _ended_code(self) -> int:
        for _ in range(20):
            info = self._api.exec_inspect(self._exec_id)
            if not info.get("Running"):
                return int(info.get("ExitCode") or 0)
            time.sleep(0.05)
        return -1

    def end(self, timeout: float = END_SECONDS) -> None:
        """Close the session and wait until its shell has exited, so that what it started
        in the background is init's child from then on; ShellError if it still runs after
        ``timeout`` seconds."""
        exec_id = getattr(self, "_exec_id", None)
        self.close()
        if exec_id is None:
            return
        deadline, pause = time.monotonic() + timeout, 0.005
        while self._running(exec_id):
            if time.monotonic() > deadline:
                raise ShellError(f"the session on {self.where} still runs {timeout:g}s after it was closed")
            time.sleep(pause)
            pause = min(pause * 2, 0.2)

    def _running(self, exec_id: str) -> bool:
        try:
            return bool(self._api.exec_inspect(exec_id).get("Running"))
        except Exception as exc:  # the engine's error, translated at the boundary
            raise ShellError(f"cannot tell whether the session on {self.where} ended: {exc}") from exc

    def _stop(self) -> None:
        if self._sock is None:
            return
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_WR)
        with contextlib.suppress(Exception):
            self._raw.close()
        self._sock = None
