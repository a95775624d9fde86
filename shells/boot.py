"""The first sessions on a host, the harness's and the agent's, opened without an engine exec.

A host started on an engine of this machine runs ``fixos-init`` first (``images/server``):
it forks a listener on a unix socket in the host's /run, then becomes the host's init. This
machine reaches the socket through the host's root (``/proc/<pid>/root``, held open as a
directory by ``fixos.stack.host_files``); the listener takes that one connection, removes
its socket and runs the command line sent first, as the judge's ``judge-serve`` does. The
session costs a fork in the host instead of an engine exec (~45 CPU-ms of dockerd,
containerd and runc); the host's cgroup, capabilities, seccomp filter and limits are its
init's, as an exec's are.

The agent's first session on the login host is a ``BootShell`` over a ``Pipes`` stream: a
shell the harness's session starts on two FIFOs, which this machine opens through the host's
root (``fixos.stack.boot_session.handed_over``).

Their shells are init's children, where an exec's has no parent in the host: the
steady-state gate on processes leaves them out by PID while they are open
(``fixos.verifier.running``); the harness ends its own before any agent comes
(``fixos.episodes.phases.end_sessions``), and the final verdict the agent's. A session that
must be opened again, and every command beside one, go through the engine.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from ..core.errors import ShellError
from .exec import END_SECONDS, ExecShell
from .session import SESSION_COMMAND, open_wait
from .unix import command_line, connect

SOCKET = "/run/fixos-harness/session.sock"
"""where ``fixos-init``'s listener waits, inside the host."""
CONNECT_SECONDS = 5.0
"""how long a harness waits for the socket to appear once the host started (the listener
binds it ~20 ms after the start; under load, later; it waits a minute for a caller)."""


class Pipes:
    """Two FIFOs' descriptors as the one stream a session speaks over: what the shell reads,
    what it writes (``BootShell`` handed over by another session: ``fixos.stack.boot_session``)."""

    def __init__(self, to_shell: int, from_shell: int) -> None:
        self._to, self._from = to_shell, from_shell
        os.set_blocking(to_shell, True)  # both opened without blocking: each waits for the shell's end
        os.set_blocking(from_shell, True)  # the session reads only what poll says is there

    def fileno(self) -> int:
        return self._from

    def sendall(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._to, view) :]

    def recv(self, size: int) -> bytes:
        return os.read(self._from, size)

    def shutdown(self, how: int) -> None:
        self._close_to()

    def _close_to(self) -> None:
        to, self._to = self._to, -1
        if to >= 0:
            os.close(to)

    def close(self) -> None:
        self._close_to()
        fd, self._from = self._from, -1
        if fd >= 0:
            os.close(fd)


class BootShell(ExecShell):
    """``BootShell(api, container_id, root)``: ``root`` is a path of this machine to the host's
    root directory. ShellError when the listener does not answer (the caller then opens an
    ``ExecShell``). ``stream``, when given, opens the first stream instead of the boot's
    socket (a session another one handed over). ``read`` reads a file inside the host (its
    shell's exit status: init, its parent, reports it to no one)."""

    def __init__(
        self,
        api: Any,
        container_id: str,
        root: str,
        *,
        stream: Callable[[], Any] | None = None,
        read: Callable[[str], bytes | None] = lambda path: None,
        **kw: Any,
    ) -> None:
        self._root = root
        self._first = stream or self._boot_socket
        self._read_file = read
        self._listener = True  # the first open only: the listener takes one connection
        self._ended: list[Callable[[], None]] = []
        super().__init__(api, container_id, **kw)
        self.pid = self._pgid
        """the shell's PID in the host (init's child)."""

    def on_end(self, call: Callable[[], None]) -> None:
        """Have ``call`` run once the listener's shell is closed (it then exits: ``end`` waits
        for that) or lost (a session opened again is an exec)."""
        self._ended.append(call)

    def close(self) -> None:
        super().close()
        self._run_ended()

    def _run_ended(self) -> None:
        calls, self._ended = self._ended, []
        for call in calls:
            call()

    @property
    def where(self) -> str:
        return f"container {self._container[:12]} ({'its boot socket' if self._listener else 'exec'})"

    def _start(self) -> None:
        if not self._listener:
            super()._start()
            return
        self._sock = self._first()
        self._raw = self._sock

    def _boot_socket(self) -> Any:
        path = self._root + SOCKET
        deadline = time.monotonic() + CONNECT_SECONDS
        while True:
            try:
                sock = connect(path)
                break
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise ShellError(f"no listener at the boot socket of {self.where}: {exc}") from None
                time.sleep(0.01)
        try:
            sock.sendall(command_line((), SESSION_COMMAND.split(), env=self._env, cwd=self._cwd))
        except OSError as exc:
            sock.close()
            raise ShellError(f"cannot open a shell on {self.where}: {exc}") from exc
        return sock

    def _open(self, *, restore: bool) -> None:
        if restore and self._listener:  # it took its one connection: a session opened again is an exec
            self._listener = False
            self._run_ended()
        super()._open(restore=restore)
        if self._listener:  # `exit N` reports N, as an exec's session does
            trap = f"trap 'builtin echo $? >| {self._state}.exit' EXIT"
            if self._exchange(trap, timeout=open_wait(), may_kill=False) is None:
                raise ShellError(f"shell on {self.where} ended as it opened")

    def _read(self, wait: float) -> bytes | None:
        if self._listener:
            return self._receive(wait)  # the shell's own stream: no engine framing
        return super()._read(wait)

    def _ended_code(self) -> int:
        if self._listener:  # its EXIT trap's; -1 when it died of a signal or the trap was replaced
            said = (self._read_file(self._state + ".exit") or b"").strip()
            return int(said) if said.isdigit() else -1
        return super()._ended_code()

    def end(self, timeout: float = END_SECONDS) -> None:
        if not self._listener:
            super().end(timeout)
            return
        self.close()
        deadline, pause = time.monotonic() + timeout, 0.002
        while os.path.exists(f"{self._root}/proc/{self.pid}"):  # init reaps it as it exits
            if time.monotonic() > deadline:
                raise ShellError(f"the session on {self.where} still runs {timeout:g}s after it was closed")
            time.sleep(pause)
            pause = min(pause * 2, 0.1)
