"""A persistent bash session over one ``docker exec``.

Docker-py facts this module relies on (and keeps in one place):
- ``exec_create(stdin=True)`` + ``exec_start(socket=True)`` hands back the raw
  connection; writing to it is not a supported API, so we write to the
  underlying socket (``._sock``) the way docker-py's own tests do.
- Without a TTY every chunk comes framed: an 8-byte header
  ``struct.unpack(">BxxxL")`` = (stream, length), stream 1 stdout, 2 stderr.

Each command is handed to bash through a quoted here-document and ``eval``'d in
the session shell itself, so ``cd`` and ``export`` persist and no process is
forked for the framing. After each command the shell saves its cwd and exported
variables to a state file; when a session has to be replaced (a builtin loop
that ignores the kill, or the agent typed ``exit``) the new one starts from it.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import select
import socket
import struct
import time
from typing import Any

from fixos.errors import ShellError
from fixos.models import CommandResult
from shells.base import (
    DEFAULT_TIMEOUT,
    OUTPUT_LIMIT,
    TIMEOUT_EXIT_CODE,
    timeout_marker,
    truncation_marker,
)

CLEAN_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "USER": "root",
    "LOGNAME": "root",
    "SHELL": "/bin/bash",
    "LANG": "C.UTF-8",
    "TERM": "dumb",
}
STATE_DIR = "/run/fixos-shell"
_TAIL = 4096
_GRACE = 3.0
"""seconds to wait for the shell to come back after its command was killed."""


class _Capture:
    """Keeps the first ``limit`` bytes and the last few KiB of a possibly endless stream."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def feed(self, data: bytes) -> None:
        room = self.limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            excess = len(self.tail) - _TAIL
            if excess > 0:
                self.dropped += excess
                del self.tail[:excess]

    def end(self, n: int = 256) -> bytes:
        if len(self.tail) >= n:
            return bytes(self.tail[-n:])
        return bytes(self.head[-(n - len(self.tail)) :] + self.tail)

    def cut_end(self, n: int) -> None:
        from_tail = min(n, len(self.tail))
        if from_tail:
            del self.tail[-from_tail:]
        if n - from_tail:
            del self.head[-(n - from_tail) :]

    def text(self) -> tuple[str, bool]:
        if not self.dropped:
            return (self.head + self.tail).decode("utf-8", errors="replace"), False
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        return head + truncation_marker(self.dropped) + tail, True


class ExecShell:
    """``ExecShell(api, container_id)``: ``api`` is a ``docker.APIClient``."""

    def __init__(
        self,
        api: Any,
        container_id: str,
        *,
        env: dict[str, str] | None = None,
        cwd: str = "/root",
        output_limit: int = OUTPUT_LIMIT,
        default_timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self._api = api
        self._container = container_id
        self._env = dict(CLEAN_ENV if env is None else env)
        self._cwd = cwd
        self.output_limit = output_limit
        self.default_timeout = default_timeout
        self._id = secrets.token_hex(8)
        self._state = f"{STATE_DIR}/{self._id}"
        self._sock: socket.socket | None = None
        self._raw: Any = None
        self._frames = bytearray()
        self._pgid = 0
        self._open(restore=False)

    # -- session lifecycle -------------------------------------------------

    def _open(self, *, restore: bool) -> None:
        try:
            exec_id = self._api.exec_create(
                self._container,
                ["setsid", "--wait", "bash", "--noprofile", "--norc"],
                stdin=True,
                tty=False,
                environment=self._env,
                workdir=self._cwd,
            )["Id"]
            self._raw = self._api.exec_start(exec_id, socket=True)
        except Exception as exc:  # docker.errors.* and connection errors
            raise ShellError(f"cannot open a shell on {self._container[:12]}: {exc}") from exc
        self._exec_id = exec_id
        self._sock = getattr(self._raw, "_sock", self._raw)
        self._frames.clear()
        prelude = f"mkdir -p {STATE_DIR}; unset HISTFILE; builtin echo $$"
        if restore:
            prelude = (
                f"[ -r {self._state}.env ] && . {self._state}.env 2>/dev/null; "
                f"[ -r {self._state}.cwd ] && {{ read -r __fixos_d < {self._state}.cwd; "
                f'cd -- "$__fixos_d" 2>/dev/null; unset __fixos_d; }}; ' + prelude
            )
        result = self._exchange(prelude, timeout=15.0, may_kill=False)
        if result is None or not result[0].strip().isdigit():
            raise ShellError(f"shell on {self._container[:12]} did not start")
        self._pgid = int(result[0].strip())

    def close(self) -> None:
        if self._sock is None:
            return
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_WR)
        with contextlib.suppress(Exception):
            self._raw.close()
        self._sock = None

    def __enter__(self) -> ExecShell:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- running commands --------------------------------------------------

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        if self._sock is None:
            raise ShellError("shell is closed")
        timeout = self.default_timeout if timeout is None else timeout
        started = time.monotonic()
        outcome = self._exchange(command, timeout=timeout, may_kill=True)
        duration = time.monotonic() - started
        if outcome is None:  # the session itself ended, e.g. the command was `exit`
            code = self._exit_code_of_session()
            output = self._last_capture_text
            self._open(restore=True)
            return CommandResult(command, output, code, duration, truncated=self._last_truncated)
        output, code, timed_out, truncated = outcome
        if timed_out:
            output += timeout_marker(timeout)
            code = TIMEOUT_EXIT_CODE
        return CommandResult(command, output, code, duration, timed_out, truncated)

    def _script(self, command: str, nonce: str) -> bytes:
        body = command.replace("\x00", "")
        delim = f"__FIXOS_CMD_{nonce}__"
        return (
            f"IFS= read -r -d '' __fixos_c <<'{delim}'\n{body}\n{delim}\n"
            f'eval "$__fixos_c" </dev/null 2>&1; __fixos_rc=$?; unset __fixos_c; '
            f"{{ builtin pwd >| {self._state}.cwd; builtin export -p >| {self._state}.env; }} "
            f"2>/dev/null; builtin printf '\\n__FIXOS_{nonce}__ %d\\n' $__fixos_rc\n"
        ).encode()

    def _exchange(
        self, command: str, *, timeout: float, may_kill: bool
    ) -> tuple[str, int, bool, bool] | None:
        """Send one command, read to its end marker; None if the session died."""
        nonce = secrets.token_hex(8)
        end = re.compile(rb"\n__FIXOS_" + nonce.encode() + rb"__ (\d+)\n$")
        capture = _Capture(self.output_limit)
        self._last_capture_text, self._last_truncated = "", False
        assert self._sock is not None
        try:
            self._sock.sendall(self._script(command, nonce))
        except OSError:
            return None
        deadline = time.monotonic() + timeout
        timed_out = False
        while True:
            match = end.search(capture.end())
            if match:
                capture.cut_end(len(match.group(0)))
                text, truncated = capture.text()
                return text, int(match.group(1)), timed_out, truncated
            left = deadline - time.monotonic()
            if left <= 0:
                if not may_kill:
                    raise ShellError(f"shell on {self._container[:12]} did not answer in {timeout:g}s")
                if timed_out:
                    # The shell ignores kills of its children (a builtin loop):
                    # replace the whole session.
                    self._last_capture_text, self._last_truncated = capture.text()
                    self._kill_session()
                    self._open(restore=True)
                    text, truncated = capture.text()
                    return text, TIMEOUT_EXIT_CODE, True, truncated
                timed_out = True
                self._kill_children()
                deadline = time.monotonic() + _GRACE
                continue
            if not self._read_frames(capture, min(left, 1.0)):
                self._last_capture_text, self._last_truncated = capture.text()
                return None

    def _read_frames(self, capture: _Capture, wait: float) -> bool:
        """Read what is there within ``wait`` seconds; False at end of stream."""
        assert self._sock is not None
        ready, _, _ = select.select([self._sock], [], [], wait)
        if not ready:
            return True
        try:
            chunk = self._sock.recv(65536)
        except OSError:
            return False
        if not chunk:
            return False
        self._frames += chunk
        while len(self._frames) >= 8:
            _stream, size = struct.unpack(">BxxxL", self._frames[:8])
            if len(self._frames) < 8 + size:
                break
            capture.feed(bytes(self._frames[8 : 8 + size]))
            del self._frames[: 8 + size]
        return True

    # -- out-of-band control ----------------------------------------------

    def _side_exec(self, script: str) -> None:
        exec_id = self._api.exec_create(self._container, ["sh", "-c", script])["Id"]
        self._api.exec_start(exec_id)

    def _kill_children(self) -> None:
        """Kill everything in the session's process group except the shell itself."""
        self._side_exec(
            f"pgrep -g {self._pgid} | grep -vx {self._pgid} | xargs -r kill -KILL 2>/dev/null; true"
        )

    def _kill_session(self) -> None:
        try:
            self._side_exec(f"kill -KILL -- -{self._pgid} 2>/dev/null; true")
        finally:
            self.close()

    def _exit_code_of_session(self) -> int:
        self.close()
        for _ in range(20):
            info = self._api.exec_inspect(self._exec_id)
            if not info.get("Running"):
                return int(info.get("ExitCode") or 0)
            time.sleep(0.05)
        return -1
