"""A persistent bash session over any byte stream: the framing every transport shares.

Each command is handed to bash through a quoted here-document and ``eval``'d in
the session shell itself, so ``cd`` and ``export`` persist and no process is
forked for the framing. After each command the shell saves its cwd and exported
variables to a state file; when a session has to be replaced (a builtin loop
that ignores the kill, or the agent typed ``exit``) the new one starts from it.

A transport supplies five things: start a stream running bash, send bytes,
read bytes with a deadline, run a one-off command beside the session, and the
exit code of a session that ended.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import socket
import threading
import time

from ..core.errors import ShellError
from ..core.models import CommandResult
from ..core.readiness import readable
from .base import (
    CLEAN_ENV,
    DEFAULT_TIMEOUT,
    OUTPUT_LIMIT,
    TIMEOUT_EXIT_CODE,
    timeout_marker,
    truncation_marker,
)

STATE_DIR = "/run/fixos-shell"
SESSION_COMMAND = "setsid --wait bash --noprofile --norc"
_TAIL = 4096
_GRACE = 3.0
"""seconds to wait for the shell to come back after its command was killed."""
_SIDE_PATIENCE = 5.0
"""seconds to keep retrying a side command: under PID exhaustion most forks fail, a few get through."""
OPEN_SECONDS = 15.0
"""how long a new session's bash may take to say its pid on a machine with a core to spare
(it takes ~50 ms there); stretched by the machine's load (``open_wait``)."""
OPEN_SECONDS_MOST = 60.0

_END = re.compile(rb"\n__FIXOS_([0-9a-f]{16})__ (\d+)\n$")
"""a command's end marker; the nonce is compared after the match, as one pattern compiled per
command (thousands a run) cost ~50 µs each and pushed every other pattern out of ``re``'s cache."""


def open_wait() -> float:
    """``OPEN_SECONDS`` times the runnable tasks per core when there are more than one:
    with 64 hosts resetting at once on 2 cores (load ~60) a new session once took over 15 s
    to be scheduled, and was taken for a host that kills what joins it. At most
    ``OPEN_SECONDS_MOST``: a session a host stops on purpose is waited for that long."""
    try:
        per_core = os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        per_core = 1.0
    return min(OPEN_SECONDS_MOST, OPEN_SECONDS * max(1.0, per_core))


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


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


class BashSession:
    """The Shell contract on top of a transport's five primitives (see module doc)."""

    def __init__(
        self,
        *,
        env: dict[str, str] | None = None,
        cwd: str = "/root",
        output_limit: int = OUTPUT_LIMIT,
        default_timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self._env = dict(CLEAN_ENV if env is None else env)
        self._cwd = cwd
        self.output_limit = output_limit
        self.default_timeout = default_timeout
        self._state = f"{STATE_DIR}/{secrets.token_hex(8)}"
        self._pgid = 0
        self._open_stream = False
        self._last: tuple[str, bool] = ("", False)
        # Checks may run in threads over one verifier session: one command at a time.
        self._turn = threading.Lock()

    # -- what a transport provides ------------------------------------------

    @property
    def where(self) -> str:
        raise NotImplementedError

    def _start(self) -> None:
        """Start ``SESSION_COMMAND`` with ``self._env`` in ``self._cwd``."""
        raise NotImplementedError

    def _send(self, data: bytes) -> None:
        raise NotImplementedError

    def _read(self, wait: float) -> bytes | None:
        """Output that arrived within ``wait`` seconds (maybe b""); None at end of stream."""
        raise NotImplementedError

    def _side(self, script: str) -> None:
        """Run a one-off command on the host, beside the session, and wait for it."""
        raise NotImplementedError

    def _ended_code(self) -> int:
        """Exit code of a session whose stream ended."""
        raise NotImplementedError

    def _stop(self) -> None:
        """Close the stream (the shell sees end of input)."""
        raise NotImplementedError

    # -- lifecycle ------------------------------------------------------------

    def _open(self, *, restore: bool) -> None:
        try:
            self._start()
        except ShellError:
            raise
        except Exception as exc:  # transport errors, translated at the boundary
            raise ShellError(f"cannot open a shell on {self.where}: {exc}") from exc
        self._open_stream = True
        # No fork once the state directory exists: a host short of PIDs still gets a session.
        prelude = f"[ -d {STATE_DIR} ] || mkdir -p {STATE_DIR}; unset HISTFILE; builtin echo $$"
        if restore:
            prelude = (
                f"[ -r {self._state}.env ] && . {self._state}.env 2>/dev/null; "
                f"[ -r {self._state}.cwd ] && {{ read -r __fixos_d < {self._state}.cwd; "
                f'cd -- "$__fixos_d" 2>/dev/null; unset __fixos_d; }}; ' + prelude
            )
        result = self._exchange(prelude, timeout=open_wait(), may_kill=False)
        said = result[0].strip().splitlines() if result is not None else []
        if not said or not said[-1].isdigit():
            heard = " ".join(" ".join(said).split())[:120]
            raise ShellError(f"shell on {self.where} did not start ({heard or 'no answer'})")
        self._pgid = int(said[-1])

    def close(self) -> None:
        if self._open_stream:
            self._open_stream = False
            self._stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- running commands -----------------------------------------------------

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        with self._turn:
            try:
                return self._run(command, timeout)
            except Exception as exc:
                # The contract's boundary: a session that failed mid-command (its command
                # could not be killed, its transport broke) is lost; a transport's own
                # error (paramiko, docker-py, OSError) becomes a ShellError, never escapes.
                self._abandon()
                if isinstance(exc, ShellError):
                    raise
                raise ShellError(
                    f"shell on {self.where} lost: {type(exc).__name__}: {_one_line(exc)}"
                ) from exc

    def _abandon(self) -> None:
        """Forget a session whose transport failed mid-command; later runs say it is closed."""
        self._open_stream = False
        with contextlib.suppress(Exception):
            self._stop()

    def _run(self, command: str, timeout: float | None) -> CommandResult:
        if not self._open_stream:
            raise ShellError("shell is closed")
        timeout = self.default_timeout if timeout is None else timeout
        started = time.monotonic()
        outcome = self._exchange(command, timeout=timeout, may_kill=True)
        duration = time.monotonic() - started
        if outcome is None:  # the session itself ended, e.g. the command was `exit`
            output, truncated = self._last
            self._open_stream = False
            code = self._ended_code()
            self._stop()
            self._open(restore=True)
            return CommandResult(command, output, code, duration, truncated=truncated)
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
        capture = _Capture(self.output_limit)
        self._last = ("", False)
        try:
            self._send(self._script(command, nonce))
        except OSError:
            return None
        deadline = time.monotonic() + timeout
        timed_out = False
        while True:
            match = _END.search(capture.end())
            if match and match.group(1) == nonce.encode():
                capture.cut_end(len(match.group(0)))
                text, truncated = capture.text()
                return text, int(match.group(2)), timed_out, truncated
            left = deadline - time.monotonic()
            if left <= 0:
                if not may_kill:
                    raise ShellError(f"shell on {self.where} did not answer in {timeout:g}s")
                if timed_out:
                    # The shell ignores kills of its children (a builtin loop):
                    # replace the whole session.
                    self._kill_session()
                    self._reopen_patiently()
                    text, truncated = capture.text()
                    return text, TIMEOUT_EXIT_CODE, True, truncated
                timed_out = True
                self._kill_children()
                deadline = time.monotonic() + _GRACE
                continue
            chunk = self._read(min(left, 1.0))
            if chunk is None:
                self._last = capture.text()
                return None
            if chunk:
                capture.feed(chunk)

    def _side_patiently(self, script: str) -> None:
        """``_side``, retried while the host cannot fork (a fork bomb fills its PID limit)."""
        deadline = time.monotonic() + _SIDE_PATIENCE
        pause = 0.05
        while True:
            try:
                self._side(script)
                return
            except Exception as exc:
                if time.monotonic() + pause > deadline:
                    raise ShellError(
                        f"cannot run a command beside the shell on {self.where}: {_one_line(exc)}"
                    ) from exc
            time.sleep(pause)
            pause = min(pause * 2, 0.5)

    def _reopen_patiently(self) -> None:
        """A new session after a kill: the host may still be reaping what was killed."""
        deadline = time.monotonic() + _SIDE_PATIENCE
        while True:
            try:
                self._open(restore=True)
                return
            except ShellError:
                self.close()
                if time.monotonic() + 1.0 > deadline:
                    raise
            time.sleep(1.0)

    def _kill_children(self) -> None:
        """Kill everything in the session's process group except the shell itself."""
        self._side_patiently(
            f"pgrep -g {self._pgid} | grep -vx {self._pgid} | xargs -r kill -KILL 2>/dev/null; true"
        )

    def _kill_session(self) -> None:
        # One process, kill a builtin: it gets through when a fork bomb leaves few PIDs.
        # Again until the group is empty: a bomb forks while the first kill goes round.
        try:
            self._side_patiently(
                f"n=0; while kill -KILL -- -{self._pgid} 2>/dev/null && [ $n -lt 1000 ]; "
                "do n=$((n+1)); done; true"
            )
        finally:
            self.close()


class SocketSession(BashSession):
    """A session whose stream is a plain socket (an engine exec's, a unix socket's)."""

    _sock: socket.socket | None = None

    def _send(self, data: bytes) -> None:
        assert self._sock is not None
        self._sock.sendall(data)

    def _receive(self, wait: float) -> bytes | None:
        """What the socket holds within ``wait`` seconds (maybe b""); None at its end."""
        assert self._sock is not None
        if not readable(self._sock, wait):
            return b""
        try:
            chunk = self._sock.recv(65536)
        except OSError:
            return None
        return chunk or None
